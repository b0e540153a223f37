"""Compare two sessions: their agent requests paired in order, the responses, and the actions and
events the audit derives. Fields that change from run to run by nature (times, cookies, ids, the
order of records) are counted as volatile, never reported as differences. docs/REPLAY.md.
"""

import json
import re
from collections import Counter
from collections import deque
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from rapidfuzz.distance import LCSseq

from spillage.audit.session_audit import AuditError
from spillage.audit.session_audit import audit_session
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.reading.body import unpack
from spillage.proxy.verify import verify

# Response headers that differ between runs of the same requests; Content-Length follows the body.
VOLATILE_HEADERS = {"date", "set-cookie", "expires", "last-modified", "etag", "age", "content-length"}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}
# Volatile text in bodies, by name: replaced by a placeholder before bodies are compared.
VOLATILE_TEXT = {
    "time": re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
                       r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT"),
    "uuid": re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    "hex id": re.compile(r"\b[0-9a-f]{16,}\b"),
}
ACTION_FIELDS = ("kind", "what", "channel", "text", "url", "observers", "detail", "clicked", "concepts", "sent")
CONTEXT = 40


class DiffError(RuntimeError):
    """A session cannot be compared (not a session folder, a log that fails verification)."""


@dataclass
class Exchange:
    """One agent request of a session and its response, as compared."""

    seq: int
    method: str
    url: str
    request_body: bytes
    status: int | None = None
    headers: list = field(default_factory=list)
    body: bytes = b""

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.url


@dataclass
class SessionView:
    """What the diff reads of a session: its exchanges in request order and its volatile values."""

    path: Path
    exchanges: list[Exchange]
    secrets: set[str]   # cookie values the session carried: visitor and session ids


def read_session(path: Path) -> SessionView:
    """The agent's requests (not background, not derived records) with their responses."""
    path = Path(path)
    check = verify(path)
    if not check.ok:
        raise DiffError(f"{check.path}: capture log fails verification ({check.damage}: {check.message})")
    exchanges, by_seq, secrets = [], {}, set()
    for line in iter_records(path):
        r = line.record
        if r["kind"] == "request" or (r["kind"] == "egress_blocked" and not r.get("background")):
            exchange = Exchange(r["seq"], r["method"], r["url"], read_body(path, r.get("body")))
            exchanges.append(exchange)
            by_seq[r["seq"]] = exchange
            secrets |= cookie_values(r.get("headers") or (), "cookie")
        elif r["kind"] == "response" and r.get("request") in by_seq:
            exchange = by_seq.pop(r["request"])
            exchange.status, exchange.headers = r["status"], r.get("headers") or []
            exchange.body = decoded(read_body(path, r.get("body")), exchange.headers)
            secrets |= cookie_values(exchange.headers, "set-cookie")
    return SessionView(path, exchanges, secrets)


def cookie_values(headers, name: str) -> set[str]:
    """The values of the cookies in Cookie or Set-Cookie headers (long enough to be ids)."""
    found = set()
    for key, value in headers:
        if key.lower() == name:
            pairs = value.split(";") if name == "cookie" else value.split(";")[:1]
            found |= {p.partition("=")[2].strip() for p in pairs}
    return {v for v in found if len(v) >= 8}


def decoded(body: bytes, headers) -> bytes:
    """A body with its content-encoding undone (as recorded it is what crossed the wire); as it is when
    a coding cannot be undone."""
    encoding = next((v for k, v in headers if k.lower() == "content-encoding"), "")
    if not encoding or not body:
        return body
    out = unpack(body, encoding)
    return body if out.unread else out.data


