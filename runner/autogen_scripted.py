"""A scripted AutoGen model client: the policies of runner/policies.py in place of an LLM.

MultimodalWebSurfer marks the page's interactive elements with `__elementId` attributes just
before it calls its model. Each `create()` reads those elements from the live page (one
`page.evaluate`), hands them to the policy as a PageState (index = the element id) and answers
with one AutoGen tool call translated from the policy's browser-use actions; the rest of a
multi-action step waits for the next calls (runner/autogen_actions.py translates them).
"""

import itertools
import json
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import ChatCompletionClient
from autogen_core.models import CreateResult
from autogen_core.models import ModelInfo
from autogen_core.models import RequestUsage

from spillage.runner.autogen_actions import PAGE_STATE_SCRIPT
from spillage.runner.autogen_actions import View
from spillage.runner.autogen_actions import next_call
from spillage.runner.autogen_actions import page_state
from spillage.runner.policies import ScriptedPolicy

# A text-only model that calls tools: what the surfer is told about a scripted policy, and about
# any model AutoGen does not know by name.
TEXT_TOOLS_MODEL_INFO = ModelInfo(vision=False, function_calling=True, json_output=False,
                                  family="unknown", structured_output=False)


class ScriptedModelClient(ChatCompletionClient):
    """An AutoGen ChatCompletionClient whose answers come from a scripted policy.

    `current_page` returns the surfer's current Playwright page. A multi-action step is
    abandoned when the page's URL changed since the policy chose it, as browser-use does.
    """

    def __init__(self, policy: ScriptedPolicy, current_page: Callable[[], Any]):
        self.policy = policy
        self.current_page = current_page
        self.pending: list[dict] = []
        self.pending_url = ""
        self.call_ids = itertools.count(1)

    async def create(self, messages: Sequence, *, tools: Sequence = (), tool_choice: Any = "auto",
                     json_output: Any = None, extra_create_args: Any = None,
                     cancellation_token: Any = None) -> CreateResult:
        page = self.current_page()
        if page.url != self.pending_url:
            self.pending = []
        while True:
            found = await page.evaluate(PAGE_STATE_SCRIPT)
            state = page_state(page.url, found)
            if not self.pending:
                self.pending, self.pending_url = self.policy.next_actions(state), page.url
            call, self.pending = next_call(self.pending, state, View.of(found))
            if isinstance(call, str):
                return CreateResult(finish_reason="stop", content=call, usage=RequestUsage(0, 0), cached=False)
            if call is not None:
                name, arguments = call
                function = FunctionCall(id=f"call_{next(self.call_ids)}", name=name,
                                        arguments=json.dumps(arguments))
                return CreateResult(finish_reason="function_calls", content=[function],
                                    usage=RequestUsage(0, 0), cached=False)

    def create_stream(self, messages: Sequence, **kwargs):
        async def stream():
            yield await self.create(messages, **kwargs)
        return stream()

    async def close(self) -> None:
        pass

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    def total_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    def count_tokens(self, messages: Sequence, *, tools: Sequence = ()) -> int:
        return 0

    def remaining_tokens(self, messages: Sequence, *, tools: Sequence = ()) -> int:
        return 1 << 20

    @property
    def capabilities(self):
        return self.model_info

    @property
    def model_info(self) -> ModelInfo:
        return TEXT_TOOLS_MODEL_INFO
