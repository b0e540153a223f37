"""Shared helpers for the capture-log tests: a realistic session and line surgery."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from spillage.proxy.bound import bound_claim
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import canonical_json
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import record_hash
from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import write_checkpoint_note
from spillage.proxy.layout import write_meta
from spillage.proxy.notes import Note
from spillage.proxy.notes import checkpoint_text
from spillage.proxy.notes import parse_note
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import Signer
from spillage.proxy.signing import checkpoint_message
from spillage.proxy.signing import fingerprint
from spillage.proxy.signing import raw_public

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f"
BIG = bytes(range(256)) * 400  # 100 KiB, over the default inline limit
NOW = "2026-12-01T00:00:00.000000Z"


def write_session(session: Path, *, seal: bool = True, **kw: Any) -> list[dict[str, Any]]:
    """Write a session with every record kind; return the records as written."""
    written: list[dict[str, Any]] = []
    with CaptureWriter(session, **kw) as w:

        def add(kind: str, **fields: Any) -> dict[str, Any]:
            written.append(w.append(kind, **fields))
            return written[-1]

        add(
            "session_start",
            session=session.name,
            tool={"name": "spillage", "version": "0.1.0", "mitmproxy": "12.3.0"},
            options={"inline_limit": w.inline_limit, "allow": [".test"], "block_background": True},
        )
        search = add(
            "request",
            flow="8b7e0c1c-2f55-4bd6-9d7a-0c1f3b1e6a01",
            method="GET",
            url="http://shop.test/search?q=Blutzuckermessger%C3%A4t",
            http_version="HTTP/1.1",
            headers=[
                ["Host", "shop.test"],
                ["Cookie", "sid=42"],
                ["Cookie", "consent=1"],
                ["X-Name", "Zoë".encode().decode("latin-1")],
            ],
            body=None,
        )
        add(
            "response",
            flow=search["flow"],
            request=search["seq"],
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            headers=[["Content-Type", "text/html; charset=utf-8"]],
            body=w.body("<h1>Blutzuckermessgerät — 29,99 €</h1> 血糖仪 🩸".encode()),
        )
        image = add(
            "request",
            flow="1d2c3b4a-0000-4000-8000-000000000002",
            method="POST",
            url="http://shop.test/upload",
            http_version="HTTP/2.0",
            headers=[["content-type", "image/png"]],
            body=w.body(PNG),
        )
        add(
            "response",
            flow=image["flow"],
            request=image["seq"],
            status=200,
            reason="",
            http_version="HTTP/2.0",
            headers=[["content-type", "application/octet-stream"]],
            body=w.body(BIG),
        )
        payload = {"event": "click", "product": 4711, "label": "Bluetooth-Blutzuckermessgerät"}
        beacon = add(
            "request",
            flow="5e5e5e5e-0000-4000-8000-000000000003",
            method="POST",
            url="http://tracker.test/collect",
            http_version="HTTP/1.1",
            headers=[["Content-Type", "application/json"]],
            body=w.body(json.dumps(payload).encode()),
        )
        add(
            "beacon",
            flow=beacon["flow"],
            request=beacon["seq"],
            url=beacon["url"],
            event="click",
            data=payload,
        )
        form = add(
            "request",
            flow="f0f0f0f0-0000-4000-8000-000000000004",
            method="POST",
            url="http://clinic.test/book",
            http_version="HTTP/1.1",
            headers=[["Content-Type", "application/x-www-form-urlencoded"]],
            body=w.body(b"name=Zo%C3%AB&reason=type+2+diabetes"),
        )
        add(
            "form",
            flow=form["flow"],
            request=form["seq"],
            url=form["url"],
            method="POST",
            enctype="application/x-www-form-urlencoded",
            fields=[["name", "Zoë"], ["reason", "type 2 diabetes"]],
        )
        add(
            "egress_blocked",
            flow="c0c0c0c0-0000-4000-8000-000000000005",
            method="CONNECT",
            url="update.googleapis.com:443",
            host="update.googleapis.com",
            port=443,
            background=True,
            headers=[],
            body=None,
            reason="host not in allow list",
        )
        add(
            "egress_blocked",
            flow="c0c0c0c0-0000-4000-8000-000000000006",
            method="GET",
            url="http://www.google.com/search?q=insulin+pump+side+effects",
            host="www.google.com",
            port=80,
            background=False,
            headers=[["Host", "www.google.com"]],
            body=None,
            reason="host not in allow list",
        )
        add("error", flow=form["flow"], request=form["seq"], message="upstream reset")
        add("error", flow=None, request=None, message="TLS handshake failed: unknown CA")
        add("import", format="har", file="chrome.har", size=2048, sha256="ab" * 32,
            counts={"exchanges": 3, "requests": 3, "responses": 2}, lacks=[])
        add("guard", flow="d0d0d0d0-0000-4000-8000-000000000007", request=None, mode="block", action="block",
            enforced=True, observer="first_party", rule="first_party.content",
            findings=[{"attribute": "diabetic", "category": "C_E", "matched": "diabetes", "channel": "content"}],
            original={"method": "GET", "url": "http://shop.test/s?k=strips+for+my+diabetes", "http_version": "HTTP/1.1",
                      "headers": [["Host", "shop.test"]], "body": None},
            original_sha256="cd" * 32, sent_sha256=None)
        if seal:
            add("session_end", reason="proxy shutdown", records=w.count)
    return written


def records_of(session: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(session)]


def lines_of(session: Path) -> list[bytes]:
    """The log's lines, each with its newline."""
    return (session / LOG_NAME).read_bytes().splitlines(keepends=True)


