"""The mitmdump command line that runs our addons, and its environment."""

import os
import sys
from importlib.util import find_spec
from pathlib import Path

from spillage.proxy.live import FAKE_INTERNET_ENV
from spillage.addons.mitm.ca import CertAuthority
from spillage.addons.options import INLINE_LIMIT
from spillage.addons.options import LIVE
from spillage.addons.options import LIVE_MAP
from spillage.addons.options import MODEL_HOSTS
from spillage.addons.options import ORIGIN
from spillage.addons.options import SESSION
from spillage.addons.options import SIGNER_FD

# Located by name: the evidence core never imports the addons (they import it).
ADDON_SCRIPT = Path(find_spec("spillage.addons.bundle").origin)
GUARDED_SCRIPT = Path(find_spec("spillage.addons.guarded").origin)   # the same, with the leak guard


def mitmdump_path() -> Path:
    """The mitmdump next to the running interpreter (the project's venv)."""
    return Path(sys.executable).parent / "mitmdump"


def mitmdump_command(
    ca: CertAuthority,
    origin: str,
    session_dir: Path | None,
    port: int = 0,
    inline_limit: int | None = None,
    model_hosts: tuple[str, ...] = (),
    signer_fd: int | None = None,
    guarded: bool = False,
    live: tuple[str, ...] = (),
) -> list[str]:
    """argv for mitmdump on 127.0.0.1:`port` with our addons (and the leak guard when `guarded`; its
    options are the caller's), capturing into `session_dir`; requests to `model_hosts` (HOST:PORT)
    pass the egress policy, and so do requests to the `live` hosts (proxy/live.py patterns), reached
    through the tests' fake internet when $SPILLAGE_FAKE_INTERNET names one; the log is signed with the
    session key the runner writes to the inherited pipe `signer_fd`. Run it with `mitmdump_env(ca)`:
    that is how it finds its CA."""
    argv = [
        str(mitmdump_path()),
        "--listen-host", "127.0.0.1",
        "--listen-port", str(port),
        "--set", "connection_strategy=lazy",
        "--set", "flow_detail=0",
        "-s", str(GUARDED_SCRIPT if guarded else ADDON_SCRIPT),
        *ORIGIN.set(origin),
    ]
    if session_dir is not None:
        argv += SESSION.set(session_dir)
    if inline_limit is not None:
        argv += INLINE_LIMIT.set(inline_limit)
    if signer_fd is not None:
        argv += SIGNER_FD.set(signer_fd)
    for host in model_hosts:
        argv += MODEL_HOSTS.set(host)
    for pattern in live:
        argv += LIVE.set(pattern)
    if live and os.environ.get(FAKE_INTERNET_ENV):
        argv += LIVE_MAP.set(os.environ[FAKE_INTERNET_ENV])
    return argv


def mitmdump_env(ca: CertAuthority, environ: dict | None = None) -> dict[str, str]:
    """The proxy's environment: `environ` (default: ours) with HOME set to the CA's `home`, so that
    mitmproxy's default confdir, ~/.mitmproxy, is our CA's folder. Setting the `confdir` option instead
    makes mitmproxy 12 read and check the CA key twice as it starts (once when the option is set, again
    when it runs: the FIXME in mitmproxy/addons/tlsconfig.py), 30-40 ms of the proxy's start-up.
    This also keeps the user's own ~/.mitmproxy (its CA, its config.yaml) out of our proxy."""
    return {**(os.environ if environ is None else environ), "HOME": str(ca.home)}
