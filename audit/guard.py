"""The guard's decisions: what a request would reveal of the guarded attributes, and what to do.

The request is read the way the auditor reads the capture (docs/GUARD.md): its records are derived
as the proxy derives them (proxy/formats/flowrecords.py), turned into actions by the same
ActionBuilder with the same site knowledge, and judged by the lexical judge's per-action rules, so
the guard and the audit agree on what a request says (content) and what it chooses (behavior).
Beacons that report products or sections carrying a guarded concept on screen are caught too,
whatever their dwell.

    guard = Guard(policy, profiles)
    decision = guard.decide(request)      # None: nothing to do; else redact / strip / block / drop
    decision.request                      # for redact and strip: what to send instead
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from dataclasses import field
from urllib.parse import parse_qsl
from urllib.parse import urlencode
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

from mitmproxy import http

from spillage.audit.actions import ActionBuilder
from spillage.audit.guard_policy import Policy
from spillage.audit.judges.lexical import DWELL_MS
from spillage.audit.judges.lexical import LexicalJudge
from spillage.audit.judges.lexical import find_in
from spillage.audit.judges.lexical import item_concepts
from spillage.audit.judges.lexical import ms_of
from spillage.audit.judges.lexical import ms_text
from spillage.audit.judges.lexical import profile_of
from spillage.audit.model import B_I
from spillage.audit.model import C_E
from spillage.audit.model import C_I
from spillage.audit.wire import decode_value
from spillage.audit.wire import request_texts
from spillage.origins.knowledge import SiteProfile
from spillage.origins.knowledge import profile_for
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.formats.flowrecords import beacon_payload
from spillage.proxy.formats.flowrecords import header_pairs
from spillage.proxy.formats.flowrecords import is_beacon
from spillage.proxy.formats.flowrecords import write_request
from spillage.scenarios.matching import find_form
from spillage.scenarios.matching import redact_forms
from spillage.scenarios.matching import without_forms

CONTENT_CATEGORIES = (C_E, C_I)
VALUE_EVENTS = ("field", "keys", "submit")       # beacons that carry what was typed


@dataclass(frozen=True)
class Finding:
    """One guarded attribute a request would reveal: how (category), by what, through which channel."""

    attribute: str
    category: str        # C_E, C_I, B_E, B_I
    matched: str
    channel: str         # content, behavior, impression, fields

    def as_json(self) -> dict:
        return {"attribute": self.attribute, "category": self.category, "matched": self.matched,
                "channel": self.channel}


@dataclass
class Decision:
    """What the guard does with one request."""

    observer: str                      # first_party or third_party
    action: str                        # redact, strip, block (a page for the agent) or drop (a beacon)
    rule: str                          # the policy rule that decided: first_party.content, …
    findings: list[Finding]
    request: http.Request | None = None  # redact and strip: the request to send instead
    notes: list[str] = field(default_factory=list)

    def explanation(self, host: str) -> str:
        """What the agent's page says: what was not sent, to whom, and why."""
        said = "; ".join(f"{f.attribute} ({describe(f)})" for f in self.findings)
        return (f"Spillage guard did not send this request to {host}: it would tell {host} "
                f"({self.observer.replace('_', ' ')}) about {said}, which this task does not need. "
                "Leave that out and try again.")


def describe(finding: Finding) -> str:
    what = {"content": "the text says", "behavior": "choosing", "impression": "seen on screen",
            "fields": "a field value says"}[finding.channel]
    return f"{what} {finding.matched!r}"


def body_object(data: bytes | None) -> dict | None:
    """A body as the capture log holds one inline (audit code reads it with read_body)."""
    if data is None:
        return None
    digest = hashlib.sha256(data).hexdigest()
    try:
        return {"size": len(data), "sha256": digest, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"size": len(data), "sha256": digest, "base64": base64.b64encode(data).decode("ascii")}


