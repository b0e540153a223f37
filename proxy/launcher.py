"""The mitmdump command line that runs our addons."""

import sys
from pathlib import Path

import spillage.addons
from spillage.proxy.ca import CertAuthority

ADDON_SCRIPT = Path(spillage.addons.__file__).parent / "bundle.py"


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
) -> list[str]:
    """argv for mitmdump on 127.0.0.1:`port` with our addons, capturing into `session_dir`; requests to
    `model_hosts` (HOST:PORT) pass the egress policy."""
    argv = [
        str(mitmdump_path()),
        "--listen-host", "127.0.0.1",
        "--listen-port", str(port),
        "--set", f"confdir={ca.confdir}",
        "--set", "connection_strategy=lazy",
        "--set", "flow_detail=0",
        "-s", str(ADDON_SCRIPT),
        "--set", f"spillage_origin={origin}",
    ]
    if session_dir is not None:
        argv += ["--set", f"spillage_session={session_dir}"]
    if inline_limit is not None:
        argv += ["--set", f"spillage_inline_limit={inline_limit}"]
    for host in model_hosts:
        argv += ["--set", f"spillage_model_hosts={host}"]
    return argv
