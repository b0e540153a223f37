"""A scripted AutoGen model client: the policies of agents/policies.py in place of an LLM.

MultimodalWebSurfer marks the page's interactive elements with `__elementId` attributes just
before it calls its model. Each `create()` reads those elements from the live page (one
`page.evaluate`), hands them to the policy as a PageState (index = the element id) and answers
with one AutoGen tool call translated from the policy's browser-use actions; the rest of a
multi-action step waits for the next calls (agents/autogen_actions.py translates them).

`ScriptedWebSurfer` is the surfer such a model drives: the same tools, without the waits that
only give a model's turn time (docs/AGENTS.md, "AutoGen").
"""

import asyncio
import itertools
import json
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from autogen_core import FunctionCall
from autogen_core import Image
from autogen_core.models import ChatCompletionClient
from autogen_core.models import CreateResult
from autogen_core.models import ModelInfo
from autogen_core.models import RequestUsage
from autogen_ext.agents.web_surfer import MultimodalWebSurfer
from autogen_ext.agents.web_surfer.playwright_controller import PlaywrightController
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from spillage.agents.autogen_actions import PAGE_STATE_SCRIPT
from spillage.agents.autogen_actions import View
from spillage.agents.autogen_actions import next_call
from spillage.agents.autogen_actions import page_state
from spillage.agents.policies import ScriptedPolicy

# How MultimodalWebSurfer 0.7 paces itself: after every tool it waits for the load state and sleeps
# SURFER_SETTLE seconds (its `sleep` tool sleeps as long, before that); a click first waits up to
# CLICK_WINDOW for a popup. ON_SCREEN_TOOLS keep the sleep after them in scripted runs.
SURFER_SETTLE = 3
CLICK_WINDOW = 1.0
CLICK_PAUSE = 0.3  # between scrolling an element into view and clicking it, as the surfer does
ON_SCREEN_TOOLS = ("scroll_up", "scroll_down", "scroll_element_up", "scroll_element_down", "sleep")
NAVIGATION_GRACE = 0.25  # a tool that loads a page has asked for it by then
NAVIGATION_TIMEOUT = 10.0
POLL = 0.02

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


class PageWatch:
    """The navigations and popups of one page, counted from Playwright's events (nothing runs in
    the page): how many main-frame navigations were requested, whether one is under way (requested,
    not yet committed), and the popups it opened."""

    def __init__(self, page):
        self.page = page
        self.requested = 0
        self.under_way = False
        self.popups: list = []
        page.on("request", self._request)
        page.on("requestfailed", self._failed)
        page.on("framenavigated", self._navigated)
        page.on("popup", self._popup)

    def _main(self, frame) -> bool:
        return frame == self.page.main_frame

    def _request(self, request) -> None:
        if request.is_navigation_request() and self._main(request.frame):
            self.requested += 1
            self.under_way = True

    def _failed(self, request) -> None:
        if request.is_navigation_request() and self._main(request.frame):
            self.under_way = False

    def _navigated(self, frame) -> None:
        if self._main(frame):
            self.under_way = False

    def _popup(self, page) -> None:
        self.popups.append(page)

    async def loaded(self, since: int, grace: float) -> None:
        """Wait until a navigation requested after the count `since`, or within `grace` seconds from
        now, has committed, then for its page's load; return after `grace` when none was."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.requested == since and loop.time() < deadline:
            await asyncio.sleep(POLL)
        if self.requested == since:
            return
        deadline = loop.time() + NAVIGATION_TIMEOUT
        while self.under_way and loop.time() < deadline:
            await asyncio.sleep(POLL)
        await self.page.wait_for_load_state()


class ScriptedPlaywrightController(PlaywrightController):
    """The surfer's Playwright controller for a scripted model. The browser does what it did, with
    the same pauses where the page can tell (the scroll before a click, the click itself); what is
    cut is waiting for nothing:

    - a click waits for a popup only until the page it opened (or the popup) was asked for,
      not for CLICK_WINDOW whatever happens;
    - after any other tool (click, input_text, visit_url, ...) the surfer's 3 s sleep is replaced
      by waiting for the page the tool asked for, if any, to load (`PageWatch.loaded`);
    - after a scroll, and in and after the `sleep` tool (a policy's pause), the surfer sleeps as
      it always does: what is on screen then stays there as long as before, so the tracker
      records the same dwell.

    `ScriptedWebSurfer` tells it which tool runs (`begin`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.watches: dict[Any, PageWatch] = {}
        self.tool = ""
        self.mark = 0

    def watch(self, page) -> PageWatch:
        if page not in self.watches:
            self.watches[page] = PageWatch(page)
        return self.watches[page]

    def begin(self, page, tool: str) -> None:
        """A tool is about to run on `page`."""
        self.tool, self.mark = tool, self.watch(page).requested

    async def sleep(self, page, duration) -> None:
        if duration == SURFER_SETTLE and self.tool not in ON_SCREEN_TOOLS:
            await self.watch(page).loaded(self.mark, NAVIGATION_GRACE)
        else:
            await super().sleep(page, duration)

    async def click_id(self, page, identifier: str):
        if self.animate_actions:
            return await super().click_id(page, identifier)
        watch = self.watch(page)
        target = page.locator(f"[__elementId='{identifier}']")
        try:
            await target.wait_for(timeout=5000)
        except PlaywrightTimeoutError:
            raise ValueError("No such element.") from None
        await target.scroll_into_view_if_needed()
        await asyncio.sleep(CLICK_PAUSE)
        box = await target.bounding_box()
        requested, popups = watch.requested, len(watch.popups)
        await page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, delay=10)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLICK_WINDOW
        while watch.requested == requested and len(watch.popups) == popups and loop.time() < deadline:
            await asyncio.sleep(POLL)
        if len(watch.popups) > popups:
            new_page = watch.popups[-1]
            await self.on_new_page(new_page)
            return new_page
        return None


class EncodedImage(Image):
    """An AutoGen Image that is PNG-encoded once. AutoGen's runtime serializes every message it
    passes (for its event log and trace attributes, whether anyone listens or not), and each time
    re-encodes the screenshot the surfer attaches to its answer: several encodings of a
    1440×900 PNG per turn, nearly half the CPU of a scripted run."""

    def __init__(self, image: Image):
        self.image = image.image  # as converted already: Image.__init__ would convert it again
        self.encoded: str | None = None

    def to_base64(self) -> str:
        if self.encoded is None:
            self.encoded = super().to_base64()
        return self.encoded


class ScriptedWebSurfer(MultimodalWebSurfer):
    """MultimodalWebSurfer for a scripted model: its tools run by `ScriptedPlaywrightController`,
    which leaves out the waits that only give a model's turn time, and the screenshot of its answer
    encoded once (`EncodedImage`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._playwright_controller = ScriptedPlaywrightController(
            animate_actions=self.animate_actions, downloads_folder=self.downloads_folder,
            viewport_width=self.VIEWPORT_WIDTH, viewport_height=self.VIEWPORT_HEIGHT,
            _download_handler=self._download_handler, to_resize_viewport=self.to_resize_viewport)

    async def _execute_tool(self, message, rects, tool_names, cancellation_token=None):
        self._playwright_controller.begin(self._page, message[0].name)
        content = await super()._execute_tool(message, rects, tool_names, cancellation_token=cancellation_token)
        if isinstance(content, list):
            content = [EncodedImage(part) if isinstance(part, Image) else part for part in content]
        return content
