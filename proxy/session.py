"""Session folders: one per run, holding the capture log, blobs, meta.json and the agent's output."""

import json
import os
import re
import secrets
import time
from pathlib import Path

from spillage.proxy.verify import META_NAME


def slug(text: str) -> str:
    """A file-name-safe version of `text`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "session"


def check_session_name(name: str) -> None:
    """ValueError unless `name` can be a session folder's name."""
    if not name or re.search(r"[^A-Za-z0-9_.-]", name) or name.startswith("."):
        raise ValueError(f"session name {name!r}: use letters, digits, '.', '_' and '-', not a leading '.'")


def create_session(runs_dir: Path, label: str, name: str | None = None) -> Path:
    """Make a new, empty session folder `runs_dir/<UTC time>-<label>-<random>`, or `runs_dir/<name>`
    when a name is given (FileExistsError if that folder exists)."""
    runs_dir = runs_dir.resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    if name is not None:
        check_session_name(name)
    path = runs_dir / (name or f"{stamp}-{slug(label)}-{secrets.token_hex(2)}")
    path.mkdir()
    return path


def write_meta(session_dir: Path, meta: dict) -> None:
    """Write meta.json atomically (a crash leaves the old or the new file, never half of one)."""
    tmp = session_dir / f".{META_NAME}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(session_dir / META_NAME)
