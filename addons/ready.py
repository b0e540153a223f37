"""Tell the process that started the proxy where it listens, once it does."""

from mitmproxy import ctx

READY_PREFIX = "spillage proxy listening on "


class Ready:
    """Print one line, `spillage proxy listening on http://HOST:PORT`, once the proxy listens.

    A parent process started the proxy on port 0 learns the real port from this line.
    """

    def running(self):
        proxyserver = ctx.master.addons.get("proxyserver")
        host, port, *_ = proxyserver.listen_addrs()[0]
        print(f"{READY_PREFIX}http://{host}:{port}", flush=True)
