"""Write the capture log of an imported file: session_start, the `import` provenance record, then the
records of every exchange, derived exactly as the live proxy derives them, then session_end.

The `import` record (format, file name, size, SHA-256 of the file, counts, what the file lacks) comes
before the records it counts, so those are spooled to disk first and replayed into the chain after it:
memory stays bounded whatever the file's size. Exchanges are written in the order their requests began,
and every record is checked against the capture schema before it is spooled: a file that would make an
invalid record fails the import, naming the entry. A signed import (the importer's session key,
certified by the importer's long-term key) opens with its `signer` record and ends with one signed
checkpoint: the signature vouches for the import of a file with that hash, not for the traffic it holds.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import jsonschema
from mitmproxy import version as mitmproxy_version

from spillage.proxy.capturelog import DEFAULT_INLINE_LIMIT
from spillage.proxy.capturelog import FORMAT_VERSION
from spillage.proxy.capturelog import GENESIS
from spillage.proxy.capturelog import SCHEMA_PATH
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import UNKNOWN_BODY
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import Lack
from spillage.proxy.formats.exchange import Opaque
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.formats.flowrecords import write_refusal
from spillage.proxy.formats.flowrecords import write_request
from spillage.proxy.formats.flowrecords import write_response
from spillage.proxy.schema import record_valid
from spillage.proxy.signing import SessionKey
from spillage.proxy.version import SPILLAGE_VERSION

NO_CHECKPOINTS = {"checkpoint_every": 2**62, "checkpoint_interval": math.inf}  # the seal's alone: seqs stay known
SPOOL_NAME = ".import-spool.jsonl"
PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")
ZIP_MAGIC = b"PK\x03\x04"   # Playwright's HAR with its attachments (record_har_content="attach", a .zip path)
FORMAT_NAMES = {"har": "HAR", "mitm": "mitmproxy flows", "pcap": "pcap"}
CHECKED_TS = "2000-01-01T00:00:00.000000Z"   # stands in for the writer's fields while a record is checked
REORDER_SECONDS = 10.0   # capture time an exchange is held to be written in the order requests began


class ImportFailure(Exception):
    """The file cannot be imported: `FILE: position: what was expected`."""

    def __init__(self, path: Path, position: str, expected: str) -> None:
        super().__init__(f"{path}: {position}: {expected}")


def reader_for(fmt: str) -> Callable[[Path], Iterable[Exchange | Opaque]]:
    """The reader of format `fmt` (har, mitm, pcap)."""
    if fmt == "har":
        from spillage.proxy.formats.har import read_har
        return read_har
    if fmt == "mitm":
        from spillage.proxy.formats.mitmflows import read_flows
        return read_flows
    from spillage.proxy.formats.pcap import read_pcap
    return read_pcap


def check_format(path: Path, given: str | None) -> str:
    """The format to read `path` as: `given`, unless its first bytes say it is another (ImportFailure:
    mitmproxy itself reads a HAR as flows, and the import would record the wrong format); else
    what they say."""
    try:
        found = sniff_format(path)
    except ImportFailure:
        if given is None:
            raise
        return given   # the reader will say what is wrong with it
    if given is not None and given != found:
        raise ImportFailure(path, "byte 0", f"a {given} file as --format says; it begins as a {found} file "
                            f"(leave --format out to read it as {found})")
    return found


def sniff_format(path: Path) -> str:
    """har, mitm or pcap, from the file's first bytes; ImportFailure when it is none of them."""
    with open(path, "rb") as f:
        head = f.read(16)
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == ZIP_MAGIC:
        return "har"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return "har"
    digits = head.split(b":", 1)[0]
    if b":" in head and digits.isdigit() and 0 < len(digits) <= 12:
        return "mitm"
    raise ImportFailure(path, "byte 0", "a HAR file ('{' or Playwright's zip), a mitmproxy flow file "
                        "(tnetstring) or a pcap/pcapng file (magic number)")


def file_identity(path: Path) -> tuple[int, str]:
    """Size and SHA-256 of the file, streamed."""
    with open(path, "rb") as f:
        return os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "sha256").hexdigest()


class InvalidRecord(ValueError):
    """A record the capture schema refuses: which field and why."""


