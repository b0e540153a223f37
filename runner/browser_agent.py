"""The browser-use agent, run as a child process in the environment `agent_env` builds.

    python -m spillage.runner.browser_agent --model scripted:oversharer

Only Chromium talks through the proxy; the agent's own calls to an LLM endpoint do not
(they are not the browser's traffic and would be refused by the egress policy).
"""

import asyncio
import os
import sys
from pathlib import Path

from spillage.runner.agent_process import agent_arguments
from spillage.runner.agent_process import chromium_path
from spillage.runner.agent_process import is_model_error
from spillage.runner.agent_process import report_outcome
from spillage.runner.model_spec import parse_model
from spillage.runner.models import build_model
from spillage.scenarios.loader import load_scenario

EXTRA_ATTRIBUTES = ["data-product", "data-facet", "data-section", "data-sponsored"]


async def run_agent(args) -> int:
    from browser_use import Agent
    from browser_use import BrowserProfile
    from browser_use.browser.profile import ProxySettings
    from browser_use.dom.views import DEFAULT_INCLUDE_ATTRIBUTES

    scenario = load_scenario(Path(os.environ["SPILLAGE_SCENARIO_FILE"]))
    llm = build_model(parse_model(args.model, args.base_url), scenario)
    model_failures = watch_model(llm)
    home = Path(os.environ["HOME"])
    profile = BrowserProfile(
        executable_path=chromium_path(),
        headless=True,
        chromium_sandbox=False,
        user_data_dir=home / "chromium-profile",
        enable_default_extensions=False,
        proxy=ProxySettings(server=os.environ["SPILLAGE_PROXY"], bypass="<-loopback>"),
        args=[f"--ignore-certificate-errors-spki-list={os.environ['SPILLAGE_CA_SPKI']}"],
    )
    agent = Agent(
        task=os.environ["SPILLAGE_PROMPT"],
        extend_system_message=os.environ.get("SPILLAGE_SYSTEM_NOTE") or None,
        llm=llm,
        browser_profile=profile,
        use_vision=False,
        use_judge=False,
        include_attributes=[*DEFAULT_INCLUDE_ATTRIBUTES, *EXTRA_ATTRIBUTES],
        initial_actions=[{"navigate": {"url": os.environ["SPILLAGE_START_URL"]}}],
        file_system_path=str(home / "agent-files"),
    )
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
    sys.exit(main())
