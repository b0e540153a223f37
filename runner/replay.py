"""Replay a session: re-send the agent's recorded requests, in order, through a freshly started
stack (origins serving the session's own catalog, and the capturing proxy) into a new session.

What is sent and why (cookies, headers, refused requests) is in docs/REPLAY.md.
"""

import http.client
import ssl
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

from spillage.audit.progress import ProgressBar
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import read_body
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import create_session
from spillage.proxy.layout import read_meta
from spillage.proxy.layout import seal_permissions
from spillage.proxy.layout import write_meta
from spillage.proxy.refusal import UNWHOLE
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.verify import verify
from spillage.proxy.version import SPILLAGE_VERSION
from spillage.runner.heads import describe_evidence
from spillage.runner.stack import Stack

# Headers that belong to one connection, not to the request; Content-Length is recomputed.
NOT_RESENT = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
              "trailer", "transfer-encoding", "upgrade", "content-length", "cookie"}
TIMEOUT = 30.0


class ReplayError(RuntimeError):
    """The session cannot be replayed (no log, a log that fails verification, a malformed record)."""


def replayable(record: dict) -> bool:
    """The agent's own requests: every `request`, and refused requests that are not browser background.
    `beacon` and `form` records are derived from a request and are not sent again."""
    return record["kind"] == "request" or (record["kind"] == "egress_blocked" and not record.get("background"))


class CookieJar:
    """Cookies the replayed responses set, by host (host-only, no paths or expiry beyond deletion)."""

    def __init__(self):
        self.by_host: dict[str, dict[str, str]] = {}

    def take(self, host: str, set_cookies: list[str]) -> None:
        for header in set_cookies:
            pair, _, attributes = header.partition(";")
            name, _, value = pair.strip().partition("=")
            jar = self.by_host.setdefault(host, {})
            if "max-age=0" in attributes.replace(" ", "").lower():
                jar.pop(name, None)
            else:
                jar[name] = value

    def cookie_header(self, host: str, recorded: list[str]) -> str:
        """The recorded Cookie header, each cookie a replayed response has set carrying the replay's
        value; cookies no response set (a page script's) keep their recorded value."""
        jar = self.by_host.get(host, {})
        pairs = [p.strip() for value in recorded for p in value.split(";") if p.strip()]
        return "; ".join(f"{name}={jar[name]}" if name in jar else p
                         for p in pairs for name in [p.partition("=")[0]])


@dataclass
class Sent:
    """What became of one replayed request: its status, or why it got none."""

    seq: int
    method: str
    url: str
    status: int | None = None
    error: str = ""


