"""The `spillage` command: one room for every verb (runner/cli/verbs.py says how one joins) and `main`,
the one boundary where every error becomes one line on stderr and an exit status (proxy/settings.py).

The verbs, in the order `spillage --help` lists them: run, batch, proxy start (run.py); origins and
scenarios (sites.py); verify, seal, prove, verify-proof, key (evidence.py); audit (audit.py); report,
inspect (reports.py); import, export (files.py); replay, diff (replay.py).
"""

import argparse
import os
import sys

from spillage.proxy.settings import AGENT_FAILED
from spillage.proxy.settings import BAD_INPUT
from spillage.proxy.settings import INTERNAL
from spillage.proxy.settings import INTERRUPTED
from spillage.proxy.settings import exit_status_text
from spillage.runner.cli import run, sites, evidence, audit, reports, files, replay  # noqa: F401 - they register
from spillage.runner.cli.console import progress
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import add_verbs


class Parser(argparse.ArgumentParser):
    """argparse with the one line every other bad input gets (`spillage: batch: argument --jobs: …`),
    exit 2. Its subcommands' parsers are of this class too."""

    def error(self, message: str):
        command = self.prog.removeprefix("spillage").strip()
        progress(f"{command + ': ' if command else ''}{message} (`{self.prog} --help` lists the options)")
        self.exit(BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="spillage", description="Capture and audit what web agents reveal about their users.",
                    epilog=exit_status_text())
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--home", help="folder for the CA, the signing key and other state "
                                       "(default $SPILLAGE_HOME or ./.spillage)")
    add_verbs(parser.add_subparsers(dest="cmd", required=True))
    return parser


def input_errors() -> tuple[type[Exception], ...]:
    """The errors that are one line for the user: bad input, or a child (origins, proxy) that failed."""
    from spillage.addons.mitm.ca import CertAuthorityError
    from spillage.origins.grammar import ProfileError
    from spillage.proxy.capturelog import CaptureError
    from spillage.proxy.documents import DocumentError
    from spillage.proxy.signing import SigningKeyError
    from spillage.runner.children import ChildError
    from spillage.scenarios.loader import ScenarioError

    return ScenarioError, CaptureError, ProfileError, ChildError, CertAuthorityError, SigningKeyError, DocumentError


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error ends as one line on stderr and a status of proxy/settings.py."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Refusal as e:
        progress(str(e))
        return e.status
    except input_errors() as e:  # evaluated only when an error comes: a command imports what it uses, no more
        from spillage.runner.children import ChildError

        progress(str(e))
        return AGENT_FAILED if isinstance(e, ChildError) else BAD_INPUT
    except (RecursionError, MemoryError) as e:
        progress(f"the input is nested too deeply or too large to read ({type(e).__name__})")
        return BAD_INPUT
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:  # `spillage diff A B | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the one boundary: a bug of ours, said once, kept whole
        return internal_error(e)


def internal_error(error: BaseException) -> int:
    """One line naming the error and the file its traceback was saved to; status 70."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="spillage-crash-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"spillage {version_text()}\n{' '.join(sys.argv)}\n\n")
        traceback.print_exception(error, file=f)
    progress(f"internal error: {type(error).__name__}: {error} (a bug; the traceback is in {path})")
    return INTERNAL


class VersionAction(argparse.Action):
    """`--version`: the versions are looked up only when asked for (importlib.metadata is slow to import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the versions of spillage, mitmproxy and Python, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"spillage {version_text()}")
        parser.exit()


def version_text() -> str:
    """`spillage --version`: ours and mitmproxy's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version

    from spillage.proxy.version import SPILLAGE_VERSION

    try:
        mitmproxy = version("mitmproxy")
    except PackageNotFoundError:
        mitmproxy = "not installed"
    return f"{SPILLAGE_VERSION} (mitmproxy {mitmproxy}, Python {sys.version.split()[0]})"
