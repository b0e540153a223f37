"""Byte relays between TCP and Unix sockets: the only way out of the agent's sandbox (runner/sandbox.py).

The sandbox has a network of its own, a loopback and nothing else. Inside it, the sandbox's first process
listens on the address it gives the proxy (and on a model endpoint's, when the run allows one) and relays each
connection to a Unix socket bound into the sandbox; outside, the runner relays each connection on that
socket to the one TCP address it stands for. Bytes pass unchanged, both ways, with half-closes kept.
That address may be given later (`Later`: the proxy's, which is known once it listens): a connection
that comes before waits for it, so the agent can start while the proxy boots and reach nothing until
it is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

CHUNK = 1 << 16
Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until the reader ends, then half-close the writer."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, open_target: Opener) -> None:
    """Join an accepted connection to a new one to its target, both ways, until both ends are done. When
    the relays close, it ends as if done: asyncio's streams (Python 3.12.1) log a traceback for a
    connection task that ends cancelled."""
    try:
        target_reader, target_writer = await open_target()
    except (OSError, asyncio.CancelledError):
        writer.close()
        return
    try:
        await asyncio.gather(_pump(reader, target_writer), _pump(target_reader, writer))
    except asyncio.CancelledError:
        pass
    finally:
        target_writer.close()
        writer.close()


def to_tcp(host: str, port: int) -> Opener:
    return lambda: asyncio.open_connection(host, port)


class Later:
    """A TCP address given once it is known (`set`, from any thread); until then the relays' connections
    to it wait."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None
        self.lock = threading.Lock()
        self.waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def set(self, host: str, port: int) -> None:
        with self.lock:
            self.address = (host, port)
            for loop, known in self.waiting:
                with contextlib.suppress(RuntimeError):   # the relays have closed already
                    loop.call_soon_threadsafe(known.set)

    def opener(self) -> Opener:
        async def open_when_known():
            known = asyncio.Event()
            with self.lock:
                if self.address is None:
                    self.waiting.append((asyncio.get_running_loop(), known))
                else:
                    known.set()
            await known.wait()
            return await asyncio.open_connection(*self.address)
        return open_when_known


def to_unix(path: Path) -> Opener:
    return lambda: asyncio.open_unix_connection(str(path))


class OutsideRelays:
    """The runner's side: a Unix socket in `folder` per TCP address (or `Later` one), served from a thread
    of its own. `with OutsideRelays(folder, {"proxy.sock": ("127.0.0.1", 8080)}):`"""

    def __init__(self, folder: Path, targets: dict[str, tuple[str, int] | Later]):
        self.folder, self.targets = folder, targets
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="spillage-relays", daemon=True)
        self.servers: list[asyncio.AbstractServer] = []

    def __enter__(self) -> OutsideRelays:
        self.thread.start()
        for name, target in self.targets.items():
            opener = target.opener() if isinstance(target, Later) else to_tcp(*target)
            server = asyncio.run_coroutine_threadsafe(asyncio.start_unix_server(
                lambda r, w, o=opener: relay(r, w, o), str(self.folder / name)), self.loop).result()
            self.servers.append(server)
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            for server in self.servers:
                server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
