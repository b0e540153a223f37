"""The command line itself: what `--version` says, and that the version is written in one place."""

import subprocess
import sys
from importlib.metadata import version

from spillage.proxy.version import SPILLAGE_VERSION


def test_version_names_ours_mitmproxys_and_pythons_and_exits_0():
    ran = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "--version"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stderr == ""
    assert ran.stdout == (f"spillage {SPILLAGE_VERSION} (mitmproxy {version('mitmproxy')}, "
                          f"Python {sys.version.split()[0]})\n")


def test_the_installed_version_is_the_one_in_the_code():
    assert version("spillage") == SPILLAGE_VERSION   # pyproject.toml reads proxy/version.py


# --- every subcommand's errors: one line, `spillage:`, the exit table --------------------------------

import argparse   # noqa: E402 - the tests below walk the parser
import shutil   # noqa: E402
from pathlib import Path   # noqa: E402

import pytest   # noqa: E402
from capture_helpers import signed_session   # noqa: E402

from spillage.proxy.signing import load_or_create_key   # noqa: E402
from spillage.runner.cli import build_parser   # noqa: E402
from spillage.runner.cli import main   # noqa: E402

MISSING = "no-such-thing"
#: Each subcommand with an input it cannot use (a missing file or folder, an unknown id): a new command
#: joins here, or test_every_subcommand_is_in_the_table fails.
BAD_INPUT = {
    "run": ["--scenario", MISSING, "--runs-dir", "runs"],
    "batch": [MISSING, "--dry-run"],
    "proxy start": ["--scenario", MISSING, "--runs-dir", "runs"],
    "origins serve": ["--host", "example.com"],
    "origins catalog": ["--out", f"{MISSING}/sites.sqlite"],
    "scenarios check": [MISSING],
    "scenarios list": [MISSING],
    "scenarios stats": [MISSING],
    "scenarios import": ["--format", "spillage-json", MISSING, "--site", "shop.test", "--out", "imported"],
    "verify": [MISSING],
    "seal": [MISSING],
    "prove": [MISSING, "--seq", "1"],
    "verify-proof": [MISSING],
    "key": [],   # with --home a file
    "audit": [MISSING],
    "report": [MISSING, "--out", "report"],
    "inspect": [MISSING],
    "import": [MISSING, "--scenario", "shop-kettle-chat", "--out", "imported"],
    "export": [MISSING, "--format", "har", "--out", "out.har"],
    "replay": [MISSING],
    "diff": [MISSING, MISSING],
}


def subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every leaf command of `parser` ('proxy start', 'audit', ...) and its parser."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= subcommands(sub, (*prefix, name))
    return found or {" ".join(prefix): parser}


def run_in(folder: Path, argv: list[str], capsys) -> tuple[int, str, str]:
    """`spillage ARGV` run in `folder`: (status, stdout, stderr)."""
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    finally:
        os.chdir(here)
    out, err = capsys.readouterr()
    return status, out, err


def test_every_subcommand_is_in_the_table():
    assert set(subcommands(build_parser())) == set(BAD_INPUT)


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_bad_input_and_unknown_options_are_one_spillage_line_and_exit_2(command, tmp_path, capsys):
    home = tmp_path / "home-a-file" if command == "key" else tmp_path / "home"
    if command == "key":
        home.write_text("x")
    status, out, err = run_in(tmp_path, ["--home", str(home), *command.split(), *BAD_INPUT[command]], capsys)
    assert (status, out) == (2, ""), (status, out, err)
    assert err.count("\n") == 1 and err.startswith("spillage: ") and "Traceback" not in err, err
    assert (MISSING if command not in ("key", "origins serve") else home.name if command == "key" else "loopback") in err
    assert not any(p.exists() for p in (tmp_path / "runs", tmp_path / "imported", tmp_path / "report"))
    status, out, err = run_in(tmp_path, [*command.split(), "--no-such-option", *BAD_INPUT[command]], capsys)
    assert (status, out) == (2, "") and err.count("\n") == 1 and err.startswith("spillage: "), err
    assert "--no-such-option" in err


def test_an_empty_folder_is_bad_input_to_audit_and_report_alike(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    audit = run_in(tmp_path, ["audit", "empty"], capsys)
    report = run_in(tmp_path, ["report", "empty", "--out", "report"], capsys)
    assert audit == report == (2, "", "spillage: empty: no session folders here or below (a session folder holds "
                                      "capture.jsonl)\n")


def test_inspect_of_a_file_says_it_is_not_a_session_folder(tmp_path, capsys):
    readme = Path(__file__).parents[1] / "README.md"
    assert run_in(tmp_path, ["inspect", str(readme)], capsys) == (
        2, "", f"spillage: {readme}: a file, not a session folder (one holds capture.jsonl)\n")


def test_success_never_says_fail(tmp_path, capsys):
    """`seal` succeeds on a crashed log: exit 0, and its line says what verify will say, without FAIL."""
    session = tmp_path / "crashed"
    signed_session(session, load_or_create_key(tmp_path / "home"), seal=False)
    status, out, err = run_in(tmp_path, ["--home", str(tmp_path / "home"), "seal", str(session)], capsys)
    assert status == 0 and "FAIL" not in out + err
    assert out.startswith("sealed after crash at seq ") and "truncated, sealed after crash" in out
    shutil.rmtree(session)


def test_every_option_with_a_default_names_it_in_its_help():
    """`--timeout 300`, `--port 8080`: what an option is when it is not given is said in its help."""
    silent = []
    for command, parser in subcommands(build_parser()).items():
        for action in parser._actions:
            if action.default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
                continue
            if "default" not in (action.help or "") and str(action.default) not in (action.help or ""):
                silent.append(f"{command} {action.option_strings[0]} (default {action.default!r})")
    assert not silent, silent


def test_the_verbs_call_functions_not_other_parsers():
    """No module of the command room imports another program's `main` (or builds an argv for one)."""
    import ast

    called = [f"{path.name}: {node.module}.{alias.name}"
              for path in sorted((Path(__file__).resolve().parents[1] / "runner" / "cli").glob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("spillage.runner.cli")
              for alias in node.names if alias.name == "main"]
    assert called == []
