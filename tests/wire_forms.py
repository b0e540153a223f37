"""Request forms written by an outside tester (tests/fixtures/wire_forms/README.md), thrown at the real
proxy: each sent byte for byte through `spillage proxy start --scenario shop-kettle-chat` in a guard
mode, then read back from the session: whether it reached the site or the tracker (their own access
log and the capture's request records), whether the guard recorded it, whether the audit counted it.

    python tests/wire_forms.py [--half dev|test] [--modes off,redact,block] [--out results.json]

prints the table docs/GUARD.md quotes ("Request forms nobody here wrote").
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from urllib.parse import unquote
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).parent))
from run_helpers import SPILLAGE  # noqa: E402
from run_helpers import start_proxy  # noqa: E402

from spillage.audit.attempts import Attempts  # noqa: E402
from spillage.audit.judges import make_judge  # noqa: E402
from spillage.audit.model_provider import ModelTraffic  # noqa: E402
from spillage.audit.session_audit import build_actions  # noqa: E402
from spillage.audit.open_session import OpenSession  # noqa: E402
from spillage.audit.open_session import open_session  # noqa: E402
from spillage.origins.knowledge import site_profiles  # noqa: E402
from spillage.proxy.capturelog import iter_records  # noqa: E402
from spillage.proxy.capturelog import read_body  # noqa: E402
from spillage.proxy.layout import ACCESS_LOG  # noqa: E402

FORMS = Path(__file__).parent / "fixtures" / "wire_forms" / "forms.json.gz"
SCENARIO = "shop-kettle-chat"
MODES = ("off", "redact", "block")
CONSUMES = ("request", "egress_blocked")   # records that stand for one request sent (besides a blocking guard)


def load_forms(half: str | None = None) -> list[dict]:
    forms = json.loads(gzip.decompress(FORMS.read_bytes()))
    return [f for f in forms if half in (None, f["half"])]


# --- sending -------------------------------------------------------------------------------------


def body_of(request: dict) -> bytes:
    if "body_b64" in request:
        return base64.b64decode(request["body_b64"])
    return request.get("body_text", "").encode("utf-8")


def send(proxy_port: int, ca: str, request: dict) -> int:
    """Send one request through the proxy as written (request line, headers, body), HTTP/2 with curl;
    the status it got (0 when none)."""
    if request.get("http2"):
        return send_h2(proxy_port, ca, request)
    parts = urlsplit(request["url"])
    authority = parts.netloc
    target = request["url"].split(authority, 1)[1] or "/"
    body = body_of(request)
    headers = [tuple(h) for h in request.get("headers", [])]
    names = {n.lower() for n, _ in headers}
    lines = ([] if "host" in names else [("Host", authority)]) + headers
    if body or request["method"] in ("POST", "PUT"):
        lines += [] if "content-length" in names else [("Content-Length", str(len(body)))]
    lines.append(("Connection", "close"))
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=60)
    if parts.scheme == "https":
        host, port = parts.hostname, parts.port or 443
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                return 0
            reply += chunk
        if b" 200 " not in reply.split(b"\r\n", 1)[0]:
            return int(reply.split(b" ")[1])
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = False   # odd host labels; the chain is still checked
        sock = context.wrap_socket(sock, server_hostname=host)
    else:
        target = request["url"]
    head = f"{request['method']} {target} HTTP/1.1\r\n" + "".join(f"{n}: {v}\r\n" for n, v in lines) + "\r\n"
    sock.sendall(head.encode("utf-8") + body)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        data += chunk
    sock.close()
    status = data.split(b"\r\n", 1)[0].split(b" ")
    return int(status[1]) if len(status) > 1 and status[1].isdigit() else 0


def send_h2(proxy_port: int, ca: str, request: dict) -> int:
    with tempfile.NamedTemporaryFile() as f:
        f.write(body_of(request))
        f.flush()
        command = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2", "--path-as-is",
                   "--proxy", f"http://127.0.0.1:{proxy_port}", "--cacert", ca, "-X", request["method"], request["url"]]
        for name, value in request.get("headers", []):
            command += ["-H", f"{name}: {value}"]
        if body_of(request) or request["method"] == "POST":
            command += ["--data-binary", f"@{f.name}"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    return int(out) if out.isdigit() else 0


# --- reading back --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one form in one mode."""

    form: dict
    statuses: list[int] = field(default_factory=list)
    seqs: set[int] = field(default_factory=set)        # its records: requests, derived records, guards
    delivered: bool = False                            # a request of it was forwarded (a request record)
    recorded: bool = False                             # the guard intervened (an enforced guard record)
    monitored: bool = False                            # the guard only noted it (monitor mode)
    audited: bool = False                              # the audit counted its attribute on its records
    attempted: bool = False                            # ... among what the agent attempted
    counted: set[str] = field(default_factory=set)     # attributes the audit counted on it (clean forms: false alarms)
    original_arrived: bool = False                     # a request the guard changed reached the site as written
    kept_back: list = field(default_factory=list)      # the guard records of its requests the guard changed

    @property
    def leaks(self) -> bool:
        return self.form["attribute"] is not None


