"""The browser-use agent, run as a child process in the environment `agent_env` builds.

    python -m spillage.agents.browser_agent --model scripted:oversharer

Only Chromium talks through the proxy; the agent's own calls to an LLM endpoint do not
(they are not the browser's traffic and would be refused by the egress policy).

A scripted model answers at once, so browser-use's fixed waits are most of a scripted run: with
a scripted model the waits that only pace the agent are cut (`scripted_session`,
docs/AGENTS.md); real models keep browser-use's defaults.
"""

import asyncio
import inspect
import os
import sys
import types
from pathlib import Path
from urllib.parse import urlsplit

from spillage.agents.agent_process import agent_arguments
from spillage.agents.agent_process import chromium_path
from spillage.agents.agent_process import exit_at_once
from spillage.agents.agent_process import is_model_error
from spillage.agents.agent_process import report_outcome
from spillage.agents.model_spec import parse_model
from spillage.agents.models import build_model
from spillage.scenarios.loader import load_scenario

EXTRA_ATTRIBUTES = ["data-product", "data-facet", "data-section", "data-sponsored", "data-guard"]

# Pacing of scripted runs (docs/AGENTS.md, "browser-use"). After every click browser-use 0.13
# waits CLICK_WINDOW for a download to start, whether or not the click loaded a page; that window
# is also all that lets the page a click opens load before the next step reads it.
CLICK_WINDOW = 0.5
LOAD_TIMEOUT = 10.0  # a navigation the click started (committed) gets this long to load
SCROLLED_PAGE_DWELL = 0.5  # a page opened at an anchor stays this long: the tracker reports the scroll 300 ms after it
POLL = 0.02


async def run_agent(args) -> int:
    from browser_use import Agent
    from browser_use import BrowserProfile
    from browser_use.browser.profile import ProxySettings
    from browser_use.dom.views import DEFAULT_INCLUDE_ATTRIBUTES

    scenario = load_scenario(Path(os.environ["SPILLAGE_SCENARIO_FILE"]))
    spec = parse_model(args.model, args.base_url)
    llm = build_model(spec, scenario)
    model_failures = watch_model(llm)
    home = Path(os.environ["HOME"])
    profile = BrowserProfile(
        executable_path=chromium_path(),
        headless=True,
        chromium_sandbox=False,
        user_data_dir=home / "chromium-profile",
        downloads_path=home / "downloads",   # not browser-use's default, a new folder in the system temp per run
        enable_default_extensions=False,
        proxy=ProxySettings(server=os.environ["SPILLAGE_PROXY"], bypass="<-loopback>"),
        args=[f"--ignore-certificate-errors-spki-list={os.environ['SPILLAGE_CA_SPKI']}"],
    )
    agent = Agent(
        task=os.environ["SPILLAGE_PROMPT"],
        extend_system_message=os.environ.get("SPILLAGE_SYSTEM_NOTE") or None,
        llm=llm,
        **({"browser_session": scripted_session(profile)} if spec.scripted else {"browser_profile": profile}),
        use_vision=False,
        use_judge=False,
        include_attributes=[*DEFAULT_INCLUDE_ATTRIBUTES, *EXTRA_ATTRIBUTES],
        initial_actions=[{"navigate": {"url": os.environ["SPILLAGE_START_URL"]}}],
        file_system_path=str(home / "agent-files"),
    )
    skip_final_collect()
    history = await agent.run(max_steps=args.max_steps)
    steps = len(history.history)
    print(f"spillage agent: {steps} steps, done={history.is_done()}, "
          f"successful={history.is_successful()}, result={history.final_result()!r}", flush=True)
    if history.is_done():
        return report_outcome("finished", f"successful={history.is_successful()}", steps)
    if model_failures:
        return report_outcome("model error", model_failures[-1], steps)
    if steps >= args.max_steps:
        return report_outcome("step limit", f"{args.max_steps} steps", steps)
    errors = [e for e in history.errors() if e]
    if agent.state.stopped and errors:
        return report_outcome("browser error", errors[-1], steps)
    return report_outcome("error", errors[-1] if errors else "stopped without finishing", steps)


