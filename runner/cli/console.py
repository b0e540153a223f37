"""What every verb shares on the console: its one line on stderr, its result on stdout, its spillage home.
The exit statuses are proxy/settings.py's."""

import os
import sys
from pathlib import Path

from spillage.proxy.settings import DEFAULT_HOME


def progress(message: str) -> None:
    """Progress and problems go to stderr, one line each, so stdout stays for results."""
    print(f"spillage: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def print_result(text: str, status: int) -> int:
    """Print a command's result `text` on stdout; `status`, also when the reader has closed the pipe
    (`spillage diff A B | head -1` still says whether the sessions differ)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
    return status


def spillage_home(args) -> Path:
    """The folder of the CA, the signing key and other state: --home, $SPILLAGE_HOME or ./.spillage."""
    return Path(getattr(args, "home", None) or os.environ.get("SPILLAGE_HOME") or DEFAULT_HOME).resolve()
