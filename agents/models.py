"""Turn a `--model` spec into a browser-use chat model."""

from spillage.agents.model_spec import ModelSpec
from spillage.agents.model_spec import model_transport
from spillage.agents.policies import scripted_policy
from spillage.agents.scripted_llm import ScriptedChat
from spillage.scenarios.model import Scenario


def build_model(spec: ModelSpec, scenario: Scenario):
    """A browser-use chat model for a parsed `spec`."""
    if spec.scripted:
        return ScriptedChat(scripted_policy(spec.name, scenario))
    transport = model_transport()
    if spec.provider == "ollama":
        from browser_use import ChatOllama
        return ChatOllama(model=spec.name, host=spec.base_url, client_params=transport or None)
    import httpx
    from browser_use import ChatOpenAI
    return ChatOpenAI(model=spec.name, base_url=spec.openai_base_url(), api_key=spec.api_key(),
                      http_client=httpx.AsyncClient(**transport) if transport else None)