def put_lines(session: Path, lines: list[bytes]) -> None:
    (session / LOG_NAME).write_bytes(b"".join(lines))


def seal_meta(session: Path, records: int, head: str) -> None:
    """Write meta.json the way the runner seals a session."""
    meta = {"scenario": "glucose", "exit": 0, "capture": {"records": records, "head": head}}
    (session / "meta.json").write_text(json.dumps(meta))


def signed_session(path: Path, key, *, seal: bool = True, every: int = 4, **kw: Any) -> SessionKey:
    """write_session's records, signed with a session key `key` certifies, a checkpoint every `every`."""
    signing = SessionKey.issue(key, path.name, NOW)
    write_session(path, seal=seal, signing=signing, checkpoint_every=every, checkpoint_interval=3600, **kw)
    return signing


def sign_checkpoint(record: dict[str, Any], root: bytes, signing: SessionKey) -> None:
    """Give a checkpoint record the tree head `root` and sign it (and its C2SP note) with `signing`, as a
    forger holding that key would."""
    signer = signing.signer()
    text = checkpoint_text(signing.session, record["records"], root)
    record.update(root=root.hex(), key=signing.key, note=Note(text, (signer.sign_note(text),)).encode(),
                  signature=signer.sign(checkpoint_message(signing.session, record["records"], root.hex(), record["ts"])))


LABELS = {"agent": {"framework": "command", "label": "sh", "model": None, "argv": ["sh"]},
          "condition": {"prompt": "original", "system_note": ""}, "catalog": {"seed": 0, "sha256": "0" * 64}}


def runner_session(path: Path, key, *, isolation: str = "sandbox", every: int = 4, labels: dict = LABELS,
                   scenario: str = "id: shop-kettle-chat\n") -> SessionKey:
    """write_session's records as a run leaves them: signed with a session key whose certificate states
    `isolation`, that its issuer cosigns and what it binds (the `scenario` copy, meta.json's `labels`); the final checkpoint cosigned by `key` (checkpoint.note) and
    meta.json naming the session, its keys, the isolation and the sealed head."""
    path.mkdir(parents=True, exist_ok=True)
    (path / SCENARIO_COPY).write_text(scenario, encoding="utf-8")
    signing = SessionKey.issue(key, path.name, NOW, cosign=True, isolation=isolation,
                               bound=bound_claim(path, labels))
    final: list[dict[str, Any]] = []
    write_session(path, signing=signing, checkpoint_every=every, checkpoint_interval=3600,
                  on_checkpoint=lambda record, last: final.append(record))
    head = final[-1]
    note = parse_note(head["note"])
    write_checkpoint_note(path, note.adding(Signer(key).sign_note(note.text)).encode())
    meta = {"session": path.name, "evidence": "sealed", "isolation": {"level": isolation}, **labels,
            "signing": {"key": fingerprint(raw_public(key)), "session_key": signing.key},
            "capture": {"records": head["seq"] + 1, "head": head["hash"],
                        "signed_head": {"seq": head["seq"], "hash": head["hash"], "tree_size": head["records"],
                                        "root": head["root"], "ts": head["ts"], "signature": head["signature"]}}}
    write_meta(path, meta)
    return signing


def unpack_fixture(fixture: Path, tmp: Path, catalog: Path) -> Path:
    """A copy of a recorded fixture folder with its gzipped files unpacked, its live session in `live/`
    under the name its log is signed for, and the seed-0 catalog beside that session's log."""
    folder = tmp / fixture.name
    shutil.copytree(fixture, folder)
    for packed in list(folder.rglob("*.gz")):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    signed = json.loads((folder / "live" / LOG_NAME).read_text().splitlines()[0])["session"]
    (folder / "live").rename(folder / signed)
    (folder / "live").mkdir()
    (folder / signed).rename(folder / "live" / signed)
    shutil.copy(catalog, live_of(folder) / CATALOG_COPY)
    return folder


def live_of(folder: Path) -> Path:
    """The live session of an unpacked fixture folder."""
    (session,) = (folder / "live").iterdir()
    return session


def strip_signatures(session: Path, keep_signed_claim: bool) -> None:
    """Drop the signer record and every checkpoint, and chain what is left again."""
    records = [line.record for line in iter_records(session) if line.record["kind"] not in ("signer", "checkpoint")]
    prev, out = "0" * 64, []
    for seq, rec in enumerate(records):
        rec = dict(rec, seq=seq, prev=prev)
        if rec["kind"] == "session_start":   # as the proxy writes it: whether the log is signed
            rec["options"] = {**rec["options"], "signed": keep_signed_claim}
        if rec["kind"] == "session_end":
            rec["records"] = seq
        rec.pop("hash")
        rec["hash"] = prev = record_hash(rec)
        out.append(canonical_json(rec) + b"\n")
    put_lines(session, out)
