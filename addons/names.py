"""Only allowed names are ever resolved: the proxy's event loop looks every name up through this guard.

mitmproxy resolves a server's name as it connects (asyncio's `getaddrinfo`). The connection guard
(guard.py) lets a connection to a name be made only to a model endpoint or, for a request let through,
to a live host (`--live`, proxy/live.py); this guard is the same rule where names become addresses, so
that no other name reaches a resolver, whoever asks. A live host's name must resolve to public addresses
only: one that leads to loopback, a private network or any other special range (DNS rebinding) is
refused. A refusal is an OSError whose message starts `spillage name guard: `, which mitmproxy makes
the connection's error, and the connection guard records it.

In the tests the names of the fake internet resolve by its map instead of DNS (FakeInternet: loopback
addresses only, accepted under pytest only), and the proxy trusts its CA for upstream TLS.
"""

import asyncio
import functools
import socket

from mitmproxy import ctx
from mitmproxy import exceptions

from spillage.addons.egress import live_patterns
from spillage.addons.options import LIVE
from spillage.addons.options import LIVE_MAP
from spillage.addons.options import MODEL_HOSTS
from spillage.addons.options import ORIGIN
from spillage.addons.options import declare
from spillage.addons.resolver import parse_origin
from spillage.proxy.hosts import normalise_host
from spillage.proxy.live import FakeInternet
from spillage.proxy.live import LiveError
from spillage.proxy.live import is_live
from spillage.proxy.live import is_public

REFUSED = "spillage name guard: "   # how a refusal's message starts (guard.py records those)


class NameGuard:
    """Resolve a live host's name (to public addresses), a model endpoint's or the origin's; refuse any other."""

    def __init__(self) -> None:
        self.live: tuple = ()
        self.names: frozenset[str] = frozenset()   # HOST:PORT resolved as they are (model endpoints, the origin)
        self.fake: FakeInternet | None = None

    def load(self, loader):
        declare(loader, LIVE_MAP)

    def configure(self, updated):
        if updated & {ORIGIN.name, MODEL_HOSTS.name, LIVE.name}:  # a list option is copied per read
            self.live = live_patterns(ctx.options.spillage_live)
            try:
                origin = [parse_origin(ctx.options.spillage_origin)] if ctx.options.spillage_origin else []
            except ValueError:  # the resolver refuses the option
                origin = []
            self.names = frozenset([*ctx.options.spillage_model_hosts, *(f"{h}:{p}" for h, p in origin)])
        if LIVE_MAP.name in updated:
            try:
                self.fake = FakeInternet.load(ctx.options.spillage_live_map) if ctx.options.spillage_live_map else None
            except (LiveError, OSError, ValueError, KeyError) as e:
                raise exceptions.OptionsError(f"spillage_live_map: {e}") from None
            if self.fake is not None:
                ctx.options.ssl_verify_upstream_trusted_ca = self.fake.ca
        if ctx.options.ssl_insecure:
            raise exceptions.OptionsError("ssl_insecure: the proxy verifies every upstream certificate")

    def running(self):
        loop = asyncio.get_running_loop()
        loop.getaddrinfo = functools.partial(self.getaddrinfo, loop.getaddrinfo)

    async def getaddrinfo(self, resolve, host, port, *args, **kwargs):
        name = normalise_host(host.decode("idna") if isinstance(host, bytes) else str(host or ""))
        number = int(port or 0)
        if f"{name}:{number}" in self.names:
            return await resolve(name, port, *args, **kwargs)
        if not is_live(self.live, name, number):
            raise OSError(f"{REFUSED}connect refused: {name} is not a live host; it is not looked up")
        try:
            if self.fake is not None:
                infos = [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, number))
                         for a in self.fake.resolve(name)]
            else:
                infos = await resolve(name, port, *args, **kwargs)   # the name as it was checked
        except OSError as e:
            raise OSError(f"{REFUSED}connect refused: the live host {name} does not resolve ({e})") from None
        found = list(dict.fromkeys(info[4][0] for info in infos))
        reachable = self.fake.reachable if self.fake is not None else is_public
        if not found or not all(reachable(a) for a in found):
            raise OSError(f"{REFUSED}connect refused: the live host {name} resolves to {', '.join(found)}, "
                          "not only to public addresses (DNS rebinding)")
        return infos
