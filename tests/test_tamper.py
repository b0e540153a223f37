"""Every way of damaging a real signed capture is detected with the key pinned, and nothing else is.

Captures of both sites are made through the real proxy (tests/traffic.py); then at least 10,000
random mutations of many kinds are applied to copies of them, each checked by `verify` pinned to the
key that signed the original. Not timed: `bench/` measures speed."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from capture_helpers import sign_checkpoint
from traffic import browse

from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import META_NAME
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.merkle import MerkleFrontier
from spillage.proxy.merkle import leaf_hash
from spillage.proxy.verify import verify
from spillage.runner.heads import describe_evidence
from spillage.runner.stack import Stack

pytestmark = pytest.mark.e2e
MUTATIONS = 10_000
CLEAN_COPIES = 200


@pytest.fixture(scope="module")
def captures(tmp_path_factory, catalog_file) -> tuple[list[Path], str]:
    """Two real sealed sessions (bodies over 2 KiB in blobs), with meta.json as the runner writes it,
    and the fingerprint of the key that signed them."""
    home = tmp_path_factory.mktemp("home")
    sessions = []
    for name in ("first", "second"):
        session = tmp_path_factory.mktemp("runs") / name
        session.mkdir()
        stack = Stack(session, ensure_ca(home / "ca"), load_or_create_key(home), catalog=catalog_file,
                      inline_limit=2048, log=lambda m: None)
        with stack:
            browse(stack.proxy_url)
        assert stack.settlement.ok, stack.settlement.detail
        meta = {"session": name}
        describe_evidence(meta, stack.settlement)
        (session / META_NAME).write_text(json.dumps(meta))
        sessions.append(session)
    return sessions, stack.key_fingerprint


class Copy:
    """A session copy to damage: its lines, meta.json and blobs, written back before each check."""

    def __init__(self, original: Path, work: Path) -> None:
        self.original, self.dir = original, work
        self.lines = (original / LOG_NAME).read_bytes().splitlines(keepends=True)
        self.meta = json.loads((original / META_NAME).read_text())
        self.blobs = sorted(p.name for p in (original / BLOB_DIR).iterdir())
        self.blob_bytes = {name: (original / BLOB_DIR / name).read_bytes() for name in self.blobs}
        shutil.copytree(original, work)
        for path in (work / BLOB_DIR).iterdir():
            path.chmod(0o600)

    def reset(self) -> tuple[list[bytes], dict]:
        """The original's lines and meta.json, and its blobs back in place."""
        for name in self.blobs:
            blob = self.dir / BLOB_DIR / name
            original = self.blob_bytes[name]
            if not blob.exists() or blob.stat().st_size != len(original) or blob.read_bytes() != original:
                blob.write_bytes(original)
        return list(self.lines), json.loads(json.dumps(self.meta))

    def write(self, lines: list[bytes], meta: dict | None) -> None:
        (self.dir / LOG_NAME).write_bytes(b"".join(lines))
        if meta is None:
            (self.dir / META_NAME).unlink(missing_ok=True)
        else:
            (self.dir / META_NAME).write_text(json.dumps(meta))


def rec(line: bytes) -> dict:
    return json.loads(line)


def encode(record: dict, rehash: bool = True) -> bytes:
    if rehash:
        record["hash"] = record_hash(record)
    return canonical_json(record) + b"\n"


def edit(record: dict, rng: random.Random) -> None:
    """Change one value of a record the way a forger would: a URL, a status, a time, a field."""
    for field in ("url", "message", "reason", "status", "ts", "session", "data", "fields", "records"):
        if field in record and rng.random() < 0.7:
            value = record[field]
            record[field] = (value + 1 if isinstance(value, int) and not isinstance(value, bool)
                             else (value or "") + "x" if isinstance(value, str) or value is None
                             else json.loads(json.dumps(value).replace("a", "b", 1)) if "a" in json.dumps(value)
                             else "x")
            if record[field] != value:
                return
    record["ts"] = record["ts"][:-2] + ("1Z" if record["ts"][-2] != "1" else "2Z")


def rechain(lines: list[bytes], start: int) -> list[bytes]:
    """Recompute prev and hash from line `start` on, leaving signatures and roots as they were."""
    out = lines[:start]
    prev = rec(out[-1])["hash"] if out else "0" * 64
    for line in lines[start:]:
        record = rec(line)
        record["prev"] = prev
        out.append(encode(record))
        prev = record["hash"]
    return out


def renumber(lines: list[bytes]) -> list[bytes]:
    out, prev = [], "0" * 64
    for seq, line in enumerate(lines):
        record = rec(line)
        record.update(seq=seq, prev=prev)
        out.append(encode(record))
        prev = record["hash"]
    return out


def meta_after(meta: dict, lines: list[bytes], how: str) -> dict | None:
    """meta.json edited to the new head, deleted, or left alone."""
    if how == "deleted":
        return None
    if how == "edited" and lines:
        meta["capture"] = {"records": len(lines), "head": rec(lines[-1])["hash"]}
        meta.pop("signing", None)
    return meta


