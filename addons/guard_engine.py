"""The guard's decisions: what a request would reveal of the guarded attributes, and what to do.

The request is read the way the auditor reads the capture (docs/GUARD.md): its records are derived
as the proxy derives them (proxy/formats/flowrecords.py), turned into actions by the same
ActionBuilder with the same site knowledge, and judged by the lexical judge's per-action rules, so
the guard and the audit agree on what a request says (content) and what it chooses (behavior).
Beacons that report products or sections carrying a guarded concept on screen are caught too,
whatever their dwell.

    guard = GuardEngine(policy, profiles)
    decision = guard.decide(request)      # None: nothing to do; else redact / strip / block / drop
    decision.request                      # for redact and strip: what to send instead
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from functools import lru_cache
from urllib.parse import parse_qsl
from urllib.parse import urlencode
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

from mitmproxy import http

from spillage.audit.actions import ActionBuilder
from spillage.addons.guard_policy import Policy
from spillage.audit.judges.context import set_aside
from spillage.audit.judges.lexical import DWELL_MS
from spillage.audit.judges.lexical import LexicalJudge
from spillage.audit.judges.lexical import item_concepts
from spillage.audit.judges.lexical import ms_of
from spillage.audit.judges.lexical import ms_text
from spillage.audit.judges.lexical import profile_of
from spillage.audit.model import B_I
from spillage.audit.model import C_E
from spillage.audit.model import C_I
from spillage.audit.observers import registrable_domain
from spillage.audit.page_labels import PageLabels
from spillage.audit.riding import Riders
from spillage.origins.knowledge import SiteProfile
from spillage.origins.knowledge import profile_for
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.beacons import SITE
from spillage.proxy.beacons import beacon_field_role
from spillage.proxy.beacons import beacon_target
from spillage.proxy.beacons import endpoints
from spillage.proxy.formats.flowrecords import wire_request
from spillage.proxy.reading.decode import texts as decoded_texts
from spillage.proxy.reading.records import beacon_payload
from spillage.proxy.reading.records import Derived
from spillage.proxy.reading.records import derived_records
from spillage.proxy.reading.records import write_records
from spillage.proxy.reading.request import Piece
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.request import WireRequest
from spillage.proxy.reading.streams import Streams
from spillage.scenarios.matching import find_form
from spillage.scenarios.matching import redact_forms
from spillage.scenarios.model import Attribute

CONTENT_CATEGORIES = (C_E, C_I)
# Where the guard cannot take text out and keep the request what it was: it is blocked instead.
FIXED_PLACES = ("method", "host[", "path[", "fragment", "query-name", "header-name", "cookie-name",
                "body:form-name", "body:part-name", "body:part-filename")
KEPT_HEADERS = ("host", "content-length", "content-type", "content-encoding", "transfer-encoding")
OPAQUE_LENGTH = 48          # characters of one value beyond which no id is that long (128-bit hex: 32, a UUID: 36)
OPAQUE_BITS = 3.5           # bits of entropy per character of text that reads as random
ENCODED = re.compile(r"[A-Za-z0-9+/=_\-]+")   # the alphabets packed data travels in (base64, base64url, hex, base32)
VALUE_EVENTS = ("field", "keys", "submit")       # beacons that carry what was typed


@dataclass(frozen=True)
class Finding:
    """One guarded attribute a request would reveal: how (category), by what, through which channel."""

    attribute: str
    category: str        # C_E, C_I, B_E, B_I
    matched: str
    channel: str         # content, behavior, impression, fields; unread, opaque (what the guard cannot read)
    where: str = ""      # the place in the request (proxy/reading/request.py), when known
    decodings: tuple[str, ...] = ()

    def as_json(self) -> dict:
        return {"attribute": self.attribute, "category": self.category, "matched": self.matched,
                "channel": self.channel, **({"where": self.where, "decodings": list(self.decodings)}
                                            if self.where else {})}


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
            "fields": "a field value says", "unread": "it cannot be read:", "opaque": "it carries unreadable data:"
            }[finding.channel]
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


def page_load(data: dict) -> tuple[str, str]:
    """Which page load an event is of: its page and t.js's per-load id (`sid`)."""
    return str(data.get("page") or ""), str(data.get("sid") or "")