class Dwell:
    """What a tracker has been told of each item's time on screen, per page: the guard takes an item
    carrying a guarded concept out of impression events once it would reach the audit's DWELL_MS on
    that page (items on screen as the page loaded excepted: the site put them there), as the audit
    counts a B_I only from there; shorter glances pass."""

    def __init__(self) -> None:
        self.on_load: dict[str, set[str]] = {}      # page → ids in view as it loaded (view events)
        self.ms: dict[tuple, float] = {}            # (page, kind, id) → ms the tracker was told
        self.held: set[tuple] = set()               # items the guard has taken out since

    def loaded(self, data) -> None:
        """A view event: the page loaded (again), with what was in view. A view without `seen` (the
        site's own /_log one, sent beside the tracker's) says nothing of it and changes nothing."""
        if isinstance(data, dict) and data.get("page") and isinstance(data.get("seen"), list):
            page = str(data["page"])
            self.on_load[page] = {str(v) for v in data["seen"]}
            self.ms = {key: ms for key, ms in self.ms.items() if key[0] != page}   # time on screen starts again

    def over(self, data, profiles: dict[str, SiteProfile], concepts: dict[str, str]) -> dict[int, Finding]:
        """The items of an impression event (by index) that carry a guarded concept and would take
        their time on screen to DWELL_MS or more, with their finding."""
        if not isinstance(data, dict):
            return {}
        page = str(data.get("page") or "")
        profile = profile_for(profiles, urlsplit(page).hostname or "")
        found = {}
        for n, item in enumerate(data.get("items") or []):
            if not isinstance(item, dict) or str(item.get("id")) in self.on_load.get(page, ()):
                continue
            key = (page, str(item.get("kind")), str(item.get("id")))
            guarded = [c for c in item_concepts(profile, key[1], item.get("id")) if c in concepts]
            if guarded and (key in self.held or self.ms.get(key, 0) + ms_of(item) >= DWELL_MS):
                found[n] = Finding(concepts[guarded[0]], B_I, f"seen:{key[1]}:{key[2]} ({ms_text(self.ms.get(key, 0) + ms_of(item))})",
                                   "impression")
        return found

    def told(self, data, taken: set[int], delivered: bool) -> None:
        """Remember an impression event: its items but `taken` told (when it was `delivered`), and
        `taken` held from now on."""
        if not isinstance(data, dict):
            return
        page = str(data.get("page") or "")
        for n, item in enumerate(data.get("items") or []):
            if isinstance(item, dict):
                key = (page, str(item.get("kind")), str(item.get("id")))
                if n in taken:
                    self.held.add(key)
                elif delivered:
                    self.ms[key] = self.ms.get(key, 0) + ms_of(item)


def without_items(request: http.Request, taken: set[int]) -> http.Request:
    """An impression event without its items `taken` (by index)."""
    return with_json_body(request, lambda data: {**data, "items": [i for n, i in enumerate(data.get("items") or [])
                                                                  if n not in taken]})


