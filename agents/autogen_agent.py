"""AutoGen's MultimodalWebSurfer, run as a child process in the environment `agent_env` builds.

    .venv-autogen/bin/python -m spillage.agents.autogen_agent --model scripted:oversharer

It runs in AutoGen's own venv (runner/autogen_venv.py). We launch Debian's Chromium through
Playwright ourselves (the proxy, our CA pin, never a downloaded browser) and hand the surfer
that Playwright and a fresh context; the surfer is driven as AutoGen users do, a one-agent
RoundRobinGroupChat that ends when it answers in text (`answered`) or after `--max-steps` turns.
A failed action (the surfer answers "Web surfing error: ..." instead of acting, e.g. when
its web_search goes to Bing, which the proxy refuses) does not end the run: the model sees the
error and goes on, as a browser-use agent does. Exit 0: it answered; 3: step limit.
"""

import asyncio
import os
import sys
from pathlib import Path

from spillage.agents.agent_process import chromium_path
from spillage.agents.agent_process import exit_at_once
from spillage.agents.agent_process import is_model_error
from spillage.agents.agent_process import report_outcome
from spillage.agents.agent_process import agent_arguments
from spillage.agents.agent_process import caused_by
from spillage.agents.model_spec import ModelSpec
from spillage.agents.model_spec import model_transport
from spillage.agents.model_spec import parse_model
from spillage.scenarios.loader import load_scenario

SURFER_NAME = "web_surfer"
SURFER_ERROR = "Web surfing error:"  # how the surfer reports an exception, as its answer


def answered(delta) -> bool:
    """Whether the surfer's turn ended with a text answer. The surfer also reports each action as
    an inner TextMessage, so TextMessageTermination would stop after its first action; its
    answer is the last message of its turn, a TextMessage only when it did not act."""
    return surfer_text(delta[-1]) and not delta[-1].content.startswith(SURFER_ERROR)


def surfer_text(message) -> bool:
    from autogen_agentchat.messages import TextMessage
    return isinstance(message, TextMessage) and message.source == SURFER_NAME


def task_text(prompt: str, system_note: str = "") -> str:
    """The task given to the team; a system note goes first, marked as such (the surfer has no
    system prompt of its own)."""
    return f"System note: {system_note}\n\n{prompt}" if system_note else prompt


def model_client(spec: ModelSpec, scenario, context):
    """The surfer's model: a scripted policy reading `context`'s page, or an OpenAI-compatible
    endpoint (through our proxy when the runner set SPILLAGE_MODEL_PROXY)."""
    if spec.scripted:
        from spillage.agents.autogen_scripted import ScriptedModelClient
        from spillage.agents.policies import scripted_policy
        # the surfer's page is the newest of the context (it switches to a popup when one opens)
        return ScriptedModelClient(scripted_policy(spec.name, scenario), lambda: context.pages[-1])
    import openai
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    from spillage.agents.autogen_scripted import TEXT_TOOLS_MODEL_INFO
    options = {"model": spec.name, "base_url": spec.openai_base_url(), "api_key": spec.api_key()}
    transport = model_transport()
    if transport:
        options["http_client"] = openai.DefaultAsyncHttpxClient(**transport)
    try:
        return OpenAIChatCompletionClient(**options)
    except ValueError:  # a model AutoGen does not know by name needs its capabilities spelled out
        return OpenAIChatCompletionClient(**options, model_info=TEXT_TOOLS_MODEL_INFO)


def surfer_class(spec: ModelSpec):
    """MultimodalWebSurfer, or for a scripted model `ScriptedWebSurfer`, which leaves out the waits
    that only give a model's turn time (docs/AGENTS.md). A scripted run never has a page converted
    to Markdown (what `summarize_page` and `answer_question` do), so the surfer is started without
    markitdown, which it treats as optional and which takes most of a second to import."""
    if not spec.scripted:
        from autogen_ext.agents.web_surfer import MultimodalWebSurfer
        return MultimodalWebSurfer
    if "markitdown" not in sys.modules:
        sys.modules["markitdown"] = None  # `import markitdown` raises ImportError
    from spillage.agents.autogen_scripted import ScriptedWebSurfer
    return ScriptedWebSurfer


async def run_agent(args) -> int:
    from autogen_agentchat.conditions import FunctionalTermination
    from autogen_agentchat.messages import MultiModalMessage
    from autogen_agentchat.teams import RoundRobinGroupChat
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    scenario = load_scenario(Path(os.environ["SPILLAGE_SCENARIO_FILE"]))
    spec = parse_model(args.model, args.base_url)
    surfer_type = surfer_class(spec)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            proxy={"server": os.environ["SPILLAGE_PROXY"], "bypass": "<-loopback>"},
            args=["--no-sandbox", f"--ignore-certificate-errors-spki-list={os.environ['SPILLAGE_CA_SPKI']}"],
        )
        try:
            context = await browser.new_context()
            surfer = surfer_type(
                SURFER_NAME, model_client=model_client(spec, scenario, context),
                start_page=os.environ["SPILLAGE_START_URL"], headless=True, to_save_screenshots=False,
                playwright=playwright, context=context,
            )
            team = RoundRobinGroupChat([surfer], max_turns=args.max_steps,
                                       termination_condition=FunctionalTermination(answered))
            try:
                result = await team.run(task=task_text(os.environ["SPILLAGE_PROMPT"],
                                                       os.environ.get("SPILLAGE_SYSTEM_NOTE", "")))
            except Exception as error:  # noqa: BLE001 - say why the run ended, then fail
                kind = ("model error" if is_model_error(error)
                        else "browser error" if caused_by(error, PlaywrightError) else "error")
                return report_outcome(kind, f"{type(error).__name__}: {error}")
        finally:
            await browser.close()
    errors = [m.content for m in result.messages if surfer_text(m) and m.content.startswith(SURFER_ERROR)]
    for error in errors:
        print(error, file=sys.stderr, flush=True)
    done = answered(result.messages)
    actions = sum(isinstance(m, MultiModalMessage) for m in result.messages)
    print(f"spillage agent: {actions} actions, {len(errors)} failed, done={done}, "
          f"stop={result.stop_reason!r}, result={result.messages[-1].content if done else None!r}", flush=True)
    if done:
        return report_outcome("finished", "", actions)
    if "max" in str(result.stop_reason).lower() and "turn" in str(result.stop_reason).lower():
        return report_outcome("step limit", str(result.stop_reason), actions)
    return report_outcome("error", errors[-1] if errors else str(result.stop_reason), actions)


def main(argv: list[str] | None = None) -> int:
    args = agent_arguments("spillage-autogen-agent", __doc__, argv)
    os.environ["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(Path(os.environ["HOME"]) / "playwright-browsers")
    return asyncio.run(run_agent(args))


if __name__ == "__main__":
    exit_at_once(main())
