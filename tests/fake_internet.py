"""A fake internet on loopback for the live-site tests: HTTPS servers of our own on 127.0.0.x answering
as www.amazon.com, www.ebay.com and a tracker, with certificates from a test CA, pages shaped like the
real sites' markup (written here, not copied), and the resolver map the proxy reads in place of DNS
(proxy/live.py: FakeInternet; $SPILLAGE_FAKE_INTERNET, accepted under pytest only).

Nothing here needs a network: names never reach a resolver, and every address is a loopback one."""

from __future__ import annotations

import datetime
import http.server
import json
import socketserver
import ssl
import threading
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

AMAZON_SEARCH = """<!doctype html><html><head><title>Amazon.com : {query}</title></head><body>
<div id="search"><span class="a-color-state a-text-bold">"{query}"</span>
<div data-component-type="s-search-result" data-asin="B0TESTKTL1" class="s-result-item">
  <h2 class="a-size-mini"><a class="a-link-normal s-link-style" href="/Gooseneck-Electric-Kettle-Variable/dp/B0TESTKTL1">
  <span class="a-size-medium a-text-normal">Gooseneck Electric Kettle, Variable Temperature, Cordless</span></a></h2>
  <span class="a-price"><span class="a-offscreen">$59.99</span></span></div>
<div role="listitem" data-asin="B0TESTKTL2" data-index="2" data-component-type="s-search-result" class="s-result-item">
  <h2 aria-label="Kosher Kitchen Electric Kettle" class="a-size-medium a-spacing-none a-color-base a-text-normal">
  <span>Kosher Kitchen Electric Kettle, Keep Warm</span></h2>
  <a class="a-link-normal s-no-outline" href="/dp/B0TESTKTL2"><img class="s-image" alt=""></a>
  <span class="a-price"><span class="a-offscreen">$89.00</span></span></div>
</div>
<div id="s-refinements"><ul><li id="p_n_feature_browse-bin/2229001" aria-label="Shabbat Mode" class="a-spacing-micro">
  <span class="a-list-item"><a data-routing="" class="a-link-normal s-navigation-item" tabindex="-1"
  href="/s?k={query_plus}&amp;rh=n%3A284507%2Cp_n_feature_browse-bin%3A2229001&amp;dc&amp;qid=1764660000">
  <div class="a-checkbox"><label><input type="checkbox"><i class="a-icon a-icon-checkbox"></i></label></div>
  <span class="a-size-base a-color-base">Shabbat Mode</span></a></span></li></ul></div>
<script src="https://www.google-analytics.com:{tracker_port}/analytics.js"></script></body></html>"""

EBAY_SEARCH = """<!doctype html><html><head><title>{query} | eBay</title></head><body>
<ul class="srp-results srp-list clearfix">
  <li class="s-item s-item__pl-on-bottom" data-viewport=""><div class="s-item__info clearfix">
  <a class="s-item__link" href="https://www.ebay.com/itm/1234567890"><div class="s-item__title">
  <span role="heading" aria-level="3">Gooseneck Kettle 1.0L Stainless</span></div></a>
  <span class="s-item__price">$45.00</span></div></li>
</ul></body></html>"""


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@dataclass
class TestCA:
    """A certificate authority for the fake internet's servers, kept in `folder`."""

    folder: Path
    label: str = "Spillage fake internet test CA"

    def __post_init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(_name(self.label)).issuer_name(_name(self.label))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = self.folder / f"{self.label.replace(' ', '-')}.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str) -> tuple[Path, Path]:
        """(certificate chain, key) PEM files for a server named `name`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_file, key_file = self.folder / f"{name}.{id(self)}.crt", self.folder / f"{name}.{id(self)}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_file, key_file


class Site(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """One HTTPS host of the fake internet: every request it gets is kept in `requests`."""

    daemon_threads = True

    def __init__(self, name: str, address: str, ca: TestCA, page) -> None:
        self.name, self.page, self.requests, self.connections = name, page, [], 0
        self.lock = threading.Lock()
        super().__init__((address, 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*ca.issue(name))
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def process_request(self, request, client_address):
        with self.lock:
            self.connections += 1
        super().process_request(request, client_address)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ssl.SSLError, ConnectionError):
            self.close_connection = True

    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.answer()

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path, "body": body,
                                         "headers": dict(self.headers.items())})
        status, kind, content = self.server.page(self.path)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(content)))
        if self.server.name == "www.amazon.com":
            self.send_header("Set-Cookie", "session-id=131-0000000-0000000; Domain=.amazon.com; Path=/; Secure")
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args) -> None:
        pass


@dataclass
class FakeInternet:
    """The sites, running; `map_file` is what $SPILLAGE_FAKE_INTERNET names."""

    folder: Path
    sites: dict[str, Site] = field(default_factory=dict)

    def start(self, outside_port: int) -> "FakeInternet":
        from urllib.parse import parse_qs
        from urllib.parse import urlsplit

        ca, stranger = TestCA(self.folder), TestCA(self.folder, "Some other CA")

        def query(path: str, key: str) -> str:
            return (parse_qs(urlsplit(path).query).get(key) or [""])[0]

        tracker = Site("www.google-analytics.com", "127.0.0.5", ca, lambda path: (204, "text/plain", b""))
        self.sites = {
            "www.amazon.com": Site("www.amazon.com", "127.0.0.3", ca, lambda path: (200, "text/html; charset=utf-8",
                                   AMAZON_SEARCH.format(query=query(path, "k"), query_plus=query(path, "k").replace(" ", "+"),
                                                        tracker_port=tracker.port).encode())),
            "www.ebay.com": Site("www.ebay.com", "127.0.0.4", ca, lambda path: (
                200, "text/html; charset=utf-8", EBAY_SEARCH.format(query=query(path, "_nkw")).encode())),
            "www.google-analytics.com": tracker,
            # a certificate no one trusts, for a name that is allowed
            "images.amazon.com": Site("images.amazon.com", "127.0.0.6", stranger, lambda path: (200, "text/plain", b"x")),
        }
        for site in self.sites.values():
            threading.Thread(target=site.serve_forever, daemon=True).start()
        hosts = {name: site.server_address[0] for name, site in self.sites.items()}
        hosts["rebind.amazon.com"] = "127.0.0.2"   # an allowed name that leads to a non-allowed address
        self.map_file = self.folder / "fake-internet.json"
        self.map_file.write_text(json.dumps({"hosts": hosts, "ca": str(ca.pem),
                                             "public": [s.server_address[0] for s in self.sites.values()]}))
        self.outside_port = outside_port
        return self

    def stop(self) -> None:
        for site in self.sites.values():
            site.shutdown()
            site.server_close()

    def url(self, name: str) -> str:
        return f"https://{name}:{self.sites[name].port}"

    def live(self) -> list[str]:
        """--live patterns for every site (their ports are the servers'), and the rebinding name."""
        return [f"{name}:{site.port}" for name, site in self.sites.items()] + [
            f"rebind.amazon.com:{self.outside_port}"]
