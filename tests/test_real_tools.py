"""Captures that real third-party tools made of one short browsing of shop.test, each beside the live
session our proxy captured of the same browsing at the same time (tests/fixtures/real-tools/README.md).

Each is imported (`spillage import`) and compared with its live session: the requests, the responses,
and the actions and events the audit derives. What the format cannot carry the import names in `lacks`,
and the comparison expects exactly that difference: the live session *without* what the file lacks
must audit as the import does.

Two facts of the browsing the comparisons rest on:

- t.js sends what it reports as a page is left (pagehide, docs/TRACKING.md) by `fetch(..., {keepalive:
  true})` instead of `sendBeacon`, which Chromium sends with the request header `priority: u=1, i`
  (sendBeacon: `u=4, i`): that header is how the live log shows which beacons left with their page.
- Which action the audit credits a button's click beacon to depends on whether that beacon reached the
  proxy just before or just after the navigation it caused, a matter of milliseconds that differs
  between any two recordings of the same browsing (audit/actions.py); actions are compared without
  `clicked`, and scroll actions by what was seen, not for how long (the dwell adds up impressions).
"""

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest
from capture_helpers import live_of
from capture_helpers import unpack_fixture

from schema_check import assert_valid_record
from spillage.audit.diff import ACTION_FIELDS
from spillage.audit.session_audit import audit_session
from spillage.audit.session_audit import summary_text
from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.formats import har
from spillage.proxy.formats.exchange import UNKNOWN_BODY
from spillage.proxy.layout import BLOB_DIR
from spillage.proxy.layout import CATALOG_COPY
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.verify import verify
from spillage.runner.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "real-tools"
SCENARIO = "shop-kettle-chat"
TRACKER_ENDPOINTS = ("https://metrics.test/collect", "https://shop.test/_log", "http://shop.test/_log")
UPSTREAM_REFUSED = "Upstream proxy 127.0.0.1:{port} refused HTTP CONNECT request: 403 Forbidden"
TLS = "TLS streams (pcap)"
CART_FIELDS = [["product_id", "10250"], ["variant", "0"], ["qty", "1"]]   # the add-to-cart form


@dataclass
class Sent:
    """One request record, what answered it, and what the log derived from it."""

    seq: int
    method: str
    url: str
    headers: list
    body: dict | None
    status: int | None = None
    response_sha: str | None = None
    errors: list[str] = field(default_factory=list)
    beacon: dict | None = None   # the beacon record derived from it
    form: list | None = None     # the form record's fields

    @property
    def key(self) -> tuple:
        return self.method, self.url, (self.body or {}).get("sha256")

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def left_with_its_page(self) -> bool:
        """A tracker beacon t.js sent as its page was left (keepalive fetch: `priority: u=1, i`)."""
        return self.beacon is not None and self.header("priority") == "u=1, i"


# --- fixtures on disk ------------------------------------------------------------------------


def unpack(name: str, tmp: Path, catalog: Path) -> Path:
    """A copy of fixture folder `name` with its gzipped files unpacked, the live session in `live/` under
    the name its log is signed for, and the seed-0 catalog beside its log."""
    return unpack_fixture(FIXTURES / name, tmp, catalog)


def imported(source: Path, out: Path, catalog: Path) -> Path:
    """`spillage import SOURCE --scenario SCENARIO --out OUT`, with the seed-0 catalog put in place."""
    assert main(["import", str(source), "--scenario", SCENARIO, "--out", str(out), "--no-catalog"]) == 0
    shutil.copy(catalog, out / CATALOG_COPY)
    return out


def live_and_imported(name: str, source: str, tmp_path: Path, catalog_file: Path) -> tuple[Path, Path]:
    """The live session of fixture `name`, and its file `source` imported (checked to be a valid log)."""
    folder = unpack(name, tmp_path, catalog_file)
    session = imported(folder / source, tmp_path / "imported", catalog_file)
    assert_valid_log(session)
    return live_of(folder), session


def records(session: Path) -> list[dict]:
    return [line.record for line in iter_records(session)]


def import_record(session: Path) -> dict:
    return next(r for r in records(session) if r["kind"] == "import")


def sent(session: Path) -> list[Sent]:
    """The session's request records in log order, each with its response, errors, beacon and form."""
    by_seq: dict[int, Sent] = {}
    for r in records(session):
        if r["kind"] == "request":
            by_seq[r["seq"]] = Sent(r["seq"], r["method"], r["url"], r["headers"], r["body"])
            continue
        target = by_seq.get(r.get("request"))
        if target is None:
            continue
        if r["kind"] == "response":
            target.status, target.response_sha = r["status"], (r["body"] or {}).get("sha256")
        elif r["kind"] == "error":
            target.errors.append(r["message"])
        elif r["kind"] == "beacon":
            target.beacon = r
        elif r["kind"] == "form":
            target.form = r["fields"]
    return list(by_seq.values())