def scripted_session(profile):
    """The browser session for a scripted model, which reads only the page's elements and
    answers at once: browser-use's waits that merely pace the agent are cut (docs/AGENTS.md).

    - no screenshot each step: browser-use takes one even without vision, for its cloud sync;
    - no import of the Anthropic SDK (`skip_anthropic_sdk`);
    - after a click, no fixed wait: it ends when the page the click opened has loaded
      (`click_until_loaded`).

    The wait between the actions of a step (`wait_between_actions`, 0.1 s) stays: `scroller`'s
    pause (a 2 s `wait`, which browser-use sleeps 1 s) lies between two of them, and what the
    tracker counts as dwelt on (1 s on screen) would be left without a margin. What the browser
    does, and so what the sites and the tracker see, is the same: the same requests and beacons
    in the same order, the page's own timers untouched; only the time between actions is
    shorter. Real models keep browser-use's defaults."""
    from browser_use import BrowserSession
    from browser_use.browser.watchdogs.default_action_watchdog import DefaultActionWatchdog

    skip_anthropic_sdk()

    class ScriptedBrowserSession(BrowserSession):
        async def get_browser_state_summary(self, include_screenshot: bool = True, cached: bool = False,
                                            include_recent_events: bool = False):
            return await super().get_browser_state_summary(False, cached, include_recent_events)

    click_window = DefaultActionWatchdog._execute_click_with_download_detection
    if not getattr(click_window, "spillage_paced", False):
        if "download_start_timeout" in inspect.signature(click_window).parameters:  # else keep browser-use's wait
            DefaultActionWatchdog._execute_click_with_download_detection = click_until_loaded(click_window)
    return ScriptedBrowserSession(browser_profile=profile)


def skip_anthropic_sdk() -> None:
    """browser-use's Agent imports its Anthropic chat model, and with it the whole anthropic SDK
    (most of a second), only to ask whether its model is one (`isinstance`). A scripted model is
    not: that module is stood in for by one whose ChatAnthropic nothing is an instance of."""
    name = "browser_use.llm.anthropic.chat"
    if name not in sys.modules:
        stand_in = types.ModuleType(name, "Stands in for browser-use's Anthropic model in scripted runs.")
        stand_in.ChatAnthropic = type("ChatAnthropic", (), {})
        sys.modules[name] = stand_in


def skip_final_collect() -> None:
    """browser-use's Agent.close ends with a full garbage collection (0.3 s after a scripted run, more
    on a busy machine), once the browser is gone: it frees nothing anyone needs, as this process exits
    right after (`exit_at_once`). The `gc` its module calls is stood in for by one that collects nothing."""
    import browser_use.agent.service as service

    service.gc = types.SimpleNamespace(collect=lambda generation=2: 0)


def click_until_loaded(click_window):
    """Wrap browser-use's click-and-wait-for-a-download (`click_window`): the click runs as before,
    then instead of always waiting CLICK_WINDOW, the wait ends as soon as the page the click opened
    has loaded (its `load` lifecycle event, which browser-use's own navigation waits for). A click
    that opens no page still waits the whole window. A download the click starts is not waited
    for: the policies only run on our sites, which serve none. A page opened scrolled to an
    anchor stays SCROLLED_PAGE_DWELL, so that the tracker's scroll report (sent 300 ms after a
    scroll) is not cut off by the next action."""

    async def clicked(self, click_coro, download_start_timeout: float = CLICK_WINDOW,
                      download_complete_timeout: float = 30.0):
        session = self.browser_session
        events = lifecycle_events(session)
        if events is None:
            return await click_window(self, click_coro, download_start_timeout, download_complete_timeout)
        before = {e.get("loaderId") for e in list(events)}
        loop = asyncio.get_running_loop()
        result = await click_window(self, click_coro, 0, download_complete_timeout)
        if isinstance(result, dict) and result.keys() & {"download", "download_in_progress", "validation_error"}:
            return result
        deadline, committed = loop.time() + download_start_timeout, False
        while loop.time() < deadline:
            new = [e.get("name") for e in list(events) if e.get("loaderId") not in before]
            if "load" in new:
                if urlsplit(await session.get_current_page_url()).fragment:
                    await asyncio.sleep(SCROLLED_PAGE_DWELL)
                break
            if new and not committed:  # the click opened a page: let it load
                committed, deadline = True, loop.time() + LOAD_TIMEOUT
            await asyncio.sleep(POLL)
        return result

    clicked.spillage_paced = True
    return clicked


def lifecycle_events(session):
    """The page lifecycle events browser-use buffers for the focused tab (what its navigation
    waits on), or None when this browser-use keeps none."""
    try:
        return session.session_manager.get_lifecycle_events(session.agent_focus_target_id)
    except AttributeError:
        return None


def watch_model(llm) -> list[str]:
    """The errors the model's calls raise, collected as they happen (`ainvoke` is wrapped)."""
    failures: list[str] = []
    call = llm.ainvoke

    async def watched(*args, **kwargs):
        try:
            return await call(*args, **kwargs)
        except Exception as error:
            if is_model_error(error):
                failures.append(f"{type(error).__name__}: {error}")
            raise
    object.__setattr__(llm, "ainvoke", watched)
    return failures


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run_agent(agent_arguments("spillage-browser-agent", __doc__, argv)))


if __name__ == "__main__":
    exit_at_once(main())
