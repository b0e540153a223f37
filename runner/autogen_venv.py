"""AutoGen's own virtual environment, created on first use.

AutoGen pins protobuf 5 and browser-use needs 6, so the AutoGen agent runs with its own
interpreter: `<repo>/.venv-autogen` next to the main venv (or $SPILLAGE_AUTOGEN_VENV), holding
AutoGen, its web surfer, and spillage itself (editable, without dependencies) so that
`spillage.agents.autogen_agent` imports.

    python -m spillage.runner.autogen_venv        # create it now (`make autogen`)

A file lock keeps two runs from creating it at once; a stamp file, written last and holding
the requirements, marks it complete, so a half-made venv (or one made for other requirements)
is rebuilt.
"""

import fcntl
import os
import shutil
import subprocess
import sys
import tomllib
import time
from pathlib import Path

from spillage.runner.children import ChildError

REQUIREMENTS = (
    "autogen-agentchat>=0.7,<0.8",
    "autogen-ext[web-surfer,openai]>=0.7,<0.8",
    "aiofiles",  # autogen-ext[web-surfer] imports it without depending on it
    "pyyaml",  # spillage's scenarios and policies
    "PyICU>=2.12",  # spillage's reading of the wire (proxy/reading/text.py), which the policies' matching uses
    "lemminflect>=0.2.3",  # the inflections the policies' matching adds to forms (scenarios/matching.py)
)
STAMP = ".spillage-installed"
LOG = "install.log"
REPO_ROOT = Path(__file__).resolve().parent.parent


class AutogenVenvError(ChildError):
    """AutoGen's environment could not be created."""


def venv_dir() -> Path:
    """$SPILLAGE_AUTOGEN_VENV, or `.venv-autogen` next to the venv we run in."""
    override = os.environ.get("SPILLAGE_AUTOGEN_VENV")
    return Path(override).resolve() if override else Path(sys.prefix).parent / ".venv-autogen"


def stamp_text() -> str:
    """What a complete venv was made for: the requirements, and spillage's packages (an editable install
    maps only the packages it was made with, so a new folder means a new venv)."""
    try:
        with open(REPO_ROOT / "pyproject.toml", "rb") as f:
            packages = tomllib.load(f)["tool"]["setuptools"]["packages"]
    except FileNotFoundError:   # not a source tree: create() refuses it
        packages = []
    return "\n".join([*REQUIREMENTS, "spillage: " + " ".join(packages)]) + "\n"


def is_complete(venv: Path) -> bool:
    """Whether `venv` was fully created for the current requirements."""
    stamp = venv / STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8") == stamp_text()


def autogen_python(log=None) -> Path:
    """The interpreter of AutoGen's venv, created first if missing or incomplete.
    `log` gets progress lines (default: stderr)."""
    venv = venv_dir()
    if not is_complete(venv):
        venv.parent.mkdir(parents=True, exist_ok=True)
        with open(venv.parent / f"{venv.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be creating it right now
            if not is_complete(venv):
                create(venv, log or progress)
    return venv / "bin" / "python"


def create(venv: Path, log) -> None:
    """(Re)build `venv` from scratch: venv, AutoGen, spillage; the stamp last."""
    if not (REPO_ROOT / "pyproject.toml").is_file():
        raise AutogenVenvError(f"cannot create AutoGen's environment: no pyproject.toml in {REPO_ROOT} "
                               "(spillage must be installed from its source tree)")
    started = time.monotonic()
    log(f"creating AutoGen's environment in {venv} (about 30 s, once) ...")
    shutil.rmtree(venv, ignore_errors=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    steps = [
        ("creating the venv", [base_interpreter(), "-m", "venv", str(venv)]),
        ("installing AutoGen", [*pip, *REQUIREMENTS]),
        ("installing spillage", [*pip, "--no-deps", "-e", str(REPO_ROOT)]),
    ]
    for step, argv in steps:
        log(f"autogen env: {step} ...")
        run_step(step, argv, venv / LOG)
    (venv / STAMP).write_text(stamp_text(), encoding="utf-8")
    log(f"autogen env: ready after {time.monotonic() - started:.0f} s")


def run_step(step: str, argv: list[str], log_file: Path) -> None:
    """Run one step of the creation, its output appended to `log_file`; a one-line error if it fails."""
    env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    output = result.stdout + result.stderr
    if log_file.parent.is_dir():
        with open(log_file, "a", encoding="utf-8") as out:
            out.write(f"$ {' '.join(argv)}\n{output}")
    if result.returncode != 0:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        where = f" (log: {log_file})" if log_file.is_file() else ""
        raise AutogenVenvError(f"creating AutoGen's environment failed {step} "
                               f"(exit {result.returncode}): {last.strip()}{where}")


def base_interpreter() -> str:
    """The Python our venv was made from (a venv's own python would nest venvs)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def progress(message: str) -> None:
    print(f"spillage: {message}", file=sys.stderr, flush=True)


def main() -> int:
    try:
        print(autogen_python())
    except AutogenVenvError as e:
        progress(str(e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
