"""A model is checked before anything starts, and a run says why its agent stopped."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer

import pytest

from spillage.agents.agent_process import is_model_error
from spillage.agents.agent_process import report_outcome
from spillage.runner.cli import main
from spillage.agents.model_spec import parse_model
from spillage.runner.preflight import PreflightError
from spillage.runner.preflight import preflight
from spillage.runner.session_run import read_outcome


@contextlib.contextmanager
def endpoint(routes: dict[str, tuple[int, dict]]):
    """A server answering GET PATH (and POST PATH) with (status, JSON) from `routes`, 404 elsewhere;
    its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.do_GET()

        def do_GET(self):
            status, body = routes.get(self.path, (404, {"error": "no such route"}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dead_endpoint_fails_in_seconds():
    began = time.monotonic()
    with pytest.raises(PreflightError, match=r"nothing answers at http://127.0.0.1:9/v1/models within 5 s"):
        preflight(parse_model("openai-compatible:http://127.0.0.1:9/v1#qwen"))
    assert time.monotonic() - began < 6


def test_an_endpoint_that_lists_its_models_must_list_this_one():
    with endpoint({"/v1/models": (200, {"data": [{"id": "qwen2.5"}, {"id": "llama3"}]})}) as base:
        assert "answered (HTTP 200)" in preflight(parse_model(f"openai-compatible:{base}/v1#qwen2.5"))
        with pytest.raises(PreflightError, match="does not serve it; it serves llama3, qwen2.5"):
            preflight(parse_model(f"openai-compatible:{base}/v1#mistral"))


def test_a_refused_key_and_a_missing_key_are_said(monkeypatch):
    with endpoint({"/v1/models": (401, {"error": "bad key"})}) as base:
        with pytest.raises(PreflightError, match=r"refused the key \(HTTP 401\)"):
            preflight(parse_model(f"openai-compatible:{base}/v1#x"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(PreflightError, match="OPENAI_API_KEY is not set"):
        preflight(parse_model("openai:gpt-4o-mini"))


def test_an_endpoint_without_a_models_list_must_answer_one_token():
    completion = {"choices": [{"message": {"role": "assistant", "content": "OK"}}]}
    with endpoint({"/v1/chat/completions": (200, completion)}) as base:  # 404 for /v1/models
        assert "answered a one-token chat completion (HTTP 200" in preflight(parse_model(f"openai-compatible:{base}/v1#x"))
    with endpoint({}) as base:  # an HTTP server, but no model behind it
        with pytest.raises(PreflightError, match=r"is not a model endpoint: GET /models answered HTTP 404 and a "
                                                 r"one-token chat completion HTTP 404"):
            preflight(parse_model(f"openai-compatible:{base}/v1#x"))


def test_an_ollama_model_must_be_pulled():
    with endpoint({"/api/tags": (200, {"models": [{"name": "qwen2.5:latest"}]})}) as base:
        assert preflight(parse_model("ollama:qwen2.5", base)).endswith("has qwen2.5")
        with pytest.raises(PreflightError, match=r"not pulled on .* \(`ollama pull llama3`\); it has qwen2.5:latest"):
            preflight(parse_model("ollama:llama3", base))


def test_run_refuses_a_dead_model_before_anything_starts(tmp_path, capsys):
    code = main(["--home", str(tmp_path / "home"), "run", "--scenario", "shop-kettle-chat",
                 "--runs-dir", str(tmp_path / "runs"), "--model", "openai-compatible:http://127.0.0.1:9/v1#x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "nothing answers at" in err[0] and "--no-preflight" in err[0]
    assert not (tmp_path / "runs").exists()


def test_an_adapter_says_why_its_agent_stopped(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPILLAGE_WORK", str(tmp_path))
    assert report_outcome("model error", "APIConnectionError:\n  Connection error.", 3) == 3
    assert capsys.readouterr().out == "spillage agent: model error: APIConnectionError: Connection error.\n"
    assert read_outcome(tmp_path) == {"stopped": "model error", "detail": "APIConnectionError: Connection error.",
                                      "steps": 3}
    assert report_outcome("finished", "", 12) == 0
    (tmp_path / "outcome.json").write_text('{"stopped": "won, obviously"}')
    assert read_outcome(tmp_path) is None  # what the agent claims is read, but only in the known terms


def test_a_model_error_is_known_by_its_class_or_its_cause():
    class APIConnectionError(Exception):
        pass

    class Wrapped(RuntimeError):
        pass

    try:
        try:
            raise APIConnectionError("Connection error.")
        except APIConnectionError as inner:
            raise Wrapped("step failed") from inner
    except Wrapped as outer:
        assert is_model_error(outer)
    assert not is_model_error(ValueError("a bug of ours"))