def run_mode(workdir: Path, mode: str, forms: list[dict]) -> list[Outcome]:
    """Send `forms` through one proxy session in guard `mode`, then read the session back."""
    guard = () if mode == "off" else ("--guard", mode)
    proxy, shown = start_proxy(workdir, "--scenario", SCENARIO, *guard)
    port = int(shown["proxy"].rsplit(":", 1)[1])
    outcomes = [Outcome(form) for form in forms]
    try:
        for outcome in outcomes:
            outcome.statuses = [send(port, shown["ca"], request) for request in outcome.form["requests"]]
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.communicate(timeout=120)
    session = Path(shown["session"])
    audit = subprocess.run([*SPILLAGE, "audit", str(session), "--no-write", "--format", "json"], cwd=workdir,
                           capture_output=True, text=True, timeout=600)
    assert audit.returncode == 0, audit.stderr[-3000:]   # the whole session audits, as any other
    read_back(session, outcomes)
    return outcomes


def audit_alone(session: OpenSession, outcome: Outcome, scenario, profiles, judge) -> tuple[list, list]:
    """The events the audit finds in one form's records alone (delivered, attempted): each form is
    judged as if it were its session's only traffic, so forms sent one after another do not mix."""
    keep = outcome.seqs

    def alone(records):
        return (r for r in records if r["seq"] in keep or r["kind"] == "session_start")

    events = []
    attempts = Attempts(session.folder)   # the first pass shows it the guard records, the second puts their originals back
    for replay in (alone, lambda records: attempts.replay(alone(records))):
        actions, _, _ = build_actions(session, profiles, None, ModelTraffic(session.folder),
                                   attempts.see if not events else (lambda record: None), replay)
        events.append([e for e in judge.judge(actions, scenario, profiles) if not e.uncertain])
    return events[0], events[1]


def read_back(session: Path, outcomes: list[Outcome]) -> None:
    """Give each form its records (in the order the requests were sent), and what the guard, the
    sites and the audit made of them."""
    flat = [(o, r) for o in outcomes for r in o.form["requests"]]
    position = 0
    owner: dict[int, Outcome] = {}
    for line in iter_records(session):
        record = line.record
        kind = record["kind"]
        if kind in CONSUMES or (kind == "guard" and record["request"] is None):
            outcome, request = flat[position]
            sent = record["original"]["url"] if kind == "guard" else record["url"]
            assert same_target(sent, request["url"]), f"record {record['seq']} ({sent}) is not {request['url']}"
            position += 1
            owner[record["seq"]] = outcome
            outcome.delivered |= kind == "request"
        elif kind == "guard" or record.get("request") in owner:
            owner[record["seq"]] = owner.get(record["request"]) or flat[position - 1][0]
        else:
            continue
        outcome = owner[record["seq"]]
        outcome.seqs.add(record["seq"])
        if kind == "guard":
            outcome.recorded |= record["enforced"]
            outcome.monitored |= not record["enforced"]
            if record["enforced"]:
                outcome.kept_back.append(record)
    assert position == len(flat), f"{len(flat) - position} requests left no record"
    opened = open_session(session, keep_lines=True)   # its lines read once for every form
    profiles = site_profiles(opened.catalog.path, benchmark=False)
    judge = make_judge("lexical")
    for outcome in outcomes:
        delivered, attempted = audit_alone(opened, outcome, opened.scenario, profiles, judge)
        outcome.counted = {e.attribute.id for e in delivered}
        outcome.audited = outcome.form["attribute"] in outcome.counted
        outcome.attempted = outcome.form["attribute"] in {e.attribute.id for e in attempted}
    arrived(session, outcomes)


def same_target(recorded: str, sent: str) -> bool:
    """Whether a record's URL is the request sent (the host may be refused, the query redacted)."""
    a, b = urlsplit(recorded), urlsplit(sent)
    return (a.hostname or "").lower() == (b.hostname or "").lower() or not a.path


def arrived(session: Path, outcomes: list[Outcome]) -> None:
    """Mark the forms of which a request the guard changed in its target or body reached the sites as
    it was written, by their own access log (target and body; a body over what the log keeps, by its
    size). A change in the headers alone the log cannot show: the capture's request record does."""
    log = [json.loads(line) for line in (session / ACCESS_LOG).read_text(encoding="utf-8").splitlines()]
    seen = Counter(access_key(e["method"], e["target"], e["body"], e["size"]) for e in log)
    sent = {line.record["seq"]: line.record for line in iter_records(session) if line.record["kind"] == "request"}
    forwards = Counter(access_key(r["method"], target_of(r["url"]), body.decode("utf-8", "replace"), len(body))
                       for r in sent.values() for body in [read_body(session, r["body"])])
    for outcome in outcomes:
        for guard in outcome.kept_back:
            original = guard["original"]
            body = read_body(session, original["body"])
            key = access_key(original["method"], target_of(original["url"]), body.decode("utf-8", "replace"), len(body))
            forwarded = sent.get(guard["request"])
            if forwarded is not None:
                body = read_body(session, forwarded["body"])
                if key == access_key(forwarded["method"], target_of(forwarded["url"]), body.decode("utf-8", "replace"),
                                     len(body)):
                    continue   # only its headers changed
            if seen[key] > forwards[key]:   # more of them arrived than the proxy forwarded
                outcome.original_arrived = True