@functools.cache
def record_validator(kind: str) -> jsonschema.Draft202012Validator:
    """The capture schema's rules for records of `kind` at FORMAT_VERSION as one flat object schema: the
    common properties and those its `if kind …` rules add, no others (what `unevaluatedProperties: false`
    says of them), which checks a record ten times faster than the whole schema with its twelve rules."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    properties, required = dict(schema["properties"]), list(schema["required"])
    for rule in schema["allOf"]:
        when = {name: spec["const"] for name, spec in rule["if"]["properties"].items()}
        if when.keys() - {"kind", "v"}:
            raise ValueError(f"{SCHEMA_PATH}: a rule on {sorted(when)} that the importer cannot apply")
        if when["kind"] == kind and when.get("v", FORMAT_VERSION) == FORMAT_VERSION:
            properties.update(rule["then"].get("properties", {}))
            required += rule["then"].get("required", [])
    flat = {"type": "object", "required": required, "properties": properties, "additionalProperties": False}
    return jsonschema.Draft202012Validator(inlined(flat, schema["$defs"]))


def inlined(node, defs: dict):
    """`node` with each `"$ref": "#/$defs/NAME"` replaced by that definition's keywords (the schema has no
    cycles, and no keyword beside a $ref but a description), which spares the validator a lookup at each use."""
    if isinstance(node, list):
        return [inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    own = {key: inlined(value, defs) for key, value in node.items() if key != "$ref"}
    if "$ref" in node:
        own.update(inlined(defs[node["$ref"].removeprefix("#/$defs/")], defs))
    return own


def check_record(kind: str, seq: int, fields: dict) -> None:
    """InvalidRecord unless the record of `kind` with `fields` at `seq` matches proxy/capture.schema.json
    (the fields the writer adds stand in with valid values). The schema's compiled predicate answers first
    (microseconds a record; never more lenient than jsonschema, tests/test_schema.py); jsonschema is asked
    only of a record it refuses, for its error (jsonschema takes about half a millisecond a record)."""
    record = {"v": FORMAT_VERSION, "seq": seq, "ts": CHECKED_TS, "kind": kind, "prev": GENESIS,
              "hash": GENESIS, **fields}
    try:
        if record_valid()(record):
            return
    except Exception:  # noqa: BLE001 - a value the predicate does not take: jsonschema says what it is
        pass
    error = min(record_validator(kind).iter_errors(record), key=lambda e: -len(e.absolute_path), default=None)
    if error is not None:
        place = ".".join(str(p) for p in error.absolute_path) or "record"
        raise InvalidRecord(f"a {kind} record the capture schema accepts ({place}: {error.message[:160]})")


class RecordSpool:
    """Records on hold in a file, each with the seq it will get once `prefix` records precede it, and
    the counts and lacks of the import record."""

    def __init__(self, path: Path, writer: CaptureWriter, prefix: int) -> None:
        self.path = path
        self.body = writer.body
        self.prefix = prefix
        self.counts: Counter[str] = Counter()
        self.lacks: dict[str, None] = {}   # what the file lacks, in the order first seen
        self._file = open(path, "w", encoding="utf-8")
        self._next = prefix

    def append(self, kind: str, **fields) -> dict:
        """Hold one record, checked against the schema; the record as far as it is known (`kind`, `seq`)."""
        check_record(kind, self._next, fields)
        self._file.write(json.dumps([kind, fields], ensure_ascii=False) + "\n")
        self.counts[kind] += 1
        self._next += 1
        return {"kind": kind, "seq": self._next - 1}

    def replay(self, writer: CaptureWriter) -> None:
        """Append the held records to `writer`, whose next seq must be the spool's prefix."""
        self._file.close()
        assert writer.seq == self.prefix, "the spool's seqs assume `prefix` records before it"
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                kind, fields = json.loads(line)
                writer.append(kind, **fields)
        self.path.unlink()


def spool_item(spool: RecordSpool, item: Exchange | Opaque, fmt: str, beacon_urls: Iterable[str]) -> None:
    """The records of one exchange (or one note of opaque traffic), as the live proxy writes them."""
    if isinstance(item, Opaque):
        spool.counts[item.counter] += 1
        spool.lacks[opaque_lack(item, fmt)] = None
        spool.append("error", flow=item.flow, request=None, message=item.message)
        return
    spool.counts["exchanges"] += 1
    if item.unknown_bodies and fmt == "mitm":   # the HAR reader says why its bodies are missing
        spool.lacks["bodies mitmproxy did not keep (mitmproxy flows)"] = None
    refusal = item.refusal()
    if refusal:
        write_refusal(spool.append, spool.body, item.flow, item.request, item.refused_url(), refusal)
        return
    request = write_request(spool.append, spool.body, item.flow, item.request, beacon_urls)
    seq = request["seq"]
    if REQUEST in item.unknown_bodies:
        note_unknown_body(spool, item.flow, seq, REQUEST)
    if item.response is not None:
        write_response(spool.append, spool.body, item.flow, seq, item.response)
        if RESPONSE in item.unknown_bodies:
            note_unknown_body(spool, item.flow, seq, RESPONSE)
    if item.error:
        spool.append("error", flow=item.flow, request=seq, message=item.error)


def opaque_lack(item: Opaque, fmt: str) -> str:
    """What a note of traffic that was not read says the file lacks (the HAR reader says its own)."""
    if item.counter == "broken_streams":
        return f"bytes the capture missed ({FORMAT_NAMES[fmt]})"
    if "TLS" in item.message:
        return f"TLS streams ({FORMAT_NAMES[fmt]})"
    return f"traffic that is not HTTP ({FORMAT_NAMES[fmt]})"


