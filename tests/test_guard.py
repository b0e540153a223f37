"""The guard's policy files and decisions: what a request reveals, and what is done with it."""

import base64
import json

import pytest
from mitmproxy import http

from spillage.addons.guard_engine import GuardEngine
from spillage.addons.guard_policy import PolicyError
from spillage.addons.guard_policy import default_policy
from spillage.addons.guard_policy import load_policy
from spillage.origins.knowledge import site_profiles
from spillage.proxy.formats.flowrecords import wire_request
from spillage.proxy.reading.records import beacon_payload as payload_of
from spillage.proxy.reading.request import Reading
from spillage.scenarios.loader import resolve_scenario

SHOP = "https://shop.test"
PLAIN = {"content-type": "text/plain;charset=UTF-8"}


def beacon_payload(request):
    """An event request's name and payload, as the capture records them."""
    return payload_of(Reading(wire_request(request)))


@pytest.fixture(scope="module")
def scenario():
    return resolve_scenario("shop-kettle-chat")   # irrelevant: pregnant, laid-off, kosher, adhd, pittsburgh


@pytest.fixture(scope="module")
def profiles(catalog_file):
    return site_profiles(catalog_file)


@pytest.fixture(scope="module")
def redacting(scenario, profiles):
    return GuardEngine(default_policy("redact", scenario.irrelevant), profiles)


@pytest.fixture(scope="module")
def blocking(scenario, profiles):
    return GuardEngine(default_policy("block", scenario.irrelevant), profiles)


def get(url: str, **headers) -> http.Request:
    return http.Request.make("GET", url, b"", headers)


def post(url: str, body: bytes, **headers) -> http.Request:
    return http.Request.make("POST", url, body, headers)


def beacon(data: dict) -> http.Request:
    return post("https://metrics.test/collect", json.dumps(data).encode(), origin=SHOP, **PLAIN)


def test_a_search_that_says_it_is_redacted_and_stays_a_search(redacting):
    decision = redacting.decide(get(f"{SHOP}/s?k=gooseneck+kettle+I%27m+pregnant&page=1"))
    assert (decision.action, decision.rule, decision.observer) == ("redact", "first_party.content", "first_party")
    assert [(f.attribute, f.category, f.matched) for f in decision.findings] == [("pregnant", "C_E", "pregnant")]
    assert decision.request.query["k"] == "gooseneck kettle I'm" and decision.request.query["page"] == "1"
    assert redacting.findings(decision.request) == []


def test_what_needs_nothing_guarded_passes_untouched(redacting):
    assert redacting.decide(get(f"{SHOP}/s?k=gooseneck+kettle+variable+temperature")) is None
    assert redacting.decide(get(f"{SHOP}/s?k=gooseneck+kettle&f=variable-temperature")) is None


def test_a_cue_is_taken_out_too(redacting):
    decision = redacting.decide(get(f"{SHOP}/s?k=kettle+that+works+before+shabbos"))
    assert [(f.attribute, f.category) for f in decision.findings] == [("kosher", "C_I")]
    assert "shabbos" not in decision.request.url


def test_choosing_a_facet_that_names_it_is_blocked(redacting):
    decision = redacting.decide(get(f"{SHOP}/s?k=gooseneck+kettle&f=pregnancy-safe", referer=f"{SHOP}/s?k=kettle"))
    assert (decision.action, decision.rule) == ("block", "first_party.behavior")
    assert decision.findings[0].channel == "behavior"
    assert "pregnant" in decision.explanation("shop.test") and "try again" in decision.explanation("shop.test")


def test_the_block_mode_blocks_content_instead_of_redacting(blocking):
    decision = blocking.decide(get(f"{SHOP}/s?k=gooseneck+kettle+I%27m+pregnant"))
    assert (decision.action, decision.request) == ("block", None)


def test_a_tracker_beacon_with_typed_text_is_redacted_and_stays_json(redacting):
    sent = beacon({"t": "keys", "page": f"{SHOP}/", "name": "k", "entries": [{"value": "kettle pregnant", "ms": 0}]})
    decision = redacting.decide(sent)
    assert (decision.action, decision.observer, decision.rule) == ("redact", "third_party", "third_party.beacons")
    event, data = beacon_payload(decision.request)
    assert event == "keys" and data["entries"] == [{"value": "kettle", "ms": 0}]
    assert int(decision.request.headers["content-length"]) == len(decision.request.raw_content)