def access_key(method: str, target: str, body: str | None, size: int) -> tuple:
    """A request as the sites' access log keeps it (a body past 64 KiB by its size)."""
    return method, unquote(target), body if body is not None and size <= 64 * 1024 else size


def target_of(url: str) -> str:
    return url.split(urlsplit(url).netloc, 1)[1] or "/"


# --- the table ----------------------------------------------------------------------------------


def summary(results: dict[str, list[Outcome]]) -> dict:
    """Counts per mode: readable leaking forms delivered, recorded, audited; out-of-reach ones; false
    alarms on clean forms."""
    out = {}
    for mode, outcomes in results.items():
        readable = [o for o in outcomes if o.leaks and o.form["readable"]]
        clean = [o for o in outcomes if not o.leaks]
        out[mode] = {
            "readable": len(readable),
            "delivered": sum(o.delivered for o in readable),
            "arrived_as_written": sum(o.original_arrived for o in readable),
            "recorded": sum(o.recorded or o.monitored for o in readable),
            "audited_delivered": sum(o.audited for o in readable),
            "audited_attempted": sum(o.attempted for o in readable),
            "clean": len(clean),
            "clean_changed": sum(o.recorded for o in clean),
            "clean_counted": sum(bool(o.counted) for o in clean),
            "out_of_reach": sum(o.leaks and not o.form["readable"] for o in outcomes),
        }
    return out


AREAS = (   # the tester's kinds, by what they try (tests/fixtures/wire_forms/README.md)
    ("plain text in the sites' forms and events", ("plain-", "suggest", "review-search")),
    ("places: names, path, host, fragment, headers, cookies", ("param-name", "path-segment", "host-label", "fragment",
                                                               "cookie", "user-agent", "referer", "origin-header",
                                                               "authorization", "custom-header", "json-key",
                                                               "form-field-name", "multipart")),
    ("encodings: percent, entities, escapes, base64/32, hex, QP", ("enc-",)),
    ("Unicode: homoglyphs, fullwidth, zero-width, soft hyphen, marks", ("unicode-",)),
    ("bodies: compression members and frames, uploads, charsets, size", ("compress-", "charset-", "large-body",
                                                                        "get-with-body")),
    ("splits: two values, two fields, one character per request", ("split-",)),
    ("behaviour: odd ids and slugs, cart, tracker events", ("behavior-",)),
    ("combinations: two places at once, HTTP/2", ("two-places", "http2")),
    ("meaning: paraphrases, derived words, what a choice implies", ("paraphrase",)),
    ("out of reach: rot13, reversed, leetspeak, AES", ("out-of-reach-",)),
    ("clean: browsing, beacons, look-alikes", ("clean-",)),
)


def area(form: dict, by_meaning: set[str] = frozenset()) -> str:
    if form["id"] in by_meaning:
        return AREAS[8][0]
    return next(name for name, kinds in AREAS if form["kind"].startswith(kinds))


def table(results: dict[str, list[Outcome]], by_meaning: set[str] = frozenset()) -> str:
    """The Markdown table of docs/GUARD.md: per area of forms, per mode, reached / recorded / counted:
    how many got to the site or the tracker as they were written, how many the guard recorded, how
    many the audit counted (what was delivered without the guard; what was attempted with it)."""
    head = "| forms | n | " + " | ".join(f"{m}: reached / recorded / counted" for m in results) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(results)]
    for name, _ in AREAS:
        cells, n = [], 0
        for mode, outcomes in results.items():
            mine = [o for o in outcomes if area(o.form, by_meaning) == name]
            n = len(mine)
            counted = sum(bool(o.counted) if not o.leaks else o.audited if mode == "off" else o.attempted
                          for o in mine)
            cells.append(f"{sum(o.delivered and (not o.recorded or o.original_arrived) for o in mine)} / "
                         f"{sum(o.recorded or o.monitored for o in mine)} / {counted}")
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    forms = load_forms(args.half)
    with tempfile.TemporaryDirectory(prefix="wire-forms-") as tmp:
        results = {mode: run_mode(Path(tmp), mode, forms) for mode in args.modes.split(",")}
    from test_wire_forms import BY_MEANING
    print(table(results, BY_MEANING))
    print(json.dumps(summary(results), indent=1))
    if args.out:
        args.out.write_text(json.dumps({m: [{"id": o.form["id"], "kind": o.form["kind"], "attribute": o.form["attribute"],
                                             "readable": o.form["readable"], "half": o.form["half"],
                                             "statuses": o.statuses, "delivered": o.delivered,
                                             "arrived_as_written": o.original_arrived, "recorded": o.recorded,
                                             "monitored": o.monitored, "audited": o.audited, "attempted": o.attempted,
                                             "counted": sorted(o.counted)} for o in outcomes]
                                        for m, outcomes in results.items()}, indent=1))


if __name__ == "__main__":
    main()
