"""How a verb joins the `spillage` command, the same way for all: `@verb(NAME, help, args)` over the function
that runs it, whose docstring is the verb's description in `--help`. The function takes the parsed
arguments and returns an exit status (proxy/settings.py), or raises Refusal, or lets an input error go:
main (runner/cli/__init__.py) is the one boundary that turns every error into one line on stderr and its
status.

Arguments are data (`arg`, `one_of`); those several verbs take are here once.
"""

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.proxy.settings import BAD_INPUT
from spillage.proxy.settings import DEFAULT_RUNS
from spillage.proxy.settings import SEED
from spillage.proxy.settings import STYLES
from spillage.proxy.settings import Setting


class Refusal(Exception):
    """A verb's answer instead of its result: `message` as its one line on stderr, and `status`."""

    def __init__(self, message: str, status: int = BAD_INPUT):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Arg:
    """One `add_argument`: its flags (or name) and its options."""

    flags: tuple[str, ...]
    options: dict = field(default_factory=dict)

    def add(self, parser) -> None:
        parser.add_argument(*self.flags, **self.options)


@dataclass(frozen=True)
class OneOf:
    """Arguments of which one must be given."""

    args: tuple[Arg, ...]

    def add(self, parser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        for a in self.args:
            a.add(group)


def arg(*flags: str, **options) -> Arg:
    return Arg(flags, options)


def one_of(*args: Arg) -> OneOf:
    return OneOf(args)


def setting(value: Setting, **options) -> Arg:
    """The flag of a setting of proxy/settings.py, with its default and help."""
    return arg(value.flag, default=value.default, help=value.help, **options)


@dataclass(frozen=True)
class Verb:
    """A command: `name` ("verify", or "proxy start" in a group), the function that runs it, its help."""

    name: str
    run: Callable[..., int]
    help: str
    description: str | None
    args: tuple


VERBS: list[Verb] = []   # in the order `spillage --help` lists them
GROUPS = {"proxy": "the capturing proxy", "origins": "our local sites", "scenarios": "the scenario benchmark"}


def verb(name: str, help: str, args=()):
    """Register the decorated function as the verb `name`; its docstring, if any, describes it."""
    def register(run: Callable[..., int]) -> Callable[..., int]:
        VERBS.append(Verb(name, run, help, run.__doc__, tuple(args)))
        return run
    return register


def add_verbs(sub) -> None:
    """Add every registered verb to the subparsers `sub` of the `spillage` parser, the grouped ones
    ("proxy start") under their group's parser."""
    groups = {}
    for v in VERBS:
        group, _, leaf = v.name.rpartition(" ")
        if group and group not in groups:
            groups[group] = sub.add_parser(group, help=GROUPS[group]).add_subparsers(dest=f"{group}_cmd",
                                                                                  required=True)
        parser = (groups[group] if group else sub).add_parser(leaf, help=v.help, description=v.description)
        for a in v.args:
            a.add(parser)
        parser.set_defaults(func=v.run)


# -- the arguments several verbs take ---------------------------------------------------------------------

KEY_HELP = ("pin the long-term key that must have certified the session: a fingerprint (ed25519:…), a "
            "base64 public key, or a PEM file (`spillage key` prints this machine's)")
KEY = arg("--key", metavar="KEY", help=KEY_HELP)
RUNS_DIR = arg("--runs-dir", type=Path, default=DEFAULT_RUNS, help="where the session folder goes (default runs)")
SCENARIO_PATHS = arg("paths", nargs="*", type=Path, help="files or folders (default: the benchmark)")
LIVE = arg("--live", action="append", metavar="HOST[,HOST...]",
           help="let requests to these real hosts through, captured and signed (NAME, *.NAME for the names under "
                "it, :PORT; @FILE for one a line); every other host stays refused (README, Live sites)")


def style(help: str) -> Arg:
    return arg("--style", choices=STYLES, help=help)


def session_arg(help: str = "session folder") -> Arg:
    return arg("session", type=Path, help=help)


def quiet(help: str) -> Arg:
    return arg("--quiet", action="store_true", help=help)


def catalog_seed(help: str) -> Arg:
    return arg("--seed", type=int, default=SEED.default, help=help)


def require_sessions(*folders: Path) -> None:
    """Refuse a folder of `folders` that holds no capture log."""
    from spillage.proxy.layout import LOG_NAME

    for folder in folders:
        if not (Path(folder) / LOG_NAME).is_file():
            raise Refusal(f"{folder}: no {LOG_NAME} here; is this a session folder?")