class Guard:
    """Decisions for one session: a policy, the sites' knowledge, the event endpoints."""

    def __init__(self, policy: Policy, profiles: dict[str, SiteProfile], beacon_urls=DEFAULT_BEACON_URLS):
        self.policy, self.profiles, self.beacon_urls = policy, profiles, tuple(beacon_urls)
        self.judge = LexicalJudge()
        self.forms = tuple(dict.fromkeys(f for a in policy.attributes for f in (*a.match, *a.cues)))
        self.lowered = tuple(dict.fromkeys(f.lower() for f in self.forms))
        self.concepts = {c: a.id for a in policy.attributes for c in a.concepts}
        self.dwell = Dwell()

    # --- reading a request -------------------------------------------------------------------

    def observer(self, request: http.Request) -> str:
        """first_party when the request goes to the site of the page it came from (or is a
        navigation with no page), else third_party."""
        page = request.headers.get("origin") or request.headers.get("referer") or ""
        page_host = (urlsplit(page).hostname or "").lower()
        return "first_party" if not page_host or page_host == request.pretty_host.lower() else "third_party"

    def findings(self, request: http.Request) -> list[Finding]:
        """Every guarded attribute `request` would reveal, as the auditor would see it."""
        records: list[dict] = []

        def write(kind: str, **fields) -> dict:
            records.append({"seq": len(records), "kind": kind, **fields})
            return records[-1]

        write_request(write, body_object, "guard", request, self.beacon_urls)
        builder = ActionBuilder(self.profiles)
        for record in records:
            builder.add(record)
        found = []
        for number, action in enumerate(builder.finish(), start=1):
            if action.kind == "scroll":
                continue   # what was on screen is judged over the page's whole dwell (Dwell), not per beacon
            profile = profile_of(action, self.profiles)
            for attribute in self.policy.attributes:
                for event in self.judge.action_events(number, action, attribute, profile):
                    if not event.uncertain:
                        channel = "content" if event.category in CONTENT_CATEGORIES else "behavior"
                        found.append(Finding(attribute.id, event.category, event.matched, channel))
        found += self.said(request, found)
        return list(dict.fromkeys(found))

    def said(self, request: http.Request, known: list[Finding]) -> list[Finding]:
        """Content the actions do not account for: any decoded string of the URL, the body or the
        Referer that states a guarded attribute (a page URL inside a beacon, a field of a submit
        event), outside its look-alike phrases."""
        texts = request_texts(request.pretty_url, header_pairs(request.headers), request.raw_content)
        texts += decode_value(request.headers.get("referer", ""))
        covered = {f.attribute for f in known if f.channel == "content"}
        found = []
        for attribute in self.policy.attributes:
            if attribute.id in covered:
                continue
            plain = [without_forms(t, attribute.look_alikes) for t in texts] if attribute.look_alikes else texts
            if form := find_in(plain, attribute.match):
                found.append(Finding(attribute.id, C_E, form, "content"))
            elif cue := find_in(plain, attribute.cues):
                found.append(Finding(attribute.id, C_I, f"cue:{cue}", "content"))
        return found

    # --- deciding ------------------------------------------------------------------------------

    def decide(self, request: http.Request) -> Decision | None:
        """What to do with `request` under the policy; None when it reveals nothing guarded."""
        observer = self.observer(request)
        rules = self.policy.for_observer(observer)
        if is_beacon(request, self.beacon_urls):
            return self.decide_beacon(request, observer, rules)
        return self.decide_request(request, observer, rules)

    def decide_beacon(self, request: http.Request, observer: str, rules) -> Decision | None:
        """A tracker or site-log event: typed values stripped when the rules say so; items that would
        reach the audit's dwell on a guarded concept taken out (redact) or the event dropped; text
        that states an attribute redacted, or the event dropped when it cannot be or when it tells
        a choice. Keeps `self.dwell` up to date with what the tracker was told."""
        event, data = beacon_payload(request.raw_content or b"")
        if event == "view":
            self.dwell.loaded(data)
        lingered = self.dwell.over(data, self.profiles, self.concepts) if event == "impression" else {}
        found = self.findings(request) + list(lingered.values())
        sent = request
        if rules.fields == "strip" and event in VALUE_EVENTS and isinstance(data, dict):
            sent = with_json_body(sent, strip_values)
        if found and rules.beacons == "drop":
            sent = None
        elif found and rules.beacons == "redact":
            if lingered:
                sent = without_items(sent, set(lingered))
            left = self.findings(sent)
            if any(f.channel != "content" for f in left):
                sent = None
            elif left:
                redacted = self.redacted(sent)
                sent = redacted if redacted is not None and not self.findings(redacted) else None
        if not self.policy.enforcing:
            self.dwell.told(data, set(), delivered=True)
        elif event == "impression":
            self.dwell.told(data, set(lingered), delivered=sent is not None)
        rule = f"{observer}.beacons" if found else f"{observer}.fields"
        if sent is None:
            return Decision(observer, "drop", rule, found)
        if sent is request:
            return None
        return Decision(observer, "redact" if found else "strip", rule, found, sent)

    def decide_request(self, request: http.Request, observer: str, rules) -> Decision | None:
        """A request that is not a beacon: behavior is blocked, content redacted or blocked."""
        found = self.findings(request)
        content = [f for f in found if f.channel == "content"]
        chosen = [f for f in found if f.channel != "content"]
        if chosen and rules.behavior == "block":
            return Decision(observer, "block", f"{observer}.behavior", found)
        rule = f"{observer}.content"
        if not content or rules.content == "allow":
            return None
        if rules.content == "block":
            return Decision(observer, "block", rule, content)
        redacted = self.redacted(request)
        if redacted is None or self.findings(redacted):
            why = "its text cannot be taken out cleanly" if redacted is None else "redacting left a trace"
            return Decision(observer, "block", rule, content, notes=[f"{why}: not sent"])
        return Decision(observer, "redact", rule, content, redacted)

    # --- redacting -------------------------------------------------------------------------------

    def redacted(self, request: http.Request) -> http.Request | None:
        """`request` with the guarded forms and cues taken out of its query values and body, kept
        well-formed (lengths, encodings, multipart boundaries); None when that cannot be done (the
        text is in the path, or in a body we cannot rewrite)."""
        out = request.copy()
        path = urlsplit(request.url).path
        if any(find_form(text, self.forms) for text in decode_value(path)):
            return None
        query = [(k, self.redact_value(v)) for k, v in request.query.items(multi=True)]
        if any(v is None for _, v in query):
            return None
        out.query = query
        if "referer" in request.headers:
            referer = self.redacted_url(request.headers["referer"])
            out.headers["referer"] = referer
        if not request.raw_content:
            return out
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media == "application/x-www-form-urlencoded":
            form = [(k, self.redact_value(v)) for k, v in request.urlencoded_form.items(multi=True)]
            if any(v is None for _, v in form):
                return None
            out.urlencoded_form = form
            return out
        if media == "multipart/form-data":
            try:
                parts = [(k, self.redact_value(v.decode("utf-8"))) for k, v in request.multipart_form.items(multi=True)]
            except (UnicodeDecodeError, ValueError):
                return None
            if any(v is None for _, v in parts):
                return None
            out.multipart_form = [(k, v.encode("utf-8")) for k, v in parts]
            return out
        try:
            text = request.content.decode("utf-8")   # its Content-Encoding undone (and redone below)
        except ValueError:   # a coding that does not decode, or not UTF-8
            return None
        value = self.redact_value(text)
        if value is None:
            return None
        out.content = value.encode("utf-8")
        return out

    def redacted_url(self, url: str) -> str:
        """`url` with its query values redacted; only its origin when the path or a value says more."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}/"
        if any(find_form(text, self.forms) for text in decode_value(parts.path)):
            return origin
        pairs = [(k, self.redact_value(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        if any(v is None for _, v in pairs):
            return origin
        return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(pairs), ""))

    def redact_value(self, value: str) -> str | None:
        """`value` without the guarded forms and cues, in the encoding it came in (plain text, JSON,
        base64 of text); None when they are in it under an encoding this cannot rewrite."""
        document = json_document(value)
        if document is not None:
            walked = self.redact_json(document)
            return None if walked is None else json_text(walked)
        decoded = base64_text(value)
        if decoded is not None:
            inner = self.redact_value(decoded)
            return None if inner is None else base64.b64encode(inner.encode("utf-8")).decode("ascii")
        plain = self.trimmed(redact_forms(value, self.forms)[0])
        if any(find_form(text, self.forms) for text in decode_value(plain)):
            return None
        return plain

    def trimmed(self, text: str) -> str:
        """`text` without an ending that is the start of a guarded form (3 characters or more, from a
        word's start): the values of keystroke events and suggestion requests are forms being typed."""
        low = text.lower()
        for form in self.lowered:
            for k in range(len(form) - 1, 2, -1):
                if low.endswith(form[:k]) and (len(low) == k or not low[-k - 1].isalnum()):
                    return text[:-k].rstrip()
        return text

    def redact_json(self, node):
        if isinstance(node, str):
            return self.redact_value(node)
        if isinstance(node, list):
            items = [self.redact_json(v) for v in node]
            return None if any(i is None and v is not None for i, v in zip(items, node)) else items
        if isinstance(node, dict):
            items = {k: self.redact_json(v) for k, v in node.items()}
            return None if any(items[k] is None and node[k] is not None for k in node) else items
        return node


def json_text(data) -> str:
    """Compact JSON of `data`, non-ASCII text as it is; escaped when it holds a lone surrogate (which
    UTF-8 cannot carry: a beacon may have sent one as `\\ud800`)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, separators=(",", ":"))
    return text


def json_document(value: str):
    """The JSON object or array `value` holds, else None."""
    stripped = value.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def base64_text(value: str) -> str | None:
    """The UTF-8 text that `value` is the base64 of (16 characters or more), else None."""
    if len(value) < 16 or len(value) % 4 or not value.isascii():
        return None
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded if decoded.isprintable() else None


def strip_values(data):
    """A field, keys or submit beacon's payload with every typed value emptied."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    if "value" in out:
        out["value"] = ""
    if isinstance(out.get("entries"), list):
        out["entries"] = [{**e, "value": ""} if isinstance(e, dict) else e for e in out["entries"]]
    if isinstance(out.get("fields"), list):
        out["fields"] = [[f[0], ""] if isinstance(f, list) and f else f for f in out["fields"]]
    return out


def with_json_body(request: http.Request, change) -> http.Request:
    """A copy of `request` whose JSON body went through `change`."""
    out = request.copy()
    _, data = beacon_payload(request.raw_content or b"")
    out.content = json_text(change(data)).encode("utf-8")
    return out
