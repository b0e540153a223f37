"""The one table of defaults and names that the command line, the runner, the matrix reader, the scenario
model and the docs read (tests/test_settings.py checks the README and `spillage --help` against it).

Plain data, importing nothing: every room may read it (tests/test_rooms.py). The proxy's own option
names are declared by its addons (addons/options.py).
"""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    """A default of `spillage run` and of a matrix (docs/BATCH.md): the matrix key `name`, the flag
    `--name` with dashes, and its help, where argparse fills in `%(default)s`."""

    name: str
    default: int
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


TIMEOUT = Setting("timeout", 300, "seconds before the agent is stopped (default %(default)s)")
MAX_STEPS = Setting("max_steps", 50, "the agent's step limit (default %(default)s, as in the paper)")
SEED = Setting("seed", 0, "seed of the sites' generated catalog (default %(default)s)")
SETTINGS = (TIMEOUT, MAX_STEPS, SEED)

SITES = ("shop.test", "bazaar.test")             # the benchmark's sites (origins/)
STYLES = ("chat", "email", "generic")            # the styles of a persona's prompt
ISOLATION = ("sandbox", "none")                  # how `run` keeps the agent from the evidence (runner/sandbox.py)
DEFAULT_HOME = Path(".spillage")                 # the CA, the signing key, the catalogs ($SPILLAGE_HOME, --home)
DEFAULT_RUNS = Path("runs")                      # where session folders go (--runs-dir)


@dataclass(frozen=True)
class ExitStatus:
    """A status every `spillage` command ends with: `brief` in `spillage --help`, `meaning` in the README."""

    code: int
    brief: str
    meaning: str


EXIT_STATUSES = (
    ExitStatus(0, "done", "done"),
    ExitStatus(1, "the evidence does not verify, or the sessions differ",
               "the evidence does not verify (damaged, tampered, sealed after a crash), or `diff`'s sessions differ"),
    ExitStatus(2, "bad input or usage",
               "bad input or usage: one line on stderr naming the file and the place (line, entry, packet, byte)"),
    ExitStatus(3, "the agent failed",
               "the agent failed: it could not start, stopped on an error (its last error line is printed), "
               "timed out, or its model does not answer (`run` and `batch` check the model before Chromium "
               "starts; `--no-preflight` skips it)"),
    ExitStatus(70, "an error of ours (the traceback is saved)",
               "an error of ours: one line, and the traceback saved to a file it names"),
    ExitStatus(130, "interrupted", "interrupted (Ctrl-C); a run still seals its log"),
)
OK, DAMAGED, BAD_INPUT, AGENT_FAILED, INTERNAL, INTERRUPTED = (s.code for s in EXIT_STATUSES)


def exit_status_text() -> str:
    """The exit statuses in one line, as `spillage --help` ends."""
    return "exit status: " + "; ".join(f"{s.code} {s.brief}" for s in EXIT_STATUSES)
