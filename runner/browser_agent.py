"""The browser-use agent, run as a child process in the environment `agent_env` builds.

    python -m spillage.runner.browser_agent --model scripted:oversharer

Only Chromium talks through the proxy; the agent's own calls to an LLM endpoint do not
(they are not the browser's traffic and would be refused by the egress policy).
"""

import asyncio
import os
import sys
from pathlib import Path

from spillage.runner.agent_process import chromium_path
from spillage.runner.agent_process import agent_arguments
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
    print(f"spillage agent: {len(history.history)} steps, done={history.is_done()}, "
          f"successful={history.is_successful()}, result={history.final_result()!r}", flush=True)
    return 0 if history.is_done() else 3


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run_agent(agent_arguments("spillage-browser-agent", __doc__, argv)))


if __name__ == "__main__":
    sys.exit(main())