def blocked(session: Path) -> Counter:
    """The refused requests of a session: (method, url, background)."""
    return Counter((r["method"], r["url"], r["background"]) for r in records(session) if r["kind"] == "egress_blocked")


def only_in(a: list[Sent], b: list[Sent], key=lambda s: s.key) -> list[Sent]:
    """The requests of `a` that `b` does not have (as a multiset, by `key`), in `a`'s order."""
    left = Counter(map(key, b))
    out = []
    for s in a:
        if left[key(s)]:
            left[key(s)] -= 1
        else:
            out.append(s)
    return out


def pairs(a: list[Sent], b: list[Sent], key=lambda s: s.key) -> list[tuple[Sent, Sent]]:
    """The requests of `a` and `b` paired by `key`, in order within each key."""
    waiting: dict[tuple, list[Sent]] = {}
    for s in b:
        waiting.setdefault(key(s), []).append(s)
    return [(s, waiting[key(s)].pop(0)) for s in a if waiting.get(key(s))]


# --- the live session without what a file lacks ----------------------------------------------


def without(live: Path, dropped: set[int], out: Path) -> Path:
    """A copy of the live session's traffic with the records `dropped` (requests, refusals, and every
    record naming them) left out, seqs renumbered, the scenario and catalog beside it: what the live capture would be
    had it not seen them."""
    out.mkdir()
    renumbered: dict[int, int] = {}
    with CaptureWriter(out) as writer:
        for r in records(live):
            kind, fields = r["kind"], {k: r[k] for k in r if k not in ("v", "seq", "ts", "kind", "prev", "hash")}
            if kind in ("signer", "checkpoint", "session_end") or dropped & {r["seq"], fields.get("request")}:
                continue
            if isinstance(fields.get("request"), int):
                fields["request"] = renumbered[fields["request"]]
            if kind == "session_start":   # an unsigned copy says so (a log that claims signatures it lacks fails)
                fields["options"] = {**fields["options"], "signed": False}
            renumbered[r["seq"]] = writer.append(kind, **fields)["seq"]
        writer.append("session_end", reason="proxy shutdown", records=writer.count)
    if (live / BLOB_DIR).is_dir():
        shutil.copytree(live / BLOB_DIR, out / BLOB_DIR, dirs_exist_ok=True)
    for name in (SCENARIO_COPY, CATALOG_COPY):
        shutil.copy(live / name, out / name)
    return out


def audit_view(session: Path) -> tuple[Counter, Counter]:
    """The session's actions and events as compared here (module docstring): actions without `clicked`,
    scroll actions by what was seen; events by category, attribute, word and the action they are in."""
    report = audit_session(session)
    keys = [action_key(a) for a in report["actions"]]
    events = Counter((e["category"], e["attribute"], e["matched"], keys[e["action"] - 1]) for e in report["events"])
    assert keys and events, f"{session.name}: an audit with nothing to compare"
    return Counter(keys), events


def action_key(action: dict) -> str:
    shown = {k: action.get(k) for k in ACTION_FIELDS if k != "clicked"}
    if action["what"] == "scroll":
        shown["detail"] = sorted((s["kind"], s["id"]) for s in action["detail"]["seen"])
    return json.dumps(shown, sort_keys=True, ensure_ascii=False)


def assert_audits_alike(expected: Path, session: Path) -> None:
    assert audit_view(session) == audit_view(expected)


def assert_valid_log(session: Path) -> None:
    assert verify(session).ok
    for r in records(session):
        assert_valid_record(r)


# --- browser-recorded HARs -------------------------------------------------------------------


def assert_same_answers(live: list[Sent], imported_: list[Sent]) -> None:
    """Every request both hold was answered alike (status, body), where the import holds an answer."""
    for ours, theirs in pairs(live, imported_):
        if theirs.status is not None:
            assert (theirs.status, theirs.response_sha) == (ours.status, ours.response_sha), ours.url


@pytest.mark.parametrize("name, source", [("playwright-embed", "playwright-embed.har"),
                                          ("playwright-attach", "playwright-attach.zip")])
