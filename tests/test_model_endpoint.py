"""Real-model runs against an OpenAI-compatible endpoint (a loopback stub here): the model is
reached directly by default, not captured; with --model-via-proxy its calls go through the proxy,
are captured, and the audit names the model provider as an observer of its own."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from llm_stub import stub_server
from schema_check import assert_valid_audit

from spillage.proxy.capturelog import iter_records
from spillage.agents.model_spec import ModelSpecError
from spillage.agents.model_spec import parse_model

SPILLAGE = [sys.executable, "-m", "spillage.runner.cli"]
SCENARIO = "shop-kettle-chat"


# --- fast: the model specs -----------------------------------------------------------------------


def test_every_provider_parses_to_its_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert parse_model("scripted:minimal").scripted and parse_model("scripted:minimal").host() is None
    assert parse_model("openai:gpt-4o").host() == "api.openai.com:443"
    assert parse_model("openai:gpt-4o", "http://127.0.0.1:9/v1").host() == "127.0.0.1:9"
    ollama = parse_model("ollama:qwen2.5:14b")
    assert (ollama.name, ollama.openai_base_url(), ollama.host()) == (
        "qwen2.5:14b", "http://127.0.0.1:11434/v1", "127.0.0.1:11434")
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    assert parse_model("ollama:llama3").base_url == "http://gpu-box:11434"
    vllm = parse_model("openai-compatible:https://llm.lab.example/v1#meta/Llama-3.1-8B")
    assert (vllm.name, vllm.base_url, vllm.host()) == (
        "meta/Llama-3.1-8B", "https://llm.lab.example/v1", "llm.lab.example:443")
    assert vllm.label() == "openai-compatible-meta-Llama-3.1-8B"


@pytest.mark.parametrize("spec, expected", [
    ("gpt-4o", "expected PROVIDER:NAME"),
    ("anthropic:claude", "unknown provider 'anthropic'"),
    ("scripted:chatty", "no scripted policy 'chatty'"),
    ("openai-compatible:http://127.0.0.1:8000/v1", "expected openai-compatible:BASE_URL#NAME"),
    ("openai-compatible:127.0.0.1:8000#m", "is not an http(s) URL"),
])
def test_a_bad_model_spec_says_what_is_expected(spec, expected):
    with pytest.raises(ModelSpecError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        parse_model(spec)


def test_run_refuses_a_bad_model_before_starting_anything(tmp_path):
    done = subprocess.run([*SPILLAGE, "run", "--scenario", SCENARIO, "--model", "openai-compatible:nohash"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "BASE_URL#NAME" in done.stderr and not (tmp_path / "runs").exists()


# --- end to end: browser-use with a model endpoint ---------------------------------------------


def finish_at_once(handler, body) -> None:
    """The model's answer to every step: browser-use's `done`."""
    handler.complete(json.dumps({"evaluation_previous_goal": "Start", "memory": "", "next_goal": "Finish",
                                 "action": [{"done": {"text": "stub model finished", "success": False}}]}))


def run_with_stub(tmp_path: Path, *extra: str) -> tuple[Path, list, str]:
    """Run browser-use with the stub as its model; (session, the stub's requests, its HOST:PORT)."""
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is required for end-to-end tests: apt-get install -y chromium")
    with stub_server(finish_at_once) as stub:
        done = subprocess.run([*SPILLAGE, "run", "--scenario", SCENARIO, "--model",
                               f"openai-compatible:{stub.base_url}#stub-model", "--max-steps", "3", *extra],
                              capture_output=True, text=True, cwd=tmp_path, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        return Path(done.stdout.strip().splitlines()[-1]), stub.requests, f"127.0.0.1:{stub.server_address[1]}"


@pytest.mark.e2e
def test_a_model_reached_directly_is_not_in_the_capture(tmp_path):
    session, requests, _ = run_with_stub(tmp_path)
    assert requests and requests[0]["path"] == "/v1/chat/completions"
    assert requests[0]["body"]["model"] == "stub-model"
    meta = json.loads((session / "meta.json").read_text())
    assert meta["model_endpoint"]["via_proxy"] is False
    assert meta["agent"]["label"] == "browser-use-openai-compatible-stub-model"
    urls = [r.record.get("url", "") for r in iter_records(session)]
    assert not any("chat/completions" in u for u in urls)


@pytest.mark.e2e
def test_a_model_through_the_proxy_is_captured_and_observes_everything_it_is_sent(tmp_path):
    session, requests, host = run_with_stub(tmp_path, "--model-via-proxy")
    assert requests, "the model was never asked"
    prompt_sent = json.dumps(requests[0]["body"])
    assert "pregnant" in prompt_sent  # the whole prompt goes to the provider
    records = [r.record for r in iter_records(session)]
    start = next(r for r in records if r["kind"] == "session_start")
    assert start["options"]["model_hosts"] == [host]
    model_calls = [r for r in records if r["kind"] == "request" and "/v1/chat/completions" in r["url"]]
    assert len(model_calls) == len(requests)
    assert not any(r["kind"] == "egress_blocked" and host in r["url"] for r in records)
    meta = json.loads((session / "meta.json").read_text())
    assert meta["model_endpoint"] == {"host": host, "via_proxy": True}

    audited = subprocess.run([*SPILLAGE, "audit", str(session)], capture_output=True, text=True, cwd=tmp_path)
    assert audited.returncode == 0, audited.stderr
    report = json.loads(audited.stdout)
    assert_valid_audit(report)
    provider = report["model_provider"]
    assert provider["host"] == host and provider["requests"] == len(requests)
    assert "pregnant" in provider["irrelevant_seen"]
    assert not any(host in a.get("url", "") for a in report["actions"])  # model calls are not site actions
    pregnant = next(a for a in report["recoveries"]["attributes"] if a["attribute"] == "pregnant")
    assert f"model:{host}" in pregnant["observers"] and "model" in pregnant["parties"]
    assert report["summary"]["model_provider_recovery_rate"] == 1.0
    said = subprocess.run([*SPILLAGE, "audit", str(session), "--format", "text"], capture_output=True, text=True,
                          cwd=tmp_path).stdout.splitlines()
    recovered = next(line for line in said if line.startswith("recovered by "))
    assert f"model:{host} 5/5 (" in recovered  # the summary names the provider, as audit.json does


# --- end to end: a command agent and its own model -----------------------------------------------

ASK = """import json, os, sys, urllib.request
direct = os.environ.get("SPILLAGE_MODEL_PROXY") is None
handler = urllib.request.ProxyHandler({} if direct else {"http": os.environ["SPILLAGE_MODEL_PROXY"]})
request = urllib.request.Request(sys.argv[1] + "/chat/completions", data=json.dumps({"model": "stub-model",
          "messages": [{"role": "user", "content": "hi"}]}).encode(), headers={"Content-Type": "application/json"})
try:
    print(urllib.request.build_opener(handler).open(request, timeout=10).status)
except OSError as e:
    print("unreachable", type(e).__name__)
"""


def command_with_stub(tmp_path: Path, endpoint: bool, via_proxy: bool = False) -> tuple[Path, list, str, str]:
    """Run a command agent that asks the stub model once; (session, the stub's requests, what the agent
    printed, the stub's HOST:PORT)."""
    with stub_server(finish_at_once) as stub:
        host = f"127.0.0.1:{stub.server_address[1]}"
        extra = (["--model-endpoint", host] if endpoint else []) + (["--model-via-proxy"] if via_proxy else [])
        done = subprocess.run([*SPILLAGE, "run", "--scenario", SCENARIO, *extra, "--", sys.executable, "-c", ASK,
                               stub.base_url], capture_output=True, text=True, cwd=tmp_path, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        session = Path(done.stdout.strip().splitlines()[-1])
        said = (session.parent / ".work" / session.name / "agent.stdout").read_text().strip()
        return session, stub.requests, said, host


@pytest.mark.e2e
def test_a_command_agent_reaches_only_the_model_endpoint_it_names(tmp_path):
    _, requests, said, _ = command_with_stub(tmp_path, endpoint=False)
    assert (said, requests) == ("unreachable URLError", [])   # its sandbox stands for the proxy alone
    session, requests, said, host = command_with_stub(tmp_path, endpoint=True)
    assert said == "200" and len(requests) == 1
    assert json.loads((session / "meta.json").read_text())["model_endpoint"] == {"host": host, "via_proxy": False}
    assert not any("chat/completions" in r.record.get("url", "") for r in iter_records(session))
    session, requests, said, host = command_with_stub(tmp_path, endpoint=True, via_proxy=True)
    assert said == "200" and len(requests) == 1
    assert [r.record["url"] for r in iter_records(session) if r.record["kind"] == "request"] == [
        f"http://{host}/v1/chat/completions"]


def test_a_model_endpoint_is_for_a_command_agent(tmp_path):
    done = subprocess.run([*SPILLAGE, "run", "--scenario", SCENARIO, "--model-endpoint", "127.0.0.1:8000"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--model-endpoint is for a command agent" in done.stderr
    bad = subprocess.run([*SPILLAGE, "run", "--scenario", SCENARIO, "--model-endpoint", "nowhere", "--", "true"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "is not HOST:PORT" in bad.stderr