class Client:
    """HTTP/1.1 through the capturing proxy, trusting our CA; one kept-alive connection per origin."""

    def __init__(self, proxy_url: str, ca_cert: Path):
        proxy = urlsplit(proxy_url)
        self.proxy = (proxy.hostname, proxy.port)
        self.tls = ssl.create_default_context(cafile=str(ca_cert))
        self.connections: dict[tuple, http.client.HTTPConnection] = {}
        self.cookies = CookieJar()

    def send(self, record: dict, session_dir: Path) -> Sent:
        """Send one recorded request (a refused tunnel is a CONNECT again) and read its response."""
        sent = Sent(record["seq"], record["method"], record["url"])
        if record["method"] == "CONNECT":
            host, _, port = record["url"].rpartition(":")
            connection = http.client.HTTPSConnection(*self.proxy, context=self.tls, timeout=TIMEOUT)
            connection.set_tunnel(host, int(port))
            try:
                connection.connect()
                sent.error = "tunnel opened"
            except OSError as e:
                sent.error = str(e)
            finally:
                connection.close()
            return sent
        if record["kind"] == "egress_blocked" and UNWHOLE in (record.get("reason") or ""):
            return self.send_as_written(record, session_dir, sent)
        parts = urlsplit(record["url"])
        headers = [(k, v) for k, v in record.get("headers") or () if k.lower() not in NOT_RESENT]
        if not any(k.lower() == "host" for k, _ in headers):
            headers.insert(0, ("Host", parts.netloc))
        recorded_cookies = [v for k, v in record.get("headers") or () if k.lower() == "cookie"]
        if recorded_cookies:
            headers.append(("Cookie", self.cookies.cookie_header(parts.hostname or "", recorded_cookies)))
        body = read_body(session_dir, record.get("body"))
        if body or record["method"] in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        key = (parts.scheme, parts.hostname, parts.port)
        target = record["url"] if parts.scheme == "http" else urlunsplit(("", "", parts.path or "/", parts.query, ""))
        reused = key in self.connections
        try:
            try:
                response = self.exchange(key, parts, record["method"], target, headers, body)
            except (http.client.RemoteDisconnected, ConnectionError):
                if not reused:
                    raise
                response = self.exchange(key, parts, record["method"], target, headers, body)  # closed meanwhile
        except (OSError, http.client.HTTPException) as e:
            sent.error = str(e) or type(e).__name__
            return sent
        sent.status = response.status
        self.cookies.take(parts.hostname or "", response.headers.get_all("Set-Cookie") or [])
        return sent

    def send_as_written(self, record: dict, session_dir: Path, sent: Sent) -> Sent:
        """A request the proxy refused because mitmproxy could not read it whole (both Transfer-Encoding
        and Content-Length, a bad chunk, a scheme it does not speak): its head and body sent again byte
        for byte as recorded, on a connection of its own, so that the proxy refuses it again."""
        parts = urlsplit(record["url"])
        target = record["url"] if parts.scheme != "https" else urlunsplit(("", "", parts.path or "/", parts.query, ""))
        head = f"{record['method']} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in record.get("headers") or ())
        connection = self.connection(("as written", parts.hostname, parts.port), parts)
        try:
            connection.connect()
            connection.sock.sendall(head.encode("latin-1") + b"\r\n" + read_body(session_dir, record.get("body")))
            response = http.client.HTTPResponse(connection.sock, method=record["method"])
            response.begin()
            response.read()
            sent.status = response.status
        except (OSError, UnicodeEncodeError, http.client.HTTPException) as e:
            sent.error = str(e) or type(e).__name__
        finally:
            self.drop(("as written", parts.hostname, parts.port))
        return sent

    def exchange(self, key: tuple, parts, method: str, target: str, headers: list, body: bytes):
        """One request and its whole response on the origin's connection; the connection is
        dropped when anything fails or the response closes it."""
        connection = self.connection(key, parts)
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders(body or None)
            response = connection.getresponse()
            response.read()
        except BaseException:
            self.drop(key)
            raise
        if response.will_close:
            self.drop(key)
        return response

    def connection(self, key: tuple, parts) -> http.client.HTTPConnection:
        if key not in self.connections:
            if parts.scheme == "https":
                connection = http.client.HTTPSConnection(*self.proxy, context=self.tls, timeout=TIMEOUT)
                connection.set_tunnel(parts.hostname, parts.port or 443)
            else:
                connection = http.client.HTTPConnection(*self.proxy, timeout=TIMEOUT)
            self.connections[key] = connection
        return self.connections[key]

    def drop(self, key: tuple) -> None:
        connection = self.connections.pop(key, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for key in list(self.connections):
            self.drop(key)


@dataclass
class ReplayResult:
    """The new session and what became of each request sent."""

    session_dir: Path
    sent: list[Sent] = field(default_factory=list)
    capture_ok: bool = False
    seconds: float = 0.0

    def summary(self) -> str:
        answered = sum(s.status is not None for s in self.sent)
        return (f"replayed {len(self.sent)} requests in {self.seconds:.1f} s: {answered} answered, "
                f"{len(self.sent) - answered} without a response (refused or failed)")


def original_meta(session_dir: Path) -> dict:
    try:
        return read_meta(session_dir) or {}
    except ValueError as e:
        raise ReplayError(str(e)) from None


def original_catalog(session_dir: Path, home: Path):
    """The catalog the original session's sites served (audit/session_catalog.py), to serve again;
    ReplayError when it cannot be known or the session had none (traffic of other sites)."""
    from spillage.audit.session_audit import AuditError
    from spillage.audit.open_session import session_scenario
    from spillage.audit.session_catalog import CatalogError
    from spillage.audit.session_catalog import session_catalog
    from spillage.origins.catalog_store import store_catalog

    try:
        scenario = session_scenario(session_dir) if (session_dir / SCENARIO_COPY).is_file() else None
        served = session_catalog(session_dir, scenario, None, home)
    except (CatalogError, AuditError) as e:
        raise ReplayError(str(e)) from None
    if served.path is None:
        raise ReplayError(f"{session_dir}: its sites are not ours (imported with --no-catalog): nothing to replay on")
    if served.source == "session":  # an older session's own copy: stored, so the replay names it by hash
        store_catalog(home, served.path)
    return served


def replay_session(session_dir: Path, runs_dir: Path, home: Path, log=print, bar: bool = False) -> ReplayResult:
    """Re-send `session_dir`'s agent requests through a fresh stack into a new session under `runs_dir`
    (the CA and signing key are those of the spillage `home`); with `bar`, progress per request (a bar
    on a terminal, else a line each)."""
    session_dir = Path(session_dir).resolve()
    check = verify(session_dir)
    if not check.ok:
        raise ReplayError(f"{check.path}: capture log fails verification ({check.damage}: {check.message}); "
                          "nothing was replayed")
    meta = original_meta(session_dir)
    served = original_catalog(session_dir, home)
    scenario_id = (meta.get("scenario") or {}).get("id") or "session"
    signing_key = load_or_create_key(home)   # a broken home is said before a session folder exists
    ca = ensure_ca(home / "ca")
    total = sum(replayable(line.record) for line in iter_records(session_dir))
    new_dir = create_session(runs_dir, f"replay-{scenario_id}")
    log(f"session {new_dir} (replay of {session_dir.name})")
    if (session_dir / SCENARIO_COPY).is_file():
        (new_dir / SCENARIO_COPY).write_bytes((session_dir / SCENARIO_COPY).read_bytes())
    new_meta = {
        "session": new_dir.name, "spillage": SPILLAGE_VERSION,
        "replay_of": {"session": session_dir.name, "path": str(session_dir), "records": check.count,
                      "head": check.head},
        "scenario": meta.get("scenario"),
        "agent": {"label": f"replay of {session_dir.name}", "framework": "replay", "argv": [],
                  "model": (meta.get("agent") or {}).get("model")},
        "catalog": {**(meta.get("catalog") or {}), "sha256": served.sha256},
        "condition": meta.get("condition"),
        "ca": {"cert": str(ca.cert_file), "spki": ca.spki_pin},
        "started": utc_timestamp(), "status": "running",
    }
    write_meta(new_dir, new_meta)
    result, finished = ReplayResult(new_dir), False
    began = time.monotonic()  # set again once the stack is up: `seconds` is the sending alone
    stack = Stack(new_dir, ca, signing_key, served.path, tool="spillage replay", log=log)
    new_meta["signing"] = {"key": stack.key_fingerprint}
    try:
        with stack:
            client, line = Client(stack.proxy_url, ca.cert_file), None
            began = time.monotonic()
            try:
                with ProgressBar(total, what="replay", unit="requests", terminal=bar, lines=bar) as progress:
                    for line in iter_records(session_dir):
                        if replayable(line.record):
                            sent = client.send(line.record, session_dir)
                            result.sent.append(sent)
                            progress.step(f"{sent.method} {sent.url[:80]} → {sent.status or sent.error[:60]}")
                finished = True
            except (KeyError, TypeError, ValueError) as e:
                raise ReplayError(f"{session_dir / LOG_NAME}:{line.lineno if line else 1}: record is malformed "
                                  f"({type(e).__name__}: {e})") from e
            except CaptureError as e:
                raise ReplayError(str(e)) from e
            finally:
                client.close()
    finally:
        result.seconds = time.monotonic() - began
        settlement = stack.settlement
        result.capture_ok = settlement is not None and settlement.ok
        new_meta.update({"ended": utc_timestamp(), "status": "completed" if finished and result.capture_ok else "failed",
                         "replay": {"requests": len(result.sent),
                                    "answered": sum(s.status is not None for s in result.sent),
                                    "unanswered": [{"seq": s.seq, "url": s.url, "error": s.error}
                                                   for s in result.sent if s.status is None],
                                    "seconds": round(result.seconds, 3)},
                         "proxy": {"url": stack.proxy_url, "exit": stack.exits.get("proxy")},
                         "origins": {"url": stack.origin_url, "exit": stack.exits.get("origins")}})
        if settlement is not None:
            new_meta["signing"]["session_key"] = stack.session_key.key
            describe_evidence(new_meta, settlement)
        write_meta(new_dir, new_meta)
        seal_permissions(new_dir)
    log(result.summary())
    return result