def test_playwright_har_lacks_exit_beacons_and_the_favicon_and_nothing_else(tmp_path, catalog_file, name, source):
    live, session = live_and_imported(name, source, tmp_path, catalog_file)
    provenance = import_record(session)
    cancelled = [s for s in sent(session) if s.errors == ["net::ERR_ABORTED"]]
    assert provenance["lacks"] == [har.LACK_UNLOAD_BEACONS, har.LACK_OWN_REQUESTS] + (
        [har.LACK_CANCELLED] if cancelled else [])
    assert "unknown_bodies" not in provenance["counts"]       # embedded or attached: every body is there
    ours, theirs = sent(live), sent(session)
    missing = only_in(ours, theirs)
    exits = [s for s in ours if s.left_with_its_page]
    assert len(exits) >= 10 and any(s.beacon["data"]["page"] == "https://shop.test/cart" for s in exits)
    favicon = [s for s in ours if s.url.endswith("/favicon.ico")]
    assert [s.seq for s in missing] == sorted(s.seq for s in exits + favicon)
    assert only_in(theirs, ours) == []
    assert all(s.status is None for s in cancelled)          # no response record, no status -1
    assert_same_answers(ours, theirs)
    form = next(s for s in theirs if s.form)
    assert form.form == next(s.form for s in ours if s.form) == CART_FIELDS
    assert_audits_alike(without(live, {s.seq for s in missing}, tmp_path / "expected"), session)


def test_playwright_omit_har_says_every_omitted_body_is_unknown(tmp_path, catalog_file, capsys):
    folder = unpack("playwright-omit", tmp_path, catalog_file)
    session = imported(folder / "playwright-omit.har", tmp_path / "imported", catalog_file)
    assert_valid_log(session)
    provenance = import_record(session)
    assert provenance["lacks"] == [har.LACK_UNLOAD_BEACONS, har.LACK_OWN_REQUESTS, har.LACK_RESPONSE_BODIES,
                                   har.LACK_REQUEST_BODIES, har.LACK_CANCELLED]
    ours, theirs = sent(live_of(folder)), sent(session)
    place = Counter((s.method, s.url) for s in ours if not (s.left_with_its_page or s.url.endswith("/favicon.ico")))
    assert Counter((s.method, s.url) for s in theirs) == place
    posted = [s for s in theirs if s.method == "POST"]   # every one had a body on the wire
    assert len(posted) >= 30 and all(s.body is None for s in posted)            # null: unknown, never empty
    assert all(UNKNOWN_BODY.format("request") in s.errors for s in posted)
    assert all(s.beacon["data"] is None for s in posted if s.url in TRACKER_ENDPOINTS)
    assert not any(s.form for s in theirs)                   # the add-to-cart form cannot be read
    unknown_responses = [t for t in theirs if UNKNOWN_BODY.format("response") in t.errors]
    assert unknown_responses and all(t.response_sha is None and t.status == 200 for t in unknown_responses)
    assert provenance["counts"]["unknown_bodies"] == len(posted) + len(unknown_responses)
    err = capsys.readouterr().err
    assert f"{len(posted) + len(unknown_responses)} bodies are not in the file: unknown, not empty" in err
    assert f"lacks: {'; '.join(provenance['lacks'])}" in err
    # the audit sees the pages the URLs name, told to shop.test; no beacon, form or add-to-cart
    live_actions = audit_session(live_of(folder))["actions"]
    report = audit_session(session)
    assert report["provenance"]["lacks"] == provenance["lacks"]   # the audit marks what the file lacks
    said = summary_text(report).splitlines()[1]
    assert "; the file lacks " in said and har.LACK_REQUEST_BODIES in said
    actions = report["actions"]
    assert [(a["what"], a["url"]) for a in actions] == [
        (a["what"], a["url"]) for a in live_actions if a["what"] in ("search", "filter", "view_product")]
    assert {o for a in actions for o in a["observers"]} == {"shop.test"}
    assert "add_to_cart" in [a["what"] for a in live_actions]


