"""Check a model before anything starts: a run against a dead endpoint fails in seconds, not minutes.

`spillage run` and `spillage batch` call `preflight` for a real model (`--no-preflight` skips it):
an `openai:` model needs OPENAI_API_KEY; the endpoint must answer `GET …/models` within a few
seconds, must not refuse the key, and, when it lists its models, must list this one. An endpoint
that lists none (no `/models`, or not a list) must then answer a one-token chat completion with
2xx: an HTTP server that is not a model endpoint does not pass. An Ollama server must have the
model pulled.
"""

import json
import os
import urllib.error
import urllib.request

from spillage.agents.model_spec import ModelSpec

TIMEOUT = 5.0
OPENAI_DEFAULT = "https://api.openai.com/v1"
MAX_ANSWER = 1024 * 1024


class PreflightError(RuntimeError):
    """The model cannot be used; the message is one line saying why."""


def preflight(spec: ModelSpec, timeout: float = TIMEOUT) -> str:
    """Check `spec` (see the module doc); what was checked, or PreflightError."""
    if spec.scripted:
        return "scripted: no model to check"
    if spec.provider == "ollama":
        return _ollama(spec, timeout)
    if spec.provider == "openai" and not spec.base_url and not os.environ.get("OPENAI_API_KEY"):
        raise PreflightError(f"model openai:{spec.name}: OPENAI_API_KEY is not set")
    base = (spec.openai_base_url() or OPENAI_DEFAULT).rstrip("/")
    headers = {"Authorization": f"Bearer {spec.api_key()}"}
    status, answer = _get(f"{base}/models", headers, timeout, spec)
    if status in (401, 403):
        raise PreflightError(f"model {spec.provider}:{spec.name}: {base} refused the key (HTTP {status})")
    served = _model_ids(answer) if 200 <= status < 300 else None
    if served and spec.name not in served:
        raise PreflightError(f"model {spec.provider}:{spec.name}: {base} does not serve it; it serves "
                             f"{', '.join(sorted(served)[:10])}")
    if served:
        return f"{base} answered (HTTP {status})"
    one_token = {"model": spec.name, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
    tried, _ = _get(f"{base}/chat/completions", headers, timeout, spec, one_token)
    if tried in (401, 403):
        raise PreflightError(f"model {spec.provider}:{spec.name}: {base} refused the key (HTTP {tried})")
    if not 200 <= tried < 300:
        raise PreflightError(f"model {spec.provider}:{spec.name}: {base} is not a model endpoint: GET /models "
                             f"answered HTTP {status} and a one-token chat completion HTTP {tried}")
    return f"{base} answered a one-token chat completion (HTTP {tried}; /models: HTTP {status})"


def _ollama(spec: ModelSpec, timeout: float) -> str:
    base = spec.base_url.rstrip("/")
    status, answer = _get(f"{base}/api/tags", {}, timeout, spec)
    if not 200 <= status < 300:
        raise PreflightError(f"model ollama:{spec.name}: {base}/api/tags answered HTTP {status}")
    names = {m.get("name") for m in (answer or {}).get("models") or () if isinstance(m, dict)}
    if spec.name not in names and f"{spec.name}:latest" not in names:
        raise PreflightError(f"model ollama:{spec.name}: not pulled on {base} (`ollama pull {spec.name}`); "
                             f"it has {', '.join(sorted(n for n in names if n)[:10]) or 'no models'}")
    return f"{base} has {spec.name}"


def _get(url: str, headers: dict, timeout: float, spec: ModelSpec, post: dict | None = None) -> tuple[int, dict | None]:
    """(HTTP status, JSON answer or None) of GET `url` (POST of the JSON `post` when given);
    PreflightError when nothing answers."""
    data = json.dumps(post).encode() if post is not None else None
    request = urllib.request.Request(url, data=data, headers={**headers, **(
        {"Content-Type": "application/json"} if data else {})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the endpoint, directly
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, _json(response.read(MAX_ANSWER))
    except urllib.error.HTTPError as e:
        return e.code, None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise PreflightError(f"model {spec.provider}:{spec.name}: nothing answers at {url} within "
                             f"{timeout:.0f} s ({reason})") from None


def _json(data: bytes) -> dict | None:
    try:
        answer = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return answer if isinstance(answer, dict) else None


def _model_ids(answer: dict | None) -> set[str]:
    """The model ids an OpenAI-style `/models` answer lists."""
    return {m["id"] for m in (answer or {}).get("data") or () if isinstance(m, dict) and isinstance(m.get("id"), str)}