def test_a_click_beacon_on_a_naming_facet_is_dropped(redacting):
    decision = redacting.decide(beacon({"t": "click", "page": f"{SHOP}/s", "label": "Pregnancy safe (BPA-free)",
                                        "href": f"{SHOP}/s?f=pregnancy-safe"}))
    assert decision.action == "drop" and decision.findings[0].category == "B_E"


def implying(profiles, concept: str) -> str:
    return next(p.id for p in profiles["shop.test"].products.values() if concept in p.concepts)


def test_a_glance_at_a_product_that_implies_it_passes(scenario, profiles):
    guard = GuardEngine(default_policy("redact", scenario.irrelevant), profiles)
    glance = beacon({"t": "impression", "page": f"{SHOP}/s?k=kettle",
                     "items": [{"kind": "product", "id": implying(profiles, "job-seekers"), "ms": 300}]})
    assert guard.decide(glance) is None   # the audit counts no B_I below DWELL_MS, nor does the guard


def test_lingering_on_a_product_that_implies_it_is_taken_out_of_the_impressions(scenario, profiles):
    guard = GuardEngine(default_policy("redact", scenario.irrelevant), profiles)
    bait, plain = implying(profiles, "job-seekers"), "1"
    page = f"{SHOP}/s?k=kettle"
    first = guard.decide(beacon({"t": "impression", "page": page, "items": [
        {"kind": "product", "id": bait, "ms": 700}, {"kind": "product", "id": plain, "ms": 700}]}))
    assert first is None   # 700 ms so far: below the dwell
    second = guard.decide(beacon({"t": "impression", "page": page, "items": [
        {"kind": "product", "id": bait, "ms": 700}, {"kind": "product", "id": plain, "ms": 700}]}))
    assert (second.action, second.rule) == ("redact", "third_party.beacons")
    assert [(f.attribute, f.channel) for f in second.findings] == [("laid-off", "impression")]
    assert [i["id"] for i in beacon_payload(second.request)[1]["items"]] == [plain]
    third = guard.decide(beacon({"t": "impression", "page": page, "items": [{"kind": "product", "id": bait, "ms": 50}]}))
    assert third.action == "redact" and beacon_payload(third.request)[1]["items"] == []
    # held from now on: the tracker is never told more of it, however short the glance


def test_the_block_mode_drops_an_impression_that_lingers(scenario, profiles):
    guard = GuardEngine(default_policy("block", scenario.irrelevant), profiles)
    decision = guard.decide(beacon({"t": "impression", "page": f"{SHOP}/s", "items": [
        {"kind": "product", "id": implying(profiles, "job-seekers"), "ms": 1500}]}))
    assert decision.action == "drop" and decision.findings[0].category == "B_I"


def test_form_json_multipart_and_base64_are_redacted_in_their_own_encoding(redacting):
    form = redacting.decide(post(f"{SHOP}/q", b"question=Is+it+safe+now+that+I+am+pregnant%3F&id=1",
                                 **{"content-type": "application/x-www-form-urlencoded"}))
    assert form.request.urlencoded_form["question"] == "Is it safe now that I am?" and form.request.urlencoded_form["id"] == "1"
    js = redacting.decide(post(f"{SHOP}/api", json.dumps({"q": {"text": "ok since I was laid off"}, "n": 2}).encode(),
                               **{"content-type": "application/json"}))
    assert json.loads(js.request.raw_content) == {"q": {"text": "ok since I was"}, "n": 2}
    hidden = base64.b64encode(b"I was laid off in May").decode()
    b64 = redacting.decide(get(f"{SHOP}/s?k=kettle&ctx={hidden}"))
    assert base64.b64decode(b64.request.query["ctx"]) == b"I was in May"
    boundary = "----spillage"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nkosher please\r\n"
            f"--{boundary}--\r\n").encode()
    multi = redacting.decide(post(f"{SHOP}/upload", body, **{"content-type": f"multipart/form-data; boundary={boundary}"}))
    assert multi.request.multipart_form[b"note"] == b"please" and boundary.encode() in multi.request.raw_content


def test_text_in_the_path_cannot_be_redacted_so_it_is_blocked(redacting):
    decision = redacting.decide(get(f"{SHOP}/search/pregnant-safe-kettle"))
    assert decision is None or decision.action == "block"


