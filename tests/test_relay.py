"""The runner's side of the sandbox's relays (runner/relay.py): bytes pass both ways, and a connection to
an address that is not known yet (the proxy's, while it boots) waits for it, reaching nothing before."""

import socket
import socketserver
import threading
import time

from spillage.runner.relay import Later
from spillage.runner.relay import OutsideRelays


class Echo(socketserver.ThreadingTCPServer):
    """A TCP server on loopback that answers each connection with what it got, upper-cased, and counts
    the connections it accepted."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EchoUpper)
        self.accepted = 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


class EchoUpper(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.accepted += 1
        self.request.sendall(self.request.recv(1024).upper())


def ask(path, text: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(path))
        conn.sendall(text)
        return conn.recv(1024)


def test_bytes_pass_to_a_known_address(tmp_path):
    echo = Echo()
    with OutsideRelays(tmp_path, {"0.sock": ("127.0.0.1", echo.port)}):
        assert ask(tmp_path / "0.sock", b"hello") == b"HELLO"


def test_a_connection_to_an_address_not_known_yet_waits_for_it(tmp_path):
    echo, later = Echo(), Later()
    answers = []
    with OutsideRelays(tmp_path, {"0.sock": later}):
        early = threading.Thread(target=lambda: answers.append(ask(tmp_path / "0.sock", b"early")))
        early.start()
        time.sleep(0.3)
        assert echo.accepted == 0 and answers == []   # held in the relay: nothing reached yet
        later.set("127.0.0.1", echo.port)
        early.join(10)
        assert answers == [b"EARLY"]
        assert ask(tmp_path / "0.sock", b"late") == b"LATE"


def test_relays_close_while_a_connection_still_waits(tmp_path):
    """An agent that ends before the proxy is ready: the relays close, and the address known after
    changes nothing."""
    later = Later()
    with OutsideRelays(tmp_path, {"0.sock": later}):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(tmp_path / "0.sock"))
            conn.sendall(b"never")
            time.sleep(0.1)
    later.set("127.0.0.1", Echo().port)