def test_chrome_har_repeats_content_type_and_drops_what_got_no_answer(tmp_path, catalog_file):
    folder = unpack("chrome-har", tmp_path, catalog_file)
    live = live_of(folder)
    session = imported(folder / "chrome-har.har", tmp_path / "imported", catalog_file)
    assert_valid_log(session)
    assert import_record(session)["lacks"] == [har.LACK_UNLOAD_BEACONS, har.LACK_NO_ANSWER]
    ours, theirs = sent(live), sent(session)
    cart = next(s for s in theirs if s.url == "https://shop.test/cart/add")
    assert [k.lower() for k, _ in cart.headers].count("content-type") == 2     # chrome-har sends it twice
    assert cart.form == next(s.form for s in ours if s.form) == CART_FIELDS
    missing = only_in(ours, theirs)
    exits = {s.seq for s in ours if s.left_with_its_page}
    assert exits <= {s.seq for s in missing}
    # the rest: beacons the browser sent as it followed the click that caused them, and never saw answered
    unanswered = [s for s in missing if s.seq not in exits]
    assert unanswered and all(s.url in TRACKER_ENDPOINTS and s.beacon["event"] in ("click", "keys", "submit")
                              for s in unanswered)
    assert only_in(theirs, ours) == []
    assert_same_answers(ours, theirs)
    assert_audits_alike(without(live, {s.seq for s in missing}, tmp_path / "expected"), session)


# --- mitmproxy: flows and its HAR dump, chained in front of our proxy ------------------------


@pytest.mark.parametrize("name, source", [("mitmproxy12", "mitmdump.mitm"), ("mitmproxy12", "mitmdump.har"),
                                          ("mitmproxy11", "mitmdump.mitm")])
def test_mitmproxy_files_match_the_live_session(tmp_path, catalog_file, name, source):
    live, session = live_and_imported(name, source, tmp_path, catalog_file)
    assert import_record(session)["lacks"] == []
    ours, theirs = sent(live), sent(session)
    ours_test = [s for s in theirs if ".test/" in s.url]
    assert only_in(ours, ours_test) == [] and only_in(ours_test, ours) == []
    assert_same_answers(ours, ours_test)
    assert all(s.status is not None for s in ours_test)
    # the browser's own traffic: mitmdump decrypted it, our proxy refused the tunnel it asked for upstream
    port = json.loads((live / "meta.json").read_text())["proxy"]["url"].rsplit(":", 1)[1]
    refused = [s for s in theirs if ".test/" not in s.url]
    assert refused and all(s.errors == [UPSTREAM_REFUSED.format(port=port)] and s.status is None for s in refused)
    hosts = Counter(f"{s.url.split('/')[2]}:443" for s in refused)
    # our proxy refused one tunnel more per host: mitmdump's first, opened to learn the host's certificate
    # (its option upstream_cert) before the browser's request went up in a tunnel of its own
    assert hosts + Counter(set(hosts)) == Counter(
        url for (method, url, background) in blocked(live).elements() if method == "CONNECT")
    assert_audits_alike(live, session)


# --- pcap and pcapng of plain-HTTP browsing, between the browser and our proxy ---------------


@pytest.mark.parametrize("source", ["tcpdump.pcap", "tshark.pcapng"])
def test_pcap_matches_the_live_session_but_its_tls_tunnels(tmp_path, catalog_file, capsys, source):
    folder = unpack("pcap", tmp_path, catalog_file)
    live = live_of(folder)
    session = imported(folder / source, tmp_path / "imported", catalog_file)
    assert_valid_log(session)
    provenance = import_record(session)
    assert provenance["lacks"] == [TLS]
    assert f"{source} lacks: {TLS}" in capsys.readouterr().err
    ours, theirs = sent(live), sent(session)
    # inside the tunnels: every https:// request, answered or refused by our proxy
    tunnelled = [r for r in records(live)
                 if r["kind"] in ("request", "egress_blocked") and r["url"].startswith("https://")]
    assert "metrics.test" in {r["url"].split("/")[2] for r in tunnelled}
    tunnels = [s for s in theirs if s.method == "CONNECT"]
    assert all(s.status == 200 for s in tunnels)
    assert {s.url for s in tunnels} == {f"{r['url'].split('/')[2]}:443" for r in tunnelled}
    notes = [r["message"] for r in records(session) if r["kind"] == "error" and r["request"] is None]
    assert len(notes) == len(tunnels) == provenance["counts"]["opaque_streams"]
    assert all(n.endswith(")") and ": a tunnel after CONNECT (TLS inside) (" in n for n in notes)
    cleartext = [s for s in theirs if s.method != "CONNECT"]
    hidden = {r["seq"] for r in tunnelled}
    assert only_in(ours, cleartext) == [s for s in ours if s.seq in hidden] and only_in(cleartext, ours) == []
    assert_same_answers(ours, cleartext)
    assert blocked(session) == blocked(live) - Counter(
        (r["method"], r["url"], r["background"]) for r in tunnelled if r["kind"] == "egress_blocked")
    assert_audits_alike(without(live, hidden, tmp_path / "expected"), session)