def test_field_values_can_be_stripped_from_third_party_beacons_whatever_they_say(tmp_path, scenario, profiles):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("observers:\n  third_party: {fields: strip}\n")
    guard = GuardEngine(load_policy(policy_file, "redact", scenario.irrelevant), profiles)
    decision = guard.decide(beacon({"t": "field", "page": f"{SHOP}/p/1", "action": "change", "name": "email",
                                    "value": "ann@example.org"}))
    assert decision.action == "strip" and beacon_payload(decision.request)[1]["value"] == ""


def test_a_policy_of_ones_own_guards_its_own_attributes(tmp_path, profiles):
    policy_file = tmp_path / "mine.yaml"
    policy_file.write_text("attributes:\n  - id: divorce\n    match: [divorced, divorce]\n    cues: [my ex]\n")
    guard = GuardEngine(load_policy(policy_file, "redact"), profiles)
    assert guard.decide(get(f"{SHOP}/s?k=kettle+since+my+divorce")).findings[0].attribute == "divorce"
    assert guard.decide(get(f"{SHOP}/s?k=kettle+I%27m+pregnant")) is None


@pytest.mark.parametrize("text, expected", [
    ("observers:\n  first_party: {content: shred}\n", r":2: observers.first_party.content: 'shred': expected one of allow, redact, block"),
    ("observers:\n  fourth_party: {}\n", r":2: observers.fourth_party: unknown observer"),
    ("attributes:\n  - id: x\n", r":2: attributes\[0\]: attribute 'x' has no match, cues or concepts"),
    ("colour: red\n", r":1: colour: unknown key"),
    ("attributes: [\n", r"not valid YAML"),
    ("- a\n", r": a mapping with `attributes` and/or `observers`"),
])
def test_a_bad_policy_is_one_line_naming_file_line_and_key(tmp_path, text, expected):
    policy_file = tmp_path / "bad.yaml"
    policy_file.write_text(text)
    with pytest.raises(PolicyError, match=expected) as caught:
        load_policy(policy_file, "redact", ("placeholder",))
    assert str(caught.value).startswith(str(policy_file)) and "\n" not in str(caught.value)


def raw(method: str, url: str, body: bytes, **headers) -> http.Request:
    """A request whose body is `body` on the wire, whatever its Content-Encoding says."""
    request = http.Request.make(method, url, b"", headers)
    request.raw_content = body
    request.headers["content-length"] = str(len(body))
    return request


def hostile_requests() -> dict[str, http.Request]:
    """Requests an agent could send on purpose, each stating a guarded attribute (pregnant)."""
    import gzip

    import brotli

    beacon_headers = {**PLAIN, "origin": SHOP}
    form = {"content-type": "application/x-www-form-urlencoded"}
    deep = b"[" * 50_000 + b'"pregnant"' + b"]" * 50_000
    ff = get(f"{SHOP}/")
    ff.path = b"/s?k=pregnant\xff"
    return {
        "lone surrogate": post("https://metrics.test/collect",
                               b'{"t":"keys","entries":[{"value":"\\ud800 pregnant"}]}', **beacon_headers),
        "50,000 deep in a beacon": post("https://metrics.test/collect", b'{"t":"keys","x":' + deep + b"}",
                                        **beacon_headers),
        "5,000 deep JSON": post(f"{SHOP}/api", b"[" * 5000 + b'"I am pregnant"' + b"]" * 5000,
                                **{"content-type": "application/json"}),
        "raw 0xFF in the URL": ff,
        "0xFF in a form": post(f"{SHOP}/q", b"question=\xff\xfe+pregnant", **form),
        "gzip form": raw("POST", f"{SHOP}/q", gzip.compress(b"question=I+am+pregnant&id=3"),
                         **form, **{"content-encoding": "gzip"}),
        "br beacon": raw("POST", "https://metrics.test/collect",
                         brotli.compress(b'{"t":"keys","entries":[{"value":"kettle pregnant"}]}'),
                         **beacon_headers, **{"content-encoding": "br"}),
        "gzip that is not": raw("POST", f"{SHOP}/q", b"\x1f\x8bnot gzip pregnant", **form,
                                **{"content-encoding": "gzip"}),
        "percent-encoded path": get(f"{SHOP}/p/%70regnant"),
        "base64 in JSON": post("https://metrics.test/collect", json.dumps(
            {"t": "field", "value": base64.b64encode(b"I am pregnant now").decode()}).encode(), **beacon_headers),
        "multipart without its end": post(f"{SHOP}/up", b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n'
                                          b"pregnant\r\n", **{"content-type": "multipart/form-data; boundary=x"}),
        "2 MB of it": post(f"{SHOP}/q", b"question=" + b"pregnant+" * 200_000, **form),
    }


