"""Turn a `--model` spec into a browser-use chat model."""

import os

from spillage.runner.policies import POLICIES
from spillage.runner.scripted_llm import ScriptedChat
from spillage.scenarios.model import Scenario

MODEL_HELP = (
    "scripted:minimal | scripted:oversharer (no LLM), openai:MODEL (OpenAI-compatible endpoint: "
    "OPENAI_BASE_URL, OPENAI_API_KEY or --base-url), ollama:MODEL (OLLAMA_HOST or --base-url)"
)


class ModelSpecError(ValueError):
    """A `--model` value we cannot build."""


def build_model(spec: str, scenario: Scenario, base_url: str | None = None):
    """A browser-use chat model for `spec` (see MODEL_HELP)."""
    provider, _, name = spec.partition(":")
    if not name:
        raise ModelSpecError(f"model {spec!r}: expected PROVIDER:NAME, one of {MODEL_HELP}")
    if provider == "scripted":
        if name not in POLICIES:
            raise ModelSpecError(f"model {spec!r}: no scripted policy {name!r}; "
                                 f"have {', '.join(sorted(POLICIES))}")
        return ScriptedChat(POLICIES[name](scenario))
    if provider == "openai":
        from browser_use import ChatOpenAI
        return ChatOpenAI(model=name, base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                          api_key=os.environ.get("OPENAI_API_KEY", "unused"))
    if provider == "ollama":
        from browser_use import ChatOllama
        return ChatOllama(model=name, host=base_url or os.environ.get("OLLAMA_HOST"))
    raise ModelSpecError(f"model {spec!r}: unknown provider {provider!r}; expected {MODEL_HELP}")