class Dwell:
    """What a tracker has been told of each item's time on screen, per page load: the guard takes an
    item carrying a guarded concept out of impression events once it would reach the audit's DWELL_MS
    on that page (items on screen as the page loaded excepted: the site put them there), as the audit
    counts a B_I only from there; shorter glances pass."""

    def __init__(self) -> None:
        self.on_load: dict[tuple, set[str]] = {}    # page load → ids in view as it loaded (view events)
        self.ms: dict[tuple, float] = {}            # (page load, kind, id) → ms the tracker was told
        self.held: set[tuple] = set()               # items the guard has taken out since

    def loaded(self, data) -> None:
        """A view event: the page loaded (again), with what was in view. A view without `seen` (the
        site's own /_log one, sent beside the tracker's) says nothing of it and changes nothing."""
        if isinstance(data, dict) and data.get("page") and isinstance(data.get("seen"), list):
            load = page_load(data)
            self.on_load[load] = {str(v) for v in data["seen"]}
            self.ms = {key: ms for key, ms in self.ms.items() if key[0] != load}   # time on screen starts again

    def over(self, data, profiles: dict[str, SiteProfile], concepts: dict[str, str]) -> dict[int, Finding]:
        """The items of an impression event (by index) that carry a guarded concept and would take
        their time on screen to DWELL_MS or more, with their finding."""
        if not isinstance(data, dict):
            return {}
        load = page_load(data)
        profile = profile_for(profiles, urlsplit(load[0]).hostname or "")
        found = {}
        for n, item in enumerate(data.get("items") or []):
            if not isinstance(item, dict) or str(item.get("id")) in self.on_load.get(load, ()):
                continue
            key = (load, str(item.get("kind")), str(item.get("id")))
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
        load = page_load(data)
        for n, item in enumerate(data.get("items") or []):
            if isinstance(item, dict):
                key = (load, str(item.get("kind")), str(item.get("id")))
                if n in taken:
                    self.held.add(key)
                elif delivered:
                    self.ms[key] = self.ms.get(key, 0) + ms_of(item)


def without_items(request: http.Request, taken: set[int]) -> http.Request:
    """An impression event without its items `taken` (by index)."""
    return with_json_body(request, lambda data: {**data, "items": [i for n, i in enumerate(data.get("items") or [])
                                                                  if n not in taken]})