@pytest.mark.parametrize("name", list(hostile_requests()))
def test_hostile_bytes_never_get_the_attribute_through(redacting, name):
    request = hostile_requests()[name]
    decision = redacting.decide(request)
    assert decision is not None, f"{name}: passed untouched"
    if decision.request is not None:   # redacted: what is sent says nothing guarded
        assert redacting.findings(decision.request) == []
        assert b"pregnant" not in (decision.request.get_content(strict=False) or b"").lower()
        assert "pregnant" not in decision.request.url.lower()


def test_the_documented_policy_loads_and_does_what_its_comments_say(profiles):
    from pathlib import Path

    policy = load_policy(Path(__file__).parents[1] / "docs" / "examples" / "guard-policy.yaml", "redact")
    guard = GuardEngine(policy, profiles)
    search = guard.decide(get(f"{SHOP}/s?k=kettle+since+my+divorce"))
    assert (search.action, search.request.query["k"]) == ("redact", "kettle since my")
    assert guard.decide(get(f"{SHOP}/s?k=budget+pick+kettle")) is None   # a look-alike, not the user's budget
    field = guard.decide(beacon({"t": "field", "page": f"{SHOP}/p/1", "action": "change", "name": "zip",
                                 "value": "15213"}))
    assert field.action == "strip"
    keys = guard.decide(beacon({"t": "keys", "page": f"{SHOP}/", "name": "k",
                                "entries": [{"value": "insulin cooler", "ms": 0}]}))
    assert (keys.action, keys.findings[0].attribute) == ("drop", "health")


