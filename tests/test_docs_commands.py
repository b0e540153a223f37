"""The commands README.md and docs/*.md show run as written, on a fresh copy of the repository.

A block that claims to run offline is marked by `<!-- runs offline -->` on the line before its
fence. Its commands run one after the other in one shell (`bash -e`), in a copy of the repository
as git lists it, with the project's `spillage` on PATH and nothing else set up: every one must exit
0. In a `console` block the lines after a `$ command` are what it prints (stdout and stderr
as a terminal interleaves them): each must be there, in order, `…` standing for what the doc leaves out (a line, or the
part of one that changes from run to run), once session times, random suffixes and hashes of 8
hex digits or more are masked in both. So a quoted output that no longer matches a run fails here,
and is pasted again from the run the failure shows.
"""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- runs offline -->"
FENCE = re.compile(r"^```(\w*)\s*$")
MASKS = ((re.compile(r"\b\d{8}-\d{6}\b"), "TIME"), (re.compile(r"\b[0-9a-f]{8,}\b"), "HEX"),
         (re.compile(r"-[0-9a-f]{4}\b"), "-RAND"))


@dataclass
class Block:
    """One marked block: where it is, its commands, and per command the output lines it quotes."""
    where: str
    commands: list[str]
    quoted: list[list[str]]


def marked_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        fence = FENCE.match(lines[i + 1])
        assert fence, f"{path.name}:{i + 1}: {MARK} must be right above a fenced block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        body, where = lines[i + 2:end], f"{path.relative_to(ROOT)}:{i + 2}"
        if fence.group(1) == "console":
            commands, quoted = [], []
            for text in body:
                if text.startswith("$ "):
                    commands.append(text[2:])
                    quoted.append([])
                elif quoted:
                    quoted[-1].append(text)
            blocks.append(Block(where, commands, quoted))
        else:
            commands = [t for t in body if t.strip() and not t.lstrip().startswith("#")]
            blocks.append(Block(where, commands, [[] for _ in commands]))
    return blocks


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


BLOCKS = [b for path in documents() for b in marked_blocks(path)]


def masked(text: str) -> str:
    for pattern, mask in MASKS:
        text = pattern.sub(mask, text)
    return text


def missing_lines(quoted: list[str], printed: str) -> list[str]:
    """The quoted lines not found, in order, among the printed ones (`…` matches anything)."""
    wanted = [masked(q) for q in quoted if q.strip() != "…"]
    got = [masked(line) for line in printed.splitlines()]
    at, missing = 0, []
    for line in wanted:
        pattern = re.compile(".*".join(re.escape(part) for part in line.split("…")))
        found = next((i for i in range(at, len(got)) if pattern.fullmatch(got[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory) -> Path:
    """The repository as git lists it (tracked files and new ones not ignored), as a clone would have it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    copy = tmp_path_factory.mktemp("fresh") / "spillage"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def test_blocks_are_marked():
    assert len(BLOCKS) >= 4 and {b.where.split(":")[0] for b in BLOCKS} >= {"README.md", "docs/AGENTS.md"}


@pytest.mark.e2e
@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_a_marked_block_runs_as_written(block, fresh_copy):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPILLAGE_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"   # `spillage`, as the venv gives it
    for command, quoted in zip(block.commands, block.quoted):
        done = subprocess.run(["bash", "-ec", command], cwd=fresh_copy, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=600)
        printed = done.stdout   # stderr and stdout in the order a terminal shows them
        assert done.returncode == 0, f"{block.where}: `{command}` exited {done.returncode}:\n{printed[-3000:]}"
        missing = missing_lines(quoted, printed)
        assert not missing, (f"{block.where}: `{command}` no longer prints\n  " + "\n  ".join(missing)
                             + f"\nit printed:\n{printed[-6000:]}")


def test_quoted_output_matches_in_order_with_ellipses():
    printed = "spillage: agent exited 0 after 12.9 s\ncapture OK: 357 of 357 records\nOR 0.4286\n"
    assert missing_lines(["spillage: agent exited 0 after … s", "…", "capture OK: … records"], printed) == []
    assert missing_lines(["capture OK: … records", "spillage: agent exited 0 after … s"], printed) == [
        "spillage: agent exited 0 after … s"]
    assert missing_lines(["OR 0.4615"], printed) == ["OR 0.4615"]