class GuardEngine:
    """Decisions for one session: a policy, the sites' knowledge, the event endpoints."""

    def __init__(self, policy: Policy, profiles: dict[str, SiteProfile], beacon_urls=DEFAULT_BEACON_URLS):
        self.policy, self.profiles, self.beacon_urls = policy, profiles, tuple(beacon_urls)
        self.endpoints = endpoints(self.beacon_urls)
        self.judge = LexicalJudge()
        self.forms = tuple(dict.fromkeys(f for a in policy.attributes for f in (*a.match, *a.cues)))
        lowered = tuple(dict.fromkeys(f.lower() for f in self.forms))
        self.starts = {form[:k] for form in lowered for k in range(3, len(form))}   # a form being typed
        self.longest = max(map(len, lowered), default=0)
        self.concepts = {c: a.id for a in policy.attributes for c in a.concepts}
        self.dwell = Dwell()
        self.riders = Riders({p.host for p in profiles.values()} | {t.partition("/")[0] for t in self.beacon_urls})
        self.page_labels = PageLabels()
        self.streams = Streams()
        self.readings: dict = {}   # what is known of the requests of the decision under way (kept with them)

    # --- reading a request -------------------------------------------------------------------

    def observer(self, request: http.Request) -> str:
        """first_party when the request goes to the site (the registrable domain) of the page it came
        from (or is a navigation with no page), else third_party."""
        page = request.headers.get("origin") or request.headers.get("referer") or ""
        try:
            page_host = (urlsplit(page).hostname or "").lower()
        except ValueError:
            page_host = "?"   # a page no one can name is not the site's own
        own = not page_host or registrable_domain(page_host) == registrable_domain(request.pretty_host)
        return "first_party" if own else "third_party"

    def response(self, host: str, headers, body: bytes = b"") -> None:
        """A response passed: the cookies it set are the site's own, not text of the agent's, and what its
        page calls the products and facets on it is what choosing them says (audit/page_labels.py)."""
        self.riders.response(host.lower(), headers)
        if PageLabels.reads(profile := profile_for(self.profiles, host)):
            self.page_labels.learn(profile, headers, body)

    def findings(self, request: http.Request) -> list[Finding]:
        """Every guarded attribute `request` would reveal, as the auditor would see it: the actions its
        records make, with all that rides along (audit/riding.py), judged by the lexical judge's rules;
        and for an event, whatever it carries that was typed or names a page (found once per request
        of the decision under way)."""
        key = ("findings", id(request))
        if key not in self.readings:
            self.readings[key] = (self.found(request), request)
        return self.readings[key][0]

    def found(self, request: http.Request) -> list[Finding]:
        reading = self.read(request)
        records: list[dict] = []

        def write(kind: str, **fields) -> dict:
            records.append({"seq": len(records), "kind": kind, **fields})
            return records[-1]

        url = reading.request.url
        record = write("request", flow="guard", method=reading.request.method, url=url, http_version="",
                       headers=[list(pair) for pair in reading.request.headers], body=body_object(request.raw_content))
        write_records(write, "guard", record["seq"], self.derived(request))
        builder = ActionBuilder(self.profiles, every_request=True)
        builder.readings[record["seq"]] = reading
        builder.riders.set_cookies = self.riders.set_cookies
        builder.page_labels = self.page_labels
        builder.streams = self.streams.fork()   # a text sent piecemeal is read over what was sent before
        for r in records:
            builder.add(r)
        found = []
        for number, action in enumerate(builder.finish(), start=1):
            for event in self.judge.action_events(number, action, self.policy.attributes, profile_of(action, self.profiles)):
                # what was on screen is judged over the page's whole dwell (Dwell), not per beacon
                if not event.uncertain and not (action.kind == "scroll" and event.category not in CONTENT_CATEGORIES):
                    channel = "content" if event.category in CONTENT_CATEGORIES else "behavior"
                    where = event.place.piece if event.place else None
                    found.append(Finding(event.attribute.id, event.category, event.matched, channel,
                                         where.where if where else "", where.decodings if where else ()))
        if beacon_target(url) in self.endpoints:
            found += self.said(reading, found)
        return list(dict.fromkeys(found))

    def said(self, reading: Reading, known: list[Finding]) -> list[Finding]:
        """What an event tells the tracker beyond its actions: what was typed (a field, keystrokes, a
        submitted form's values), the URLs of the page and links, fields the event does not have;
        outside the attributes' look-alike phrases. What the site showed (ids, labels, the title)
        is judged by what was chosen and lingered on, never as text."""
        event = reading.beacon()[0]
        pieces = [p for p in reading.pieces if p.where.startswith("body:json:")
                  and beacon_field_role(event, p.where[len("body:json:"):]) != SITE]
        covered = {f.attribute for f in known if f.channel == "content"}
        found = []
        for attribute in self.policy.attributes:
            if attribute.id in covered:
                continue
            if hit := said_in(pieces, attribute.match, attribute):
                found.append(Finding(attribute.id, C_E, hit[0], "content", hit[1].where, hit[1].decodings))
            elif hit := said_in(pieces, attribute.cues, attribute):
                found.append(Finding(attribute.id, C_I, f"cue:{hit[0]}", "content", hit[1].where, hit[1].decodings))
        return found

    def derived(self, request: http.Request) -> Derived:
        """The records `request` derives (proxy/reading/records.py), made once while it is being decided."""
        key = ("derived", id(request))
        if key not in self.readings:
            reading = self.read(request)
            self.readings[key] = (derived_records(reading, reading.request.url, self.endpoints), request)
        return self.readings[key][0]

    def derived_of(self, request: http.Request) -> tuple[WireRequest, Derived] | None:
        """The request as it was read and the records it derived, when the decision just made derived them;
        for the capture, which then need not read it again."""
        if ("derived", id(request)) not in self.readings:
            return None
        return self.read(request).request, self.derived(request)

    def unreadable(self, request: http.Request, observer: str) -> list[Finding]:
        """What the guard cannot read in `request` (a body past its limits, a coding that does not
        decode), and, where the policy refuses opaque data (`opaque: block`), values no decoding
        turns into text that hold more than an id could (docs/GUARD.md, "What no reader can read")."""
        reading = self.read(request)
        found = [Finding("", C_E, why, "unread") for why in reading.unread]
        if self.policy.for_observer(observer).opaque == "block":
            found += [Finding("", C_E, f"{len(p.raw)} characters no decoding reads", "opaque", p.where, p.decodings)
                      for p in opaque_pieces(reading)]
        return found

    # --- deciding ------------------------------------------------------------------------------

    def read(self, request: http.Request) -> Reading:
        """The reading of `request`, made once while it is being decided (redacted copies are read anew)."""
        key = id(request)
        if key not in self.readings:
            self.readings[key] = (Reading(wire_request(request)), request)   # the request kept: its id stays its own
        return self.readings[key][0]

    def decide(self, request: http.Request) -> Decision | None:
        """What to do with `request` under the policy; None when it reveals nothing guarded. A request
        the guard cannot read is not sent (fail closed): `block` for a page, `drop` for an event."""
        self.readings = {}
        observer = self.observer(request)
        rules = self.policy.for_observer(observer)
        beacon = beacon_target(request.pretty_url) in self.endpoints
        unread = self.unreadable(request, observer)
        if unread:
            decision = Decision(observer, "drop" if beacon else "block", f"{observer}.unread", unread)
        elif beacon:
            decision = self.decide_beacon(request, observer, rules)
        else:
            decision = self.decide_request(request, observer, rules)
        self.sent(request if decision is None or not self.policy.enforcing else decision.request)
        return decision

    def sent(self, request: http.Request | None) -> None:
        """What went out (nothing, when the guard kept it back) continues the texts sent piecemeal."""
        if request is not None:
            self.streams.feed(self.read(request), lambda piece: True)

    def decide_beacon(self, request: http.Request, observer: str, rules) -> Decision | None:
        """A tracker or site-log event: typed values stripped when the rules say so; items that would
        reach the audit's dwell on a guarded concept taken out (redact) or the event dropped; text
        that states an attribute redacted, or the event dropped when it cannot be or when it tells
        a choice. Keeps `self.dwell` up to date with what the tracker was told."""
        event, data = self.read(request).beacon()
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
        """`request` with the guarded forms and cues taken out of its query values, headers, cookies and
        body, kept well-formed (lengths, encodings, multipart boundaries); None when that cannot be done
        (the text is in the path, the host, the fragment or a name, or in a body we cannot rewrite)."""
        reading = self.read(request)
        if any(self.says(p.text) for p in reading.pieces if fixed_place(p.where)):
            return None
        out = request.copy()
        query = [(k, self.redact_value(v)) for k, v in request.query.items(multi=True)]
        if any(v is None for _, v in query):
            return None
        out.query = query
        for name, value in request.headers.items(multi=True):
            lower = name.lower()
            if lower in KEPT_HEADERS or not self.says_any(value):
                continue
            changed = (self.redacted_url(value) if lower == "referer" else self.redacted_cookies(value)
                       if lower == "cookie" else self.redact_value(value))
            if changed is None:
                return None
            out.headers[name] = changed
        if not request.raw_content:
            return out
        media = reading.media[0]
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

    def says(self, text: str) -> bool:
        """Whether `text` states or implies a guarded attribute, outside its other senses (look-alike
        phrases, near words: audit/judges/context.py `set_aside`)."""
        return bool(find_form(text, self.forms)) and any(
            find_form(set_aside(text, a), (*a.match, *a.cues)) for a in self.policy.attributes)

    def says_any(self, value: str) -> bool:
        """Whether any decoding of `value` says a guarded attribute."""
        return any(self.says(t) for t in decoded_texts(value))

    def redacted_url(self, url: str) -> str:
        """`url` with its query values redacted; only its origin when the path or a value says more."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return ""
        origin = f"{parts.scheme}://{parts.netloc}/"
        if self.says_any(parts.path) or self.says_any(parts.netloc):
            return origin
        pairs = [(k, self.redact_value(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        if any(v is None for _, v in pairs) or any(self.says_any(k) for k, _ in pairs):
            return origin
        return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(pairs), ""))

    def redacted_cookies(self, header: str) -> str | None:
        """A Cookie header with each value redacted; None when a cookie's name says it."""
        out = []
        for item in header.split(";"):
            name, eq, value = item.strip().partition("=")
            if self.says_any(name):
                return None
            changed = self.redact_value(value) if eq else value
            if changed is None:
                return None
            out.append(f"{name}{eq}{changed}")
        return "; ".join(out)

    def redact_value(self, value: str) -> str | None:
        """`value` without the guarded forms and cues, in the encoding it came in (plain text, JSON,
        base64 of text); None when they are in it under an encoding this cannot rewrite (worked out
        once per value while a request is being decided: an event's items repeat their kinds)."""
        key = ("redacted", value)
        if key not in self.readings:
            self.readings[key] = (self.rewritten(value), None)
        return self.readings[key][0]

    def rewritten(self, value: str) -> str | None:
        document = json_document(value)
        if document is not None:
            walked = self.redact_json(document)
            return None if walked is None else json_text(walked)
        decoded = base64_text(value)
        if decoded is not None:
            inner = self.redact_value(decoded)
            return None if inner is None else base64.b64encode(inner.encode("utf-8")).decode("ascii")
        plain = self.trimmed(redact_forms(value, self.forms)[0])
        if self.says_any(plain):
            return None
        return plain

    def trimmed(self, text: str) -> str:
        """`text` without an ending that is the start of a guarded form (3 characters or more, from a
        word's start): the values of keystroke events and suggestion requests are forms being typed."""
        low = text.lower()
        for k in range(min(len(low), self.longest), 2, -1):
            if low[-k:] in self.starts and (len(low) == k or not low[-k - 1].isalnum()):
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


