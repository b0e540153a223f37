"""One table of defaults and names (proxy/settings.py) and one of the proxy's options (addons/options.py):
the README, `spillage --help` and the mitmdump command line say what they hold."""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spillage.addons.mitm.launcher import mitmdump_command
from spillage.addons.options import BEACON_URLS
from spillage.addons.options import CHECKPOINT_EVERY
from spillage.addons.options import OPTIONS
from spillage.proxy.live import FAKE_INTERNET_ENV
from spillage.proxy.settings import EXIT_STATUSES
from spillage.proxy.settings import SETTINGS
from spillage.proxy.settings import SITES
from spillage.proxy.settings import STYLES
from spillage.runner.cli import build_parser
from spillage.runner.stack import GuardSetting
from spillage.runner.stack import guard_options

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def words(text: str) -> str:
    return " ".join(text.split())


def help_of(*command: str) -> str:
    """What `spillage COMMAND --help` prints, its lines joined."""
    parser = build_parser()
    for name in command:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return words(parser.format_help())


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [leaf for a in subs for p in a.choices.values() for leaf in leaf_parsers(p)] if subs else [parser]


def test_the_readme_table_of_exit_statuses_is_the_one_of_the_code():
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", README, re.MULTILINE)
    assert [(int(code), meaning) for code, meaning in rows] == [(s.code, s.meaning) for s in EXIT_STATUSES]


def test_spillage_help_ends_with_every_exit_status():
    assert help_of().endswith("exit status: " + "; ".join(f"{s.code} {s.brief}" for s in EXIT_STATUSES))


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_run_help_and_the_readme_give_each_default(setting):
    run = next(p for p in leaf_parsers(build_parser()) if p.prog == "spillage run")
    assert next(a for a in run._actions if setting.flag in a.option_strings).default == setting.default
    assert f"{setting.flag} " in help_of("run") and words(setting.help % {"default": setting.default}) in help_of("run")
    said = re.findall(rf"`{setting.flag}` \([^)]*default (\d+)", README)
    assert said and {int(n) for n in said} == {setting.default}


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_the_matrix_format_gives_each_default(setting):
    batch = (ROOT / "docs" / "BATCH.md").read_text(encoding="utf-8")
    assert re.findall(rf"^{setting.name}: (\d+)", batch, re.MULTILINE) == [str(setting.default)]


def test_every_style_and_site_choice_is_the_table():
    choices = {a.dest: tuple(a.choices) for p in leaf_parsers(build_parser()) for a in p._actions
               if a.dest in ("style", "site")}
    assert choices == {"style": STYLES, "site": SITES}


def declared_options() -> set[str]:
    """The spillage_* options our addons declare when mitmproxy loads them (with the leak guard)."""
    code = ("from mitmproxy.test import taddons\nfrom spillage.addons.guarded import addons\n"
            "with taddons.context(*addons) as tctx:\n"
            "    print(__import__('json').dumps([n for n in tctx.options.keys() if n.startswith('spillage_')]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def set_names(argv: list[str]) -> list[str]:
    return [value.split("=", 1)[0] for flag, value in zip(argv, argv[1:]) if flag == "--set"]


def test_the_table_is_what_the_addons_declare_and_the_launcher_sets_only_those(monkeypatch):
    declared = declared_options()
    assert declared == {o.name for o in OPTIONS}
    monkeypatch.setenv(FAKE_INTERNET_ENV, "/tmp/fake.json")
    launcher = mitmdump_command(None, "127.0.0.1:8000", Path("s"), inline_limit=1, model_hosts=("m:1",),
                                signer_fd=3, live=("*.example.com",))
    guard = guard_options(GuardSetting("redact", "p.yaml", Path("s.yaml")), Path("c.sqlite"))
    spillage = [n for n in set_names(launcher + guard) if n.startswith("spillage_")]
    assert len(spillage) == len(set(spillage))
    assert set(spillage) == declared - {BEACON_URLS.name, CHECKPOINT_EVERY.name}   # those two keep their defaults


def test_the_runner_reads_the_option_names_without_loading_mitmproxy():
    code = "import sys, spillage.addons.options\nprint([m for m in sys.modules if m.split('.')[0] == 'mitmproxy'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