def item_place(item: Exchange | Opaque, n: int) -> str:
    """Where in the file an item was read: the reader's own words, else its number and flow."""
    return getattr(item, "where", "") or f"exchange {n} (flow {item.flow})"


def note_unknown_body(spool: RecordSpool, flow: str, request_seq: int, which: str) -> None:
    """An `error` record saying the file lacked this body: the record's null body means unknown."""
    spool.counts["unknown_bodies"] += 1
    spool.append("error", flow=flow, request=request_seq, message=UNKNOWN_BODY.format(which))


def write_import_log(source: Path, fmt: str, session_dir: Path, *, session_name: str | None = None,
                     inline_limit: int = DEFAULT_INLINE_LIMIT,
                     beacon_urls: Iterable[str] = DEFAULT_BEACON_URLS,
                     signing: SessionKey | None = None) -> dict:
    """Read `source` as `fmt` and write its sealed capture log into `session_dir` (whose final name,
    for session_start, is `session_name`), signed with `signing` when given; the import record.

    Raises ImportFailure (file, position, what was expected) for a file that cannot be read."""
    beacon_urls = list(beacon_urls)
    size, digest = file_identity(source)
    with CaptureWriter(session_dir, inline_limit=inline_limit, signing=signing, **NO_CHECKPOINTS) as writer:
        spool = RecordSpool(session_dir / SPOOL_NAME, writer, writer.seq + 2)  # session_start, import
        spool_file(source, fmt, spool, beacon_urls)
        start = {"session": session_name or session_dir.name,
                 "tool": {"name": "spillage", "version": SPILLAGE_VERSION, "mitmproxy": mitmproxy_version.VERSION},
                 "options": {"imported": True, "inline_limit": inline_limit, "beacon_urls": beacon_urls}}
        provenance = {"format": fmt, "file": source.name, "size": size, "sha256": digest,
                      "counts": {k: spool.counts[k] for k in sorted(spool.counts)}, "lacks": list(spool.lacks)}
        append_checked(writer, source, "session_start", start)
        record = append_checked(writer, source, "import", provenance)
        spool.replay(writer)
        append_checked(writer, source, "session_end", {"reason": "import complete", "records": writer.count})
    return record


def append_checked(writer: CaptureWriter, source: Path, kind: str, fields: dict) -> dict:
    """Write a record of the importer's own, checked against the schema first."""
    try:
        check_record(kind, writer.seq, fields)
    except InvalidRecord as e:
        raise ImportFailure(source, kind, str(e)) from None
    return writer.append(kind, **fields)


def in_request_order(items: Iterable[Exchange | Opaque | Lack],
                     window: float = REORDER_SECONDS) -> Iterator[Exchange | Opaque | Lack]:
    """`items` with the exchanges in the order their requests began, as the live proxy logs them.

    Readers yield an exchange once its answer is complete (mitmproxy files and pcaps hold them in the order
    responses ended), so each is held until one whose request began `window` seconds of capture time later
    has been read: memory holds that window, not the file. Notes of opaque traffic keep their place; lacks
    pass at once."""
    held: list[tuple[float, int, Exchange | Opaque]] = []
    newest = -math.inf
    for n, item in enumerate(items):
        if isinstance(item, Lack):
            yield item
            continue
        if isinstance(item, Exchange):
            newest = max(newest, item.request.timestamp_start or 0.0)
            heapq.heappush(held, (item.request.timestamp_start or 0.0, n, item))
        else:
            heapq.heappush(held, (newest, n, item))
        while held and held[0][0] <= newest - window:
            yield heapq.heappop(held)[2]
    while held:
        yield heapq.heappop(held)[2]


def spool_file(source: Path, fmt: str, spool: RecordSpool, beacon_urls: list[str]) -> None:
    """Read every item of `source` into `spool`, exchanges in request order; ImportFailure (file, position,
    what was expected) when it cannot be read or would make a record the schema refuses."""
    n, item = 0, None
    try:
        for item in in_request_order(reader_for(fmt)(source)):
            if isinstance(item, Lack):
                spool.lacks[item.what] = None
                continue
            n += 1
            spool_item(spool, item, fmt, beacon_urls)
    except FormatError as e:
        raise ImportFailure(source, e.position, e.expected) from None
    except InvalidRecord as e:
        raise ImportFailure(source, item_place(item, n), str(e)) from None
    except (ValueError, TypeError, KeyError, IndexError) as e:  # a field of an odd type, …
        raise ImportFailure(source, f"after exchange {n}",
                            f"well-formed {fmt} data ({type(e).__name__}: {' '.join(str(e).split())})") from None
    if n == 0:
        raise ImportFailure(source, "end of file", f"at least one request or connection; this {fmt} file holds none")