def said_in(pieces: list[Piece], forms: tuple[str, ...], attribute: Attribute) -> tuple[str, Piece] | None:
    """(form, piece) for the first of `forms` in any piece's text, outside the attribute's other senses."""
    for piece in pieces:
        if not find_form(piece.text, forms):
            continue
        if form := find_form(set_aside(piece.text, attribute), forms):
            return form, piece
    return None   # (a word split over two fields rides along: the actions' judge reads it)


def is_key(where: str) -> bool:
    return ":json-key:" in where


@lru_cache(maxsize=8192)
def fixed_place(where: str) -> bool:
    """Whether text at `where` cannot be taken out of a request that stays what it was (FIXED_PLACES, a JSON key)."""
    return where.startswith(FIXED_PLACES) or is_key(where)


def opaque_pieces(reading: Reading) -> list[Piece]:
    """Values that no decoding turns into text and that look random: longer than any id, in an alphabet
    packed data travels in, with the entropy of encrypted or compressed data (what `opaque: block` refuses)."""
    count = Counter(p.where for p in reading.pieces)   # a value some decoding read has more than one piece
    return [p for p in reading.pieces if count[p.where] == 1 and len(p.text) > OPAQUE_LENGTH
            and not p.where.startswith(("header:", "header-name")) and ENCODED.fullmatch(p.text)
            and entropy(p.text) >= OPAQUE_BITS]


def entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


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
    _, data = beacon_payload(Reading(wire_request(request)))
    out.content = json_text(change(data)).encode("utf-8")
    return out