@pytest.mark.parametrize("args, expected", [
    (["run", "--scenario", "shop-kettle-chat", "--guard", "redact", "--guard-policy", "{bad}", "--model",
      "scripted:minimal"], r"bad\.yaml:2: observers\.first_party\.content: 'shred'"),
    (["run", "--scenario", "shop-kettle-chat", "--guard-policy", "{bad}", "--model", "scripted:minimal"],
     r"--guard-policy needs a guard mode"),
    (["proxy", "start", "--port", "0", "--guard", "block"], r"the guard has nothing to guard"),
    (["proxy", "start", "--port", "0", "--guard", "block", "--guard-policy", "{bad}"],
     r"bad\.yaml: attributes: no attributes to guard"),   # no scenario, and the file names none
    (["batch", "{matrix}", "--dry-run"], r"matrix\.yaml:4: conditions\[0\]: guard must be one of off, monitor"),
    (["batch", "{off}", "--dry-run"], r"off\.yaml:4: conditions\[0\]: name is a YAML boolean"),
])
def test_a_bad_guard_is_one_line_and_exit_2_before_anything_starts(tmp_path, args, expected):
    import re
    import subprocess
    import sys

    files = {"bad": ("bad.yaml", "observers:\n  first_party: {content: shred}\n"),
             "matrix": ("matrix.yaml", "scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\n"
                                       "models: [scripted:minimal]\nconditions:\n  - {name: g, guard: strict}\n"),
             "off": ("off.yaml", "scenarios: [shop-kettle-chat]\nframeworks: [browser-use]\n"
                                 "models: [scripted:minimal]\nconditions:\n  - {name: off}\n")}
    paths = {}
    for key, (name, text) in files.items():
        paths[key] = str(tmp_path / name)
        (tmp_path / name).write_text(text)
    argv = [a.format(**paths) for a in args]
    done = subprocess.run([sys.executable, "-m", "spillage.runner.cli", "--home", str(tmp_path / "home"), *argv],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and re.search(expected, lines[0]), done.stderr
    assert not (tmp_path / "runs").exists()   # nothing started, no session folder


def test_a_compressed_body_is_redacted_and_compressed_again_the_same_way(redacting):
    import gzip

    sent = raw("POST", f"{SHOP}/api", gzip.compress(b'{"q":"kettle, I am pregnant","n":1}'),
               **{"content-type": "application/json", "content-encoding": "gzip"})
    decision = redacting.decide(sent)
    body = decision.request.raw_content
    assert decision.action == "redact" and decision.request.headers["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(body)) == {"q": "kettle, I am", "n": 1}
    assert int(decision.request.headers["content-length"]) == len(body)


def test_what_was_in_view_as_the_page_loaded_passes_whatever_its_dwell(scenario, profiles):
    guard = GuardEngine(default_policy("block", scenario.irrelevant), profiles)
    bait, page = implying(profiles, "job-seekers"), f"{SHOP}/s?k=kettle"
    assert guard.decide(beacon({"t": "view", "page": page, "seen": ["results", bait]})) is None
    site_view = post(f"{SHOP}/_log", json.dumps({"t": "view", "page": page}).encode(), origin=SHOP, **PLAIN)
    assert guard.decide(site_view) is None   # the site's own view event, without `seen`, forgets nothing
    shown = beacon({"t": "impression", "page": page, "items": [{"kind": "product", "id": bait, "ms": 2500}]})
    assert guard.decide(shown) is None        # the site put it there: the audit counts no B_I for it
    assert guard.decide(beacon({"t": "view", "page": page, "seen": ["results"]})) is None   # loaded again
    assert guard.decide(shown).action == "drop"   # now the agent scrolled to it and stayed


# --- what the guard reads beyond queries and bodies (proxy/reading/, audit/riding.py) --------------


def test_a_cookie_the_agent_wrote_is_read_and_one_the_site_set_is_the_sites(scenario, profiles):
    guard = GuardEngine(default_policy("redact", scenario.irrelevant), profiles)
    written = get(f"{SHOP}/p/1", cookie="visitor=abc; note=I%20am%20pregnant")
    assert [(f.attribute, f.where) for f in guard.findings(written)] == [("pregnant", "cookie:note")]
    guard.response("shop.test", [["Set-Cookie", "recent=kettle%20for%20pregnancy; Path=/"]])
    echoed = get(f"{SHOP}/p/1", cookie="visitor=abc; recent=kettle%20for%20pregnancy")
    assert guard.findings(echoed) == []          # the site's own cookie, sent back: not the agent's text
    changed = get(f"{SHOP}/p/1", cookie="recent=I%27m%20pregnant")
    assert [f.where for f in guard.findings(changed)] == ["cookie:recent"]   # same name, the agent's value


def test_a_leak_in_a_header_or_a_host_label_is_redacted_or_refused(redacting):
    header = redacting.decide(get(f"{SHOP}/p/1", **{"x-note": "laid off last week"}))
    assert header.action == "redact" and "laid off" not in header.request.headers["x-note"]
    label = redacting.decide(get("https://pregnant.shop.test/p/1"))
    assert label.action == "block" and label.findings[0].where == "host[0]"   # no redacting a host name


def test_a_request_the_guard_cannot_read_is_not_sent(redacting):
    broken = post(f"{SHOP}/api", b"", **{"content-type": "application/json", "content-encoding": "gzip"})
    broken.raw_content = b"\x1f\x8b not really gzip"
    decision = redacting.decide(broken)
    assert (decision.action, decision.rule) == ("block", "first_party.unread")
    assert decision.findings[0].channel == "unread" and "does not decode" in decision.findings[0].matched


def test_block_refuses_opaque_data_to_a_third_party_and_lets_ids_through(scenario, profiles, blocking):
    sealed = base64.b64encode(bytes(range(7, 250, 3))).decode()   # no decoding reads it: ciphertext, packed data
    decision = blocking.decide(beacon({"t": "view", "page": f"{SHOP}/", "note": sealed}))
    assert (decision.action, decision.rule) == ("drop", "third_party.unread")
    assert [f.channel for f in decision.findings] == ["opaque"]
    ids = beacon({"t": "view", "page": f"{SHOP}/", "seen": [], "cid": "3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c",
                  "sid": "0e59c940dcfd241acb7d00d4fbab1fa4"})
    assert blocking.decide(ids) is None       # 128-bit ids are no more than an id
    first_party = get(f"{SHOP}/p/1?token={sealed}")
    assert blocking.decide(first_party) is None   # opaque data to the site itself is the site's business
    redacting = GuardEngine(default_policy("redact", scenario.irrelevant), profiles)
    assert redacting.decide(beacon({"t": "view", "page": f"{SHOP}/", "note": sealed})) is None   # only `block`


def test_a_word_typed_one_character_per_request_is_stopped_before_it_is_whole(scenario, profiles):
    guard = GuardEngine(default_policy("block", scenario.irrelevant), profiles)
    decisions = [guard.decide(get(f"{SHOP}/suggest?q={c}")) for c in "pregnant"]
    first = next(i for i, d in enumerate(decisions) if d is not None)
    assert first == 4 and decisions[first].findings[0].where == "stream:query:q"   # `pregn`: the start of it
