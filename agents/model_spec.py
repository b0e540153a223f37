"""`--model` values, parsed once for every framework: which provider, which model, which endpoint.

    scripted:POLICY                      a scripted policy (agents/policies.py), no LLM
    openai:NAME                          OpenAI, or OPENAI_BASE_URL / --base-url; key from OPENAI_API_KEY
    ollama:NAME                          an Ollama server: OLLAMA_HOST / --base-url (default 127.0.0.1:11434)
    openai-compatible:BASE_URL#NAME      vLLM, llama.cpp, LM Studio and similar (…/v1 endpoints)

This module imports no framework, so the runner can check a spec before it starts anything.
"""

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit


MODEL_HELP = (
    "scripted:POLICY (no LLM; POLICY is minimal, oversharer, clicker or scroller), openai:NAME "
    "(OPENAI_API_KEY; OPENAI_BASE_URL or --base-url), ollama:NAME (OLLAMA_HOST or --base-url), "
    "openai-compatible:BASE_URL#NAME (vLLM, llama.cpp, ...)"
)
DEFAULT_MODEL = "scripted:oversharer"   # `spillage run` without --model: said at start, never silently
PROVIDERS = ("scripted", "openai", "ollama", "openai-compatible")
OLLAMA_DEFAULT = "http://127.0.0.1:11434"


class ModelSpecError(ValueError):
    """A `--model` value we cannot use."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed `--model`: `provider`, `name` (the policy for scripted) and the endpoint's `base_url`
    (None: the provider's default)."""

    provider: str
    name: str
    base_url: str | None = None

    @property
    def scripted(self) -> bool:
        return self.provider == "scripted"

    def openai_base_url(self) -> str | None:
        """The endpoint as an OpenAI-compatible client wants it (Ollama serves one under /v1)."""
        if self.provider == "ollama":
            return self.base_url.rstrip("/") + "/v1"
        return self.base_url

    def api_key(self) -> str:
        """The key for the endpoint: OPENAI_API_KEY, or a placeholder for servers that want none."""
        return os.environ.get("OPENAI_API_KEY") or "unused"

    def label(self) -> str:
        """A short name for folder names: provider and model, no URL."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{self.provider}-{self.name}").strip("-")

    def host(self) -> str | None:
        """host:port of the endpoint, None for a scripted model or OpenAI's default."""
        if not self.base_url:
            return None if self.scripted else "api.openai.com:443"
        parts = urlsplit(self.base_url)
        return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def parse_model(spec: str, base_url: str | None = None) -> ModelSpec:
    """Parse `spec` (see MODEL_HELP); `base_url` is --base-url, which openai: and ollama: take."""
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelSpecError(f"model {spec!r}: expected PROVIDER:NAME, one of {MODEL_HELP}")
    if provider == "scripted":
        from spillage.agents.policies import POLICIES   # the policies and their vocabulary: only for these

        if rest not in POLICIES:
            raise ModelSpecError(f"model {spec!r}: no scripted policy {rest!r}; have {', '.join(sorted(POLICIES))}")
        return ModelSpec("scripted", rest)
    if provider == "openai":
        return ModelSpec("openai", rest, check_url(spec, base_url or os.environ.get("OPENAI_BASE_URL")))
    if provider == "ollama":
        host = base_url or os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT
        if "://" not in host:
            host = f"http://{host}"
        return ModelSpec("ollama", rest, check_url(spec, host))
    if provider == "openai-compatible":
        url, hash_, name = rest.rpartition("#")
        if not hash_ or not url or not name:
            raise ModelSpecError(f"model {spec!r}: expected openai-compatible:BASE_URL#NAME, "
                                 "e.g. openai-compatible:http://127.0.0.1:8000/v1#qwen2.5-7b")
        return ModelSpec("openai-compatible", name, check_url(spec, url))
    raise ModelSpecError(f"model {spec!r}: unknown provider {provider!r}; expected {MODEL_HELP}")


def check_url(spec: str, url: str | None) -> str | None:
    """`url` if it is an http(s) URL with a host (or None); a clear error otherwise."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelSpecError(f"model {spec!r}: endpoint {url!r} is not an http(s) URL")
    return url


def model_transport() -> dict:
    """httpx client arguments for the model endpoint: through our proxy, trusting our CA, when the
    runner set SPILLAGE_MODEL_PROXY (`--model-via-proxy`); otherwise none (a direct connection)."""
    proxy = os.environ.get("SPILLAGE_MODEL_PROXY")
    if not proxy:
        return {}
    import ssl   # only here: every command imports this module to parse --model

    return {"proxy": proxy, "verify": ssl.create_default_context(cafile=os.environ["SPILLAGE_CA_FILE"])}
