"""A stand-in for an OpenAI-compatible model server on loopback: POST …/chat/completions gets
the answer a test's `answer(body)` gives; every request is kept in `server.requests`, but the
one-token request of `spillage run`'s model check (runner/preflight.py), which is answered OK."""

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer


class StubHandler(BaseHTTPRequestHandler):
    """Reads the JSON body, records it, and replies with `self.server.answer(self, body)`."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("max_tokens") == 1:   # the preflight: not the agent's request
            self.complete("OK")
            return
        self.server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        self.server.answer(self, body)

    def reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client under test gave up waiting: nothing to answer

    def complete(self, content: str) -> None:
        """A chat completion whose message is `content`."""
        self.reply(200, {"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": content}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


@contextlib.contextmanager
def stub_server(answer):
    """A running stub whose replies come from `answer(handler, body)`; `.base_url` ends in /v1."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubHandler)
    server.daemon_threads = True
    server.requests, server.answer = [], answer
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