def forged_under_own_key(lines: list[bytes], rng: random.Random, forger) -> list[bytes]:
    """The whole log re-signed by a session key a forger's own long-term key certifies."""
    records = [rec(line) for line in lines]
    edit(records[rng.randrange(1, len(records))], rng)
    signing = SessionKey.issue(forger, records[0]["session"], records[0]["issued"])
    prev, tree, out = "0" * 64, MerkleFrontier(), []
    for record in records:
        if record["kind"] == "signer":
            record.update(signing.record_fields())
        record["prev"] = prev
        if record["kind"] == "checkpoint":
            record["head"] = prev
            sign_checkpoint(record, tree.root(), signing)
        line = encode(record)
        tree.append(leaf_hash(line[:-1]))
        out.append(line)
        prev = record["hash"]
    return out


def mutate(kind: str, lines: list[bytes], meta: dict, copy: Copy, rng: random.Random, forger):
    """Apply one mutation of `kind`; the damaged (lines, meta)."""
    n = len(lines)
    if kind == "byte flip":
        data = bytearray(b"".join(lines))
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        return bytes(data).splitlines(keepends=True), meta
    if kind == "edit, re-hashed":
        i = rng.randrange(n)
        record = rec(lines[i])
        edit(record, rng)
        lines[i] = encode(record)
        return lines, meta
    if kind.startswith("suffix rewrite"):
        i = rng.randrange(n)
        record = rec(lines[i])
        edit(record, rng)
        lines[i] = encode(record)
        lines = rechain(lines, i)
        if rng.random() < 0.5:  # drop the checkpoints the forger cannot sign again
            lines = renumber([line for j, line in enumerate(lines) if j < i or rec(line)["kind"] != "checkpoint"])
        return lines, meta_after(meta, lines, kind.split(", meta ")[1])
    if kind == "whole-chain rewrite under another key":
        lines = forged_under_own_key(lines, rng, forger)
        return lines, meta_after(meta, lines, rng.choice(["edited", "deleted"]))
    if kind == "insert":
        i = rng.randrange(n + 1)
        if rng.random() < 0.5:
            new = lines[rng.randrange(n)]
        else:
            before = rec(lines[i - 1]) if i else None
            new = encode({"v": 2, "seq": i, "ts": "2026-12-01T00:00:00.000000Z", "kind": "error",
                          "prev": before["hash"] if before else "0" * 64, "flow": None, "request": None,
                          "message": "inserted"})
        return lines[:i] + [new] + lines[i:], meta
    if kind == "delete":
        del lines[rng.randrange(n)]
        return lines, meta
    if kind == "swap":
        i, j = rng.sample(range(n), 2)
        lines[i], lines[j] = lines[j], lines[i]
        return lines, meta
    if kind == "duplicate":
        i = rng.randrange(n)
        return lines[:i + 1] + [lines[i]] + lines[i + 1:], meta
    if kind == "truncation":
        data = b"".join(lines)
        return data[:rng.randrange(len(data))].splitlines(keepends=True), meta
    if kind == "torn tail":
        partial = lines[rng.randrange(n)]
        return lines + [partial[:rng.randrange(1, len(partial) - 1)]], meta
    if kind == "blob change":
        blob = copy.dir / BLOB_DIR / rng.choice(copy.blobs)
        data = bytearray(blob.read_bytes())
        how = rng.choice(["flip", "delete", "truncate", "append"])
        if how == "delete":
            blob.unlink()
        elif how == "flip":
            data[rng.randrange(len(data))] ^= 0x20
            blob.write_bytes(bytes(data))
        else:
            blob.write_bytes(bytes(data[:-1]) if how == "truncate" else bytes(data) + b" ")
        return lines, meta
    raise AssertionError(kind)


KINDS = ("byte flip", "edit, re-hashed", "suffix rewrite, meta edited", "suffix rewrite, meta deleted",
         "suffix rewrite, meta left alone", "whole-chain rewrite under another key", "insert", "delete", "swap",
         "duplicate", "truncation", "torn tail", "blob change")


def test_every_mutation_is_detected_and_no_untouched_copy_is_flagged(captures, tmp_path):
    sessions, pin = captures
    copies = [Copy(s, tmp_path / s.name) for s in sessions]
    assert all(c.blobs for c in copies) and all(sum(b'"checkpoint"' in line for line in c.lines) >= 2 for c in copies)
    forger = load_or_create_key(tmp_path / "forger")
    rng = random.Random(20261201)
    missed, tried = [], Counter()
    for n in range(MUTATIONS):
        kind = KINDS[n % len(KINDS)]
        copy = copies[n % len(copies)]
        lines, meta = copy.reset()
        lines, meta = mutate(kind, lines, meta, copy, rng, forger)
        copy.write(lines, meta)
        tried[kind] += 1
        result = verify(copy.dir, pin)
        if result.ok:
            missed.append((n, kind))
    assert sum(tried.values()) >= 10_000 and set(tried) == set(KINDS)
    assert missed == [], f"undetected: {missed[:10]}"
    for n in range(CLEAN_COPIES):
        copy = copies[n % len(copies)]
        copy.write(*copy.reset())
        assert verify(copy.dir, pin).ok, "a false alarm on an untouched copy"
