"""The session folder: the one module that names its files, makes it, and reads and writes meta.json.

A session folder (0700) holds the evidence (the capture log, its blobs, meta.json; 0600 while written,
read-only once sealed) and what the auditor reads beside it (the scenario and catalog copies). The agent
never works in it: its work folder is `<runs dir>/.work/<session>/` (docs/EVIDENCE.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import Any

from spillage.proxy.documents import load_json
from spillage.proxy.notes import MAX_NOTE_BYTES

LOG_NAME = "capture.jsonl"
BLOB_DIR = "blobs"
META_NAME = "meta.json"
TORN_TAIL = "capture.torn"          # the bytes of a torn last line, moved aside by `spillage seal`
CHECKPOINT_NOTE = "checkpoint.note" # the final checkpoint as a C2SP signed note, cosigned by its issuer
SCENARIO_COPY = "scenario.yaml"
CATALOG_COPY = "catalog.sqlite"
REPORT_NAME = "audit.json"
MAX_AUDIT_BYTES = 64 << 20  # an audit.json of 10,000 actions is about 20 MB
PROXY_LOG = "proxy.log"
ORIGINS_LOG = "origins.log"
ACCESS_LOG = "origins-access.jsonl"   # what the sites and the tracker received, as they received it

WORK_ROOT = ".work"                 # <runs dir>/.work/<session>/ is the agent's work folder
AGENT_STDOUT = "agent.stdout"
AGENT_STDERR = "agent.stderr"
AGENT_HOME = "agent-home"
PROMPT_FILE = "prompt.txt"
AGENT_SCENARIO = "scenario.yaml"    # the agent's own copy, in its work folder
AGENT_CA = "ca-cert.pem"            # the CA certificate the agent trusts, in its work folder
AGENT_OUTCOME = "outcome.json"      # why a built-in agent stopped, as its adapter reports it

FOLDER_MODE = 0o700
WRITING_MODE = 0o600
SEALED_MODE = 0o400


def capture_path(path: str | os.PathLike[str]) -> Path:
    """The capture.jsonl of `path`, which is a session folder or the log file itself."""
    p = Path(path)
    return p / LOG_NAME if p.is_dir() else p


def blob_path(session_dir: str | os.PathLike[str], digest: str) -> Path:
    """Where the blob named `digest` lives in a session folder."""
    return Path(session_dir) / BLOB_DIR / digest


def slug(text: str) -> str:
    """A file-name-safe version of `text`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:100] or "session"


def check_session_name(name: str) -> None:
    """ValueError unless `name` can be a session folder's name."""
    if not name or re.search(r"[^A-Za-z0-9_.-]", name) or name.startswith("."):
        raise ValueError(f"session name {name!r}: use letters, digits, '.', '_' and '-', not a leading '.'")


def make_private_dir(path: Path, exist_ok: bool = False) -> Path:
    """mkdir `path` as 0700 whatever the umask (FileExistsError unless `exist_ok`)."""
    try:
        path.mkdir(mode=FOLDER_MODE)
    except FileExistsError:
        if not exist_ok or not path.is_dir():
            raise
    os.chmod(path, FOLDER_MODE)
    return path


def create_session(runs_dir: Path, label: str, name: str | None = None) -> Path:
    """Make a new, empty session folder (0700) `runs_dir/<UTC time>-<label>-<random>`, or
    `runs_dir/<name>` when a name is given (FileExistsError if that folder exists)."""
    runs_dir = runs_dir.resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    if name is not None:
        check_session_name(name)
    return make_private_dir(runs_dir / (name or f"{stamp}-{slug(label)}-{secrets.token_hex(2)}"))


def sessions_below(root: Path) -> list[Path]:
    """Every session folder (one holding a capture log) below `root`, sorted. Hidden folders are not
    searched, agents' work folders (`.work/`) among them: an agent could leave a log of its own making
    there. Nothing below a session folder is searched either."""
    found = []
    for folder, dirs, files in os.walk(root):
        if LOG_NAME in files and folder != str(root):
            found.append(Path(folder))
            dirs.clear()
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return sorted(found)


def work_folder(session_dir: Path) -> Path:
    """The agent's work folder of a session: outside the session folder, beside it."""
    return session_dir.parent / WORK_ROOT / session_dir.name


def create_work_folder(session_dir: Path, owner: tuple[int, int] | None = None) -> Path:
    """Make the session's work folder (0700), owned by `owner` (uid, gid) when given; an existing one
    (a retried run's) is emptied first."""
    import shutil

    work = work_folder(session_dir)
    make_private_dir(work.parent, exist_ok=True)
    os.chmod(work.parent, 0o711)  # an agent of another uid reaches its own folder, lists none
    if work.exists():
        shutil.rmtree(work)
    make_private_dir(work)
    if owner is not None:
        os.chown(work, *owner)
    return work


def write_meta(session_dir: Path, meta: dict) -> None:
    """Write meta.json atomically (a crash leaves the old or the new file, never half of one), 0600."""
    write_atomically(session_dir / META_NAME, json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Write `path` (0600) by a temporary file beside it, fsynced, renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, WRITING_MODE)
    with open(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, WRITING_MODE)
    tmp.replace(path)


MAX_META_BYTES = 1 << 20  # a few KB in practice


def write_checkpoint_note(session_dir: Path, note: str) -> None:
    """Write the cosigned final checkpoint (a C2SP signed note), 0600."""
    write_atomically(Path(session_dir) / CHECKPOINT_NOTE, note)


def read_checkpoint_note(session_dir: Path) -> str | None:
    """The cosigned final checkpoint's text, or None when there is none; ValueError naming the file when
    it is too long or not UTF-8."""
    path = Path(session_dir) / CHECKPOINT_NOTE
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_NOTE_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_NOTE_BYTES:
        raise ValueError(f"{path}: more than {MAX_NOTE_BYTES} bytes; a checkpoint note is a few hundred")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start})") from None


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of the file at `path`."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_meta(session_dir: Path) -> dict[str, Any] | None:
    """The session's meta.json, or None when there is none; ValueError naming the file when it is not
    a JSON object."""
    path = Path(session_dir) / META_NAME
    if not path.exists():
        return None
    meta = load_json(path, MAX_META_BYTES, META_NAME)  # a DocumentError is a ValueError naming the file
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object")
    return meta


def seal_permissions(session_dir: Path) -> None:
    """Make the evidence read-only: the log, its blobs, a torn tail, the cosigned checkpoint and meta.json
    become 0400."""
    session_dir = Path(session_dir)
    files = [session_dir / LOG_NAME, session_dir / META_NAME, session_dir / TORN_TAIL, session_dir / CHECKPOINT_NOTE]
    blobs = session_dir / BLOB_DIR
    if blobs.is_dir():
        files += [p for p in blobs.iterdir() if p.is_file()]
    for path in files:
        try:
            if stat.S_IMODE(path.lstat().st_mode) != SEALED_MODE and path.is_file():
                os.chmod(path, SEALED_MODE)
        except FileNotFoundError:
            continue
