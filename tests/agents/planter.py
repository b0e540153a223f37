"""An agent that leaves something else than files under the names the runner reads once it is done
(agent.stderr, outcome.json), then fails (tests/test_isolation.py).

    python planter.py fifo      a FIFO no one writes to
    python planter.py devzero   a symbolic link to /dev/zero
    python planter.py key       a symbolic link to the signing key in $SPILLAGE_HOSTILE_HOME

Before that it says one last error line on its stderr: what the runner should record.
"""

import os
import sys
from pathlib import Path

WORK = Path(os.environ["SPILLAGE_WORK"])
TARGETS = {"devzero": "/dev/zero",
           "key": str(Path(os.environ.get("SPILLAGE_HOSTILE_HOME", "/nonexistent")) / "signing" / "ed25519.pem")}

print("planter: the last line it said", file=sys.stderr, flush=True)
for name in ("agent.stderr", "outcome.json"):
    path = WORK / name
    path.unlink(missing_ok=True)
    if sys.argv[1] == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(TARGETS[sys.argv[1]])
sys.exit(1)
