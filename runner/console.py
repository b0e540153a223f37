"""What every `spillage` command shares: its exit statuses, its one line on stderr, its spillage home.

| status | meaning |
|---|---|
| 0 | done |
| 1 | the evidence does not verify (damaged, tampered, sealed after a crash), or two sessions differ |
| 2 | bad input or usage: one line naming the file and the place |
| 3 | the agent failed: it could not start, stopped on an error, timed out, or its model does not answer |
| 70 | an error of ours (a bug): one line, and the traceback saved to a file named in it |
| 130 | interrupted (Ctrl-C) |
"""

import os
import sys
from pathlib import Path

OK, DAMAGED, BAD_INPUT, AGENT_FAILED, INTERNAL, INTERRUPTED = 0, 1, 2, 3, 70, 130
DEFAULT_HOME = Path(".spillage")
DEFAULT_RUNS = Path("runs")
ISOLATION = ("sandbox", "none")   # how `run` keeps the agent from the evidence (runner/sandbox.py)


def progress(message: str) -> None:
    """Progress and problems go to stderr, one line each, so stdout stays for results."""
    print(f"spillage: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def fail(message: str, status: int = BAD_INPUT) -> int:
    """Say `message` as the command's one line on stderr; `status`."""
    progress(message)
    return status


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



def utf8_text(text: str) -> str:
    """An argparse type for free text kept in a record: UTF-8 only (an undecodable byte of the command
    line reaches Python as a lone surrogate)."""
    import argparse

    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise argparse.ArgumentTypeError(f"not UTF-8 text (character {e.start + 1})") from None
    return text
