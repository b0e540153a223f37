"""Live sites: which real hosts a session may reach (`--live`), and where their names may lead.

A pattern is a host name (`www.amazon.com`), a name with its subdomains (`*.amazon.com`: any name
under amazon.com, not amazon.com itself), either with `:PORT` (ports 443 and 80 otherwise); `@FILE`
reads patterns from a file, one a line (`#` starts a comment). Addresses are no pattern: a live host
is named, and its name is resolved by the proxy only once a request to it was let through.

An allowed name leads only to a public address (a global unicast one): a name that resolves to
loopback, a private network or any other special range (DNS rebinding) is refused. The fake internet
of the tests (`FakeInternet`) maps names to loopback addresses of their own instead of DNS, with the
test CA its servers' certificates come from; it is accepted only under pytest.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from spillage.proxy.hosts import normalise_host

DEFAULT_PORTS = (443, 80)
FAKE_INTERNET_ENV = "SPILLAGE_FAKE_INTERNET"   # tests only: a JSON file, see FakeInternet
LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


class LiveError(ValueError):
    """A pattern or pattern file that cannot be read; the message names the place."""


@dataclass(frozen=True)
class LivePattern:
    """One allowed host (or, with `subdomains`, every name under it) on its ports."""

    name: str
    subdomains: bool
    ports: tuple[int, ...]

    def matches(self, host: str, port: int) -> bool:
        host = normalise_host(host)
        named = host.endswith("." + self.name) if self.subdomains else host == self.name
        return named and port in self.ports

    def __str__(self) -> str:
        port = "" if self.ports == DEFAULT_PORTS else f":{self.ports[0]}"
        return ("*." if self.subdomains else "") + self.name + port


def parse_pattern(text: str, where: str) -> LivePattern:
    """One pattern; `where` names its place in the error (`--live`, `hosts.txt:3`)."""
    value = text.strip().lower()
    host, sep, port = value.rpartition(":") if ":" in value else (value, "", "")
    if sep and not (port.isdigit() and 0 < int(port) < 65536):
        raise LiveError(f"{where}: {text!r}: the port must be a number from 1 to 65535")
    subdomains = host.startswith("*.")
    name = normalise_host(host[2:] if subdomains else host)
    labels = name.split(".")
    if "*" in name or not all(LABEL.fullmatch(label) for label in labels):
        raise LiveError(f"{where}: {text!r} is no host name nor *.NAME pattern")
    if len(labels) < 2 or labels[-1].isdigit() or name.endswith(".test"):
        raise LiveError(f"{where}: {text!r}: name a real host (an address, a bare name or a .test host is none)")
    return LivePattern(name, subdomains, (int(port),) if sep else DEFAULT_PORTS)


def parse_live(values: list[str] | tuple[str, ...], where: str = "--live") -> tuple[LivePattern, ...]:
    """Patterns from `--live` values (each comma-separated; `@FILE` items read a file)."""
    patterns: list[LivePattern] = []
    for value in values:
        for item in (i.strip() for i in value.split(",")):
            if item.startswith("@"):
                patterns += read_pattern_file(Path(item[1:]))
            elif item:
                patterns.append(parse_pattern(item, where))
            else:
                raise LiveError(f"{where}: {value!r} has an empty host")
    return tuple(dict.fromkeys(patterns))


def read_pattern_file(path: Path) -> list[LivePattern]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise LiveError(f"{path}: cannot read the live hosts file: {e}") from e
    patterns = [parse_pattern(line.split("#", 1)[0], f"{path}:{number}")
                for number, line in enumerate(lines, 1) if line.split("#", 1)[0].strip()]
    if not patterns:
        raise LiveError(f"{path}: names no live host")
    return patterns


def live_hosts(values: list[str] | tuple[str, ...] | None, where: str = "--live") -> tuple[str, ...]:
    """`--live` values as the proxy's `spillage_live` option takes them (and meta.json records them)."""
    return tuple(str(p) for p in parse_live(values or (), where))


def live_meta(live: tuple[str, ...]) -> dict:
    """What meta.json says of a session's live hosts: {"live": {...}} when it had any, else nothing."""
    if not live:
        return {}
    return {"live": {"hosts": list(live), "real_web": not os.environ.get(FAKE_INTERNET_ENV),
                     **({"resolver_map": os.environ[FAKE_INTERNET_ENV]} if os.environ.get(FAKE_INTERNET_ENV) else {})}}


def session_live(session_dir: Path) -> list[str]:
    """The live hosts a session allowed, as its signed `session_start` record names them (none for a
    session without, or one imported or recorded before --live)."""
    from spillage.proxy.capturelog import iter_records

    for line in iter_records(Path(session_dir)):
        if line.record.get("kind") == "session_start":
            return list((line.record.get("options") or {}).get("live") or ())
        if line.record.get("kind") not in ("signer", "import"):
            break
    return []


def live_notice(session_dir: Path, what: str) -> str | None:
    """The line that says `what` (an export, a proof) comes from a session on the real web, or None."""
    live = session_live(session_dir)
    if not live:
        return None
    return (f"{Path(session_dir).name} touched the real web (live hosts {', '.join(live)}): {what} holds real "
            "sites' and third parties' traffic, and may hold the user's own cookies and credentials")


def is_live(patterns: tuple[LivePattern, ...], host: str, port: int) -> bool:
    return any(p.matches(host, port) for p in patterns)


def is_public(address: str) -> bool:
    """A global unicast address: where a real site can be (not loopback, private, link-local, ...)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class FakeInternet:
    """The tests' internet: `hosts` maps names to loopback addresses (no DNS), `public` are the addresses
    that count as the internet's (any other is refused as a rebinding would be), `ca` the PEM file the
    servers' certificates chain to (mitmproxy's ssl_verify_upstream_trusted_ca)."""

    hosts: dict[str, str]
    public: frozenset[str]
    ca: str

    @classmethod
    def load(cls, path: str) -> "FakeInternet":
        if "PYTEST_CURRENT_TEST" not in os.environ:
            raise LiveError(f"{path}: a resolver map is for tests only (it runs under pytest)")
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        hosts = {normalise_host(k): v for k, v in data["hosts"].items()}
        if not all(ipaddress.ip_address(a).is_loopback for a in [*hosts.values(), *data["public"]]):
            raise LiveError(f"{path}: a resolver map leads to loopback addresses only")
        return cls(hosts, frozenset(data["public"]), data["ca"])

    def resolve(self, host: str) -> list[str]:
        address = self.hosts.get(normalise_host(host))
        if address is None:
            raise OSError(f"{host}: not in the tests' resolver map")
        return [address]

    def reachable(self, address: str) -> bool:
        return address in self.public
