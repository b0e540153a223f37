"""Serve every origin on one loopback port with waitress."""

import argparse
import ipaddress
import logging
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

import waitress

from spillage.scenarios.loader import ScenarioError
from spillage.scenarios.loader import load_file
from spillage.scenarios.files import scenario_files

from .app import make_app
from .catalog import build_catalog
from .catalog import with_benchmark


def _stop(signum, frame):
    raise SystemExit(0)


def serve(host="127.0.0.1", port=0, catalog_path=None, ready=None, seed=0, scenarios=None,
          existing=False, listener: socket.socket | None = None, access_log: Path | None = None) -> None:
    """Build the catalog (or serve an `existing` one), bind (or serve on `listener`, a socket already
    bound and listening), print the ready line, then serve until SIGTERM/SIGINT.

    `scenarios` join the benchmark's, replacing those of their personas; `ready`, if given, is called with the
    bound port just before serving starts."""
    with tempfile.TemporaryDirectory(prefix="spillage-origins-") as tmp:
        path = Path(catalog_path) if catalog_path else Path(tmp) / "sites.sqlite"
        if not existing:
            build_catalog(path, with_benchmark(scenarios) if scenarios else None, seed)
        bind = {"sockets": [listener]} if listener is not None else {"host": host, "port": port}
        server = waitress.create_server(make_app(path, access_log), threads=8, **bind)
        handlers = {}
        try:
            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGTERM, signal.SIGINT):
                    handlers[sig] = signal.signal(sig, _stop)
            host = listener.getsockname()[0] if listener is not None else host
            shown = f"[{host}]" if ":" in host else host
            print(f"spillage origins listening on http://{shown}:{server.effective_port}", flush=True)
            if ready is not None:
                ready(server.effective_port)
            server.run()
        finally:
            server.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit 2, as every `spillage` command's (no usage dump)."""

    def error(self, message: str):
        print(f"spillage: origins serve: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    parser = OneLineParser(
        prog="spillage origins serve",
        description="Serve shop.test, bazaar.test and metrics.test on one loopback port (dispatch by Host header).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback IP address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default 0)")
    parser.add_argument("--catalog", type=Path, metavar="PATH",
                        help="write the catalog database here (default: a temporary file)")
    parser.add_argument("--seed", type=int, default=0, help="catalog seed (default 0)")
    parser.add_argument("--scenarios", type=Path, nargs="+", default=[], metavar="PATH",
                        help="scenario files or folders the catalog adds to the benchmark's "
                             "(a persona given here replaces the benchmark's)")
    parser.add_argument("--from-catalog", type=Path, metavar="PATH",
                        help="serve this existing catalog file instead of building one")
    parser.add_argument("--access-log", type=Path, metavar="FILE",
                        help="append one JSON line per request received (host, method, target, body) to FILE")
    parser.add_argument("--fd", type=int, metavar="N",
                        help="serve on this inherited file descriptor, a loopback TCP socket already listening "
                             "(its parent knows the port before the server starts)")
    args = parser.parse_args(argv)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        parser.error(f"--host must be a loopback IP address such as 127.0.0.1 or ::1, not {args.host!r}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, not {args.port}")
    if args.catalog is not None and not args.catalog.parent.is_dir():
        parser.error(f"--catalog: directory {str(args.catalog.parent)!r} does not exist")
    if args.from_catalog is not None and (args.catalog or args.scenarios):
        parser.error("--from-catalog serves a built catalog: it takes no --catalog or --scenarios")
    if args.from_catalog is not None and not args.from_catalog.is_file():
        parser.error(f"--from-catalog: no catalog file at {str(args.from_catalog)!r}")
    listener = None
    if args.fd is not None:
        try:
            listener = socket.socket(fileno=args.fd)
        except OSError as e:
            parser.error(f"--fd {args.fd}: not a socket ({e.strerror or e})")
        if listener.type != socket.SOCK_STREAM or not ipaddress.ip_address(listener.getsockname()[0]).is_loopback:
            parser.error(f"--fd {args.fd}: not a TCP socket bound to a loopback address")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        scenarios = [s for f in scenario_files(args.scenarios) for s in load_file(f)]
        serve(args.host, args.port, args.from_catalog or args.catalog, seed=args.seed, scenarios=scenarios,
              existing=args.from_catalog is not None, listener=listener, access_log=args.access_log)
    except ScenarioError as e:
        print(f"spillage: origins serve: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"spillage: origins serve: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