def masked(body: bytes, secrets: set[str], seen: Counter) -> str | bytes:
    """A text body with volatile text replaced by `<name>` (counting what was replaced in `seen`);
    a body that is not UTF-8 as it is."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            seen["cookie value in body"] += text.count(secret)
            text = text.replace(secret, "<cookie>")
    for name, pattern in VOLATILE_TEXT.items():
        text, n = pattern.subn(f"<{name}>", text)
        if n:
            seen[f"{name} in body"] += n
    return text


def masked_pair(x: bytes, y: bytes, x_secrets: set[str], y_secrets: set[str], volatile: Counter) -> tuple:
    """Both bodies masked; each kind of volatile text found in either counts once in `volatile`."""
    seen_x, seen_y = Counter(), Counter()
    pair = masked(x, x_secrets, seen_x), masked(y, y_secrets, seen_y)
    volatile.update(set(seen_x) | set(seen_y))
    return pair


def first_difference(a: str | bytes, b: str | bytes) -> str:
    """Where two bodies part, with a little of each."""
    if isinstance(a, bytes) or isinstance(b, bytes):
        return f"binary bodies differ ({len(a)} vs {len(b)} bytes)"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    line = a.count("\n", 0, at) + 1
    return f"line {line}: {a[at:at + CONTEXT]!r} vs {b[at:at + CONTEXT]!r}"


def header_set(headers) -> Counter:
    return Counter((k.lower(), v) for k, v in headers if k.lower() not in VOLATILE_HEADERS | HOP_BY_HOP)


def alignment(a: list, b: list) -> list[tuple[str, int, int, int, int]]:
    """(tag, i1, i2, j1, j2) blocks, as difflib names them, of a longest common subsequence of `a` and
    `b` (rapidfuzz's LCSseq): `equal` blocks pair the most items that any order-keeping pairing can."""
    return [(op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end) for op in LCSseq.opcodes(a, b)]


def pairing(a: list, b: list, again_a: list, again_b: list) -> tuple[list[tuple[int, int]], list[tuple[int, int]],
                                                                    list[int], list[int]]:
    """How two lists of keys pair: (the index pairs of a longest common subsequence of `a` and `b`; those
    left over whose `again_` keys are equal, paired in turn: the same request made at another point of
    the order; the unpaired indices of `a`; of `b`)."""
    in_order, left_a, left_b = [], [], []
    for tag, i1, i2, j1, j2 in alignment(a, b):
        if tag == "equal":
            in_order += zip(range(i1, i2), range(j1, j2))
        else:
            left_a += range(i1, i2)
            left_b += range(j1, j2)
    waiting: dict = {}
    for j in left_b:
        waiting.setdefault(again_b[j], deque()).append(j)
    moved = [(i, waiting[again_a[i]].popleft()) for i in left_a if waiting.get(again_a[i])]
    paired_a, paired_b = {i for i, _ in moved}, {j for _, j in moved}
    return in_order, moved, [i for i in left_a if i not in paired_a], [j for j in left_b if j not in paired_b]


def compare_exchanges(a: SessionView, b: SessionView, differences: list, volatile: Counter) -> int:
    """Pair the requests by method and URL, in order where they can be, then the same requests (body
    too) made in another order; add what differs; the number of pairs."""
    in_order, moved, only_a, only_b = pairing([e.key for e in a.exchanges], [e.key for e in b.exchanges],
                                              [(*e.key, e.request_body) for e in a.exchanges],
                                              [(*e.key, e.request_body) for e in b.exchanges])
    differences += [{"what": "only in A", "a_seq": e.seq, "method": e.method, "url": e.url}
                    for e in (a.exchanges[i] for i in only_a)]
    differences += [{"what": "only in B", "b_seq": e.seq, "method": e.method, "url": e.url}
                    for e in (b.exchanges[j] for j in only_b)]
    for i, j in sorted(in_order + moved):
        compare_pair(a.exchanges[i], b.exchanges[j], a.secrets, b.secrets, differences, volatile)
    if moved:
        volatile["requests in another order"] += len(moved)
    return len(in_order) + len(moved)


def compare_pair(x: Exchange, y: Exchange, x_secrets: set[str], y_secrets: set[str], differences: list,
                 volatile: Counter) -> None:
    """Add what differs between two paired exchanges: request body, status, response headers and body."""
    place = {"a_seq": x.seq, "b_seq": y.seq, "method": x.method, "url": x.url}
    if x.request_body != y.request_body:
        ma, mb = masked_pair(x.request_body, y.request_body, x_secrets, y_secrets, volatile)
        if ma != mb:
            differences.append({"what": "request body", **place, "detail": first_difference(ma, mb)})
    if x.status != y.status:
        differences.append({"what": "status", **place, "detail": f"{x.status} vs {y.status}"})
        return
    for name in sorted({k.lower() for k, _ in x.headers + y.headers} & (VOLATILE_HEADERS - {"content-length"})):
        if [v for k, v in x.headers if k.lower() == name] != [v for k, v in y.headers if k.lower() == name]:
            volatile[f"{name} header"] += 1
    ours, theirs = header_set(x.headers), header_set(y.headers)
    if ours != theirs:
        differences.append({"what": "response headers", **place,
                            "detail": ", ".join(sorted({k for k, _ in (ours - theirs) + (theirs - ours)}))})
    if x.body != y.body:
        ma, mb = masked_pair(x.body, y.body, x_secrets, y_secrets, volatile)
        if ma != mb:
            differences.append({"what": "response body", **place, "detail": first_difference(ma, mb)})


def action_key(action: dict, secrets: set[str]) -> str:
    """An action as compared: what it is, not where in the log it sits (seq, evidence are volatile)."""
    shown = json.dumps({k: action.get(k) for k in ACTION_FIELDS}, sort_keys=True, ensure_ascii=False)
    return masked(shown.encode("utf-8"), secrets, Counter())


def compare_audits(a: SessionView, b: SessionView, differences: list) -> dict:
    """The actions and events each session's audit derives, paired in order; add what differs."""
    try:
        ra, rb = audit_session(a.path), audit_session(b.path)
    except AuditError as e:
        return {"skipped": str(e)}
    ka = [action_key(x, a.secrets) for x in ra["actions"]]
    kb = [action_key(x, b.secrets) for x in rb["actions"]]
    for tag, i1, i2, j1, j2 in alignment(ka, kb):
        if tag != "equal":
            differences += [{"what": "action only in A", "a_seq": x["seq"], "detail": describe(x)}
                            for x in ra["actions"][i1:i2]]
            differences += [{"what": "action only in B", "b_seq": x["seq"], "detail": describe(x)}
                            for x in rb["actions"][j1:j2]]

    def events(report: dict, keys: list[str]) -> Counter:
        return Counter((e["category"], e["attribute"], e["matched"], keys[e["action"] - 1]) for e in report["events"])

    ea, eb = events(ra, ka), events(rb, kb)
    for (category, attribute, matched, _), n in sorted((ea - eb).items()):
        differences.append({"what": "event only in A", "detail": f"{category} {attribute} matched {matched!r} (x{n})"})
    for (category, attribute, matched, _), n in sorted((eb - ea).items()):
        differences.append({"what": "event only in B", "detail": f"{category} {attribute} matched {matched!r} (x{n})"})
    return {"a": len(ka), "b": len(kb), "events_a": sum(ea.values()), "events_b": sum(eb.values())}


def describe(action: dict) -> str:
    return f"{action['what']} {action['text'][:60]!r} ({', '.join(action['observers'])})"


def diff_sessions(a: Path, b: Path) -> dict:
    """The comparison of two sessions as a JSON-ready dict: `equal` is true when only volatile fields differ."""
    va, vb = read_session(a), read_session(b)
    differences: list[dict] = []
    volatile: Counter = Counter()
    paired = compare_exchanges(va, vb, differences, volatile)
    audits = compare_audits(va, vb, differences)
    return {
        "a": str(va.path), "b": str(vb.path), "equal": not differences,
        "requests": {"a": len(va.exchanges), "b": len(vb.exchanges), "paired": paired},
        "actions": audits,
        "differences": differences,
        "volatile": {"always": ["record seq, ts, hash, prev", "flow ids", "request headers (cookies, protocol)",
                                "action seq and evidence", "order of responses in the log"],
                     **dict(sorted(volatile.items()))},
    }


def diff_text(result: dict) -> str:
    """The comparison for a terminal: a summary line, what is volatile, then one line per difference."""
    r, acts = result["requests"], result["actions"]
    lines = [f"{'equal' if result['equal'] else 'DIFFERENT'}: {len(result['differences'])} differences; "
             f"requests {r['a']} vs {r['b']}, {r['paired']} paired; "
             + (f"actions {acts['a']} vs {acts['b']}, events {acts['events_a']} vs {acts['events_b']}"
                if "a" in acts else f"actions not compared ({acts['skipped']})")]
    counted = {k: v for k, v in result["volatile"].items() if k != "always"}
    lines.append("volatile, not differences: " + ", ".join(
        [f"{k} ({v})" for k, v in counted.items()] + result["volatile"]["always"]))
    for d in result["differences"]:
        seqs = "/".join(str(d[k]) for k in ("a_seq", "b_seq") if k in d)
        where = f" seq {seqs}" if seqs else ""
        target = f" {d['method']} {d['url']}" if "url" in d else ""
        lines.append(f"  {d['what']}{where}{target}" + (f": {d['detail']}" if d.get("detail") else ""))
    return "\n".join(lines)
