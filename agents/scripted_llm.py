"""A browser-use chat model that answers from a scripted policy instead of an LLM."""

from browser_use.llm.messages import UserMessage
from browser_use.llm.views import ChatInvokeCompletion

from spillage.agents.browser_state import parse_browser_state
from spillage.agents.policies import ScriptedPolicy


def message_text(message) -> str:
    """The text of a browser-use message, whether its content is a string or a list of parts."""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(getattr(part, "text", "") for part in content or ())


def latest_browser_state(messages) -> str:
    """Text of the newest user message that carries a `<browser_state>` (nudges may follow it)."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            text = message_text(message)
            if "<browser_state>" in text:
                return text
    return ""


class ScriptedChat:
    """Implements browser-use's chat-model protocol; each call parses the page and asks the policy."""

    provider = "scripted"
    _verified_api_keys = True

    def __init__(self, policy: ScriptedPolicy):
        self.policy = policy
        self.model = f"scripted:{policy.name}"

    @property
    def name(self) -> str:
        return self.model

    @property
    def model_name(self) -> str:
        return self.model

    async def ainvoke(self, messages, output_format=None, **kwargs):
        if output_format is None:
            return ChatInvokeCompletion(completion="", usage=None)
        page = parse_browser_state(latest_browser_state(messages))
        actions = self.policy.next_actions(page)
        step = {"evaluation_previous_goal": "", "memory": f"step {self.policy.steps}",
                "next_goal": ", ".join(next(iter(a)) for a in actions), "action": actions}
        return ChatInvokeCompletion(completion=output_format.model_validate(step), usage=None)
