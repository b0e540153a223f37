"""Write the capture log of an imported file: session_start, the `import` provenance record, then the
records of every exchange, derived exactly as the live proxy derives them, then session_end.

The `import` record (format, file name, size, SHA-256 of the file, counts) comes before the records
it counts, so those are spooled to disk first and replayed into the chain after it: memory stays
bounded whatever the file's size. A signed import (the importer's session key, certified by the
importer's long-term key) opens with its `signer` record and ends with one signed checkpoint: the
signature vouches for the import of a file with that hash, not for the traffic it holds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from mitmproxy import version as mitmproxy_version

from spillage.proxy.capturelog import DEFAULT_INLINE_LIMIT
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import UNKNOWN_BODY
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import Opaque
from spillage.proxy.formats.flowrecords import DEFAULT_BEACON_URLS
from spillage.proxy.formats.flowrecords import write_refusal
from spillage.proxy.formats.flowrecords import write_request
from spillage.proxy.formats.flowrecords import write_response
from spillage.proxy.signing import SessionKey
from spillage.proxy.version import SPILLAGE_VERSION

NO_CHECKPOINTS = {"checkpoint_every": 2**62, "checkpoint_interval": math.inf}  # the seal's alone: seqs stay known
SPOOL_NAME = ".import-spool.jsonl"
PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")


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


def sniff_format(path: Path) -> str:
    """har, mitm or pcap, from the file's first bytes; ImportFailure when it is none of them."""
    with open(path, "rb") as f:
        head = f.read(16)
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return "har"
    digits = head.split(b":", 1)[0]
    if b":" in head and digits.isdigit() and 0 < len(digits) <= 12:
        return "mitm"
    raise ImportFailure(path, "byte 0", "a HAR file ('{'), a mitmproxy flow file (tnetstring) "
                        "or a pcap/pcapng file (magic number)")


def file_identity(path: Path) -> tuple[int, str]:
    """Size and SHA-256 of the file, streamed."""
    with open(path, "rb") as f:
        return os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "sha256").hexdigest()


class RecordSpool:
    """Records on hold in a file, each with the seq it will get once `prefix` records precede it."""

    def __init__(self, path: Path, writer: CaptureWriter, prefix: int) -> None:
        self.path = path
        self.body = writer.body
        self.prefix = prefix
        self.counts: Counter[str] = Counter()
        self._file = open(path, "w", encoding="utf-8")
        self._next = prefix

    def append(self, kind: str, **fields) -> dict:
        """Hold one record; the record as far as it is known (`kind`, `seq`)."""
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


def spool_item(spool: RecordSpool, item: Exchange | Opaque, beacon_urls: Iterable[str]) -> None:
    """The records of one exchange (or one note of opaque traffic), as the live proxy writes them."""
    if isinstance(item, Opaque):
        spool.counts[item.counter] += 1
        spool.append("error", flow=item.flow, request=None, message=item.message)
        return
    spool.counts["exchanges"] += 1
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
        n = 0
        try:
            for n, item in enumerate(reader_for(fmt)(source), start=1):
                spool_item(spool, item, beacon_urls)
        except FormatError as e:
            raise ImportFailure(source, e.position, e.expected) from None
        except (ValueError, TypeError, KeyError, IndexError) as e:  # a field of an odd type, …
            raise ImportFailure(source, f"after exchange {n}",
                                f"well-formed {fmt} data ({type(e).__name__}: {' '.join(str(e).split())})") from None
        writer.append(
            "session_start", session=session_name or session_dir.name,
            tool={"name": "spillage", "version": SPILLAGE_VERSION, "mitmproxy": mitmproxy_version.VERSION},
            options={"imported": True, "inline_limit": inline_limit, "beacon_urls": beacon_urls},
        )
        counts = {k: spool.counts[k] for k in sorted(spool.counts)}
        record = writer.append("import", format=fmt, file=source.name, size=size, sha256=digest,
                               counts=counts, lacks=[])
        spool.replay(writer)
        writer.append("session_end", reason="import complete", records=writer.count)
    return record

