"""The AutoGen agent without a browser: tool translation, page state, model info, its venv, specs."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spillage.runner import autogen_venv
from spillage.agents.autogen_actions import UnsupportedAction
from spillage.agents.autogen_actions import View
from spillage.agents.autogen_actions import next_call
from spillage.agents.autogen_actions import page_state
from spillage.agents.autogen_agent import task_text
from spillage.runner.cli import main as spillage_main
from spillage.agents.policies import POLICIES
from spillage.scenarios.loader import resolve_scenario


def item(id, tag, text="", boxes=1, options=(), **attrs):
    """One element as PAGE_STATE_SCRIPT reports it."""
    return {"id": str(id), "tag": tag, "text": text, "boxes": boxes, "options": list(options),
            "attrs": {k.replace("_", "-"): v for k, v in attrs.items()}}


def found(*elements, at_top=True, at_bottom=False):
    return {"elements": list(elements), "atTop": at_top, "atBottom": at_bottom}


HOME = found(
    item(3, "input", type="search", name="k", aria_label="Search products"),
    item(4, "button", "Search", type="submit"),
    item(9, "a", "Shop by need", href="/e/need"),
)
RESULTS = found(
    item(3, "input", type="search", name="k"),
    item(4, "button", "Search", type="submit"),
    item(20, "a", "Gooseneck spout", data_facet="gooseneck", href="/s?f=gooseneck"),
    item(21, "a", "Pregnancy safe (BPA-free)", boxes=2, data_facet="pregnancy-safe", href="/s?f=pregnancy-safe"),
    item(30, "select", options=["Relevance", "Price: high to low", "Price: lowest first"], name="sort"),
    item(31, "button", "Sort", type="submit"),
    at_top=False,
)
PRODUCT = found(
    item(40, "textarea", name="question"),
    item(41, "button", "Ask", type="submit"),
    item(42, "button", "Add to cart", type="submit"),
)


def translate_all(actions, found_page, url="https://shop.test/s?k=kettle"):
    """Every tool call for `actions` on one unchanging page."""
    page, view, calls = page_state(url, found_page), View.of(found_page), []
    while actions:
        call, actions = next_call(actions, page, view)
        calls.append(call)
    return calls


def test_typing_into_a_search_box_drops_the_submit_click_because_input_text_presses_enter():
    calls = translate_all([{"input": {"index": 3, "text": "gooseneck kettle"}}, {"click": {"index": 4}}], HOME)
    assert calls == [("input_text", {"input_field_id": 3, "text_value": "gooseneck kettle"})]
    calls = translate_all([{"input": {"index": 3, "text": "kettle"}}, {"send_keys": {"keys": "Enter"}}], HOME)
    assert calls == [("input_text", {"input_field_id": 3, "text_value": "kettle"})]


def test_a_question_in_a_textarea_keeps_its_submit_click():
    calls = translate_all([{"input": {"index": 40, "text": "Is it safe?"}}, {"click": {"index": 41}}], PRODUCT)
    assert calls == [("input_text", {"input_field_id": 40, "text_value": "Is it safe?"}),
                     ("click", {"target_id": 41})]


def test_a_select_is_chosen_by_typing_its_option_label_then_the_sort_button_is_clicked():
    calls = translate_all([{"select_dropdown": {"index": 30, "text": "Price: lowest first"}},
                           {"click": {"index": 31}}], RESULTS)
    assert calls == [("input_text", {"input_field_id": 30, "text_value": "Price: lowest first"}),
                     ("click", {"target_id": 31})]


def test_a_link_wrapped_on_two_lines_is_activated_from_the_keyboard_others_are_clicked():
    assert translate_all([{"click": {"index": 21}}], RESULTS) == [
        ("input_text", {"input_field_id": 21, "text_value": ""})]
    assert translate_all([{"click": {"index": 20}}], RESULTS) == [("click", {"target_id": 20})]


def test_a_scroll_of_n_pages_is_n_calls_and_stops_at_the_edge():
    page = page_state("https://shop.test/", HOME)
    call, rest = next_call([{"scroll": {"down": True, "pages": 2.0}}, {"wait": {"seconds": 2}}], page, View())
    assert call == ("scroll_down", {})
    assert rest == [{"scroll": {"down": True, "pages": 1}}, {"wait": {"seconds": 2}}]
    call, rest = next_call(rest, page, View(at_top=False, at_bottom=True))
    assert call is None and rest == [{"wait": {"seconds": 2}}]
    assert next_call([{"scroll": {"down": False, "pages": 10.0}}], page, View(at_top=True)) == (None, [])
    assert next_call(rest, page, View()) == (("sleep", {}), [])


def test_done_is_a_plain_text_answer_and_ends_the_step():
    call, rest = next_call([{"done": {"text": "added the product to the cart", "success": True}},
                            {"click": {"index": 4}}], page_state("https://shop.test/cart", HOME))
    assert call == "added the product to the cart" and rest == []


def test_actions_autogen_cannot_do_are_refused_by_name():
    page = page_state("https://shop.test/", HOME)
    with pytest.raises(UnsupportedAction, match="navigate"):
        next_call([{"navigate": {"url": "https://shop.test/"}}], page)
    with pytest.raises(UnsupportedAction, match="no element 99"):
        next_call([{"input": {"index": 99, "text": "x"}}], page)


def test_page_state_gives_the_policies_elements_by_surfer_id_and_select_options():
    page = page_state("https://shop.test/s?k=kettle", RESULTS)
    assert [e.index for e in page.with_attr("data-facet")] == [20, 21]
    sort = page.find("select", name="sort")[0]
    assert sort.attrs["compound_components"] == "(options=Relevance|Price: high to low|Price: lowest first)"
    assert View.of(RESULTS) == View(at_top=False, at_bottom=False, wrapped={21})


def test_policies_drive_autogen_from_the_page_state():
    """The real policies, given our page state, answer steps that translate to surfer tools."""
    scenario = resolve_scenario("shop-kettle-chat", None)
    minimal = POLICIES["minimal"](scenario)
    home = page_state("https://shop.test/", HOME)
    (call,) = translate_all(minimal.next_actions(home), HOME, home.url)
    assert call == ("input_text", {"input_field_id": 3,
                                   "text_value": "electric kettle gooseneck variable temperature cordless"})
    oversharer = POLICIES["oversharer"](scenario)
    oversharer.searched = True
    results = "https://shop.test/s?k=kettle"
    calls = translate_all(oversharer.next_actions(page_state(results, RESULTS)), RESULTS)
    assert calls == [("input_text", {"input_field_id": 21, "text_value": ""})]  # "Pregnancy safe", wrapped
    minimal.searched = True
    minimal.clicked_facets = set(scenario.success.features)
    calls = translate_all(minimal.next_actions(page_state(results, RESULTS)), RESULTS)
    assert calls == [("input_text", {"input_field_id": 30, "text_value": "Price: lowest first"}),
                     ("click", {"target_id": 31})]


def test_the_system_note_comes_first_in_the_task():
    assert task_text("Find a kettle.") == "Find a kettle."
    assert task_text("Find a kettle.", "Share only what the task needs.") == (
        "System note: Share only what the task needs.\n\nFind a kettle.")


# --- AutoGen's venv ---------------------------------------------------------------------------


def test_the_venv_sits_next_to_ours_unless_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv("SPILLAGE_AUTOGEN_VENV", raising=False)
    assert autogen_venv.venv_dir() == Path(sys.prefix).parent / ".venv-autogen"
    monkeypatch.setenv("SPILLAGE_AUTOGEN_VENV", str(tmp_path / "ag"))
    assert autogen_venv.venv_dir() == tmp_path / "ag"


def test_a_complete_venv_is_used_and_a_half_made_one_is_rebuilt(monkeypatch, tmp_path):
    venv = tmp_path / "ag"
    monkeypatch.setenv("SPILLAGE_AUTOGEN_VENV", str(venv))
    built = []
    monkeypatch.setattr(autogen_venv, "create", lambda path, log: built.append(path))
    (venv / "bin").mkdir(parents=True)
    assert autogen_venv.autogen_python() == venv / "bin" / "python"
    assert built == [venv]  # no stamp: half made
    (venv / autogen_venv.STAMP).write_text("autogen-agentchat==0.4\n")
    autogen_venv.autogen_python()
    assert built == [venv, venv]  # made for other requirements
    (venv / autogen_venv.STAMP).write_text(autogen_venv.stamp_text())
    autogen_venv.autogen_python()
    assert built == [venv, venv]


def test_two_runs_at_once_create_the_venv_once(monkeypatch, tmp_path):
    venv = tmp_path / "ag"
    monkeypatch.setenv("SPILLAGE_AUTOGEN_VENV", str(venv))
    built = []

    def create(path, log):
        built.append(path)
        time.sleep(0.3)  # the other run arrives while this one installs
        path.mkdir(parents=True)
        (path / autogen_venv.STAMP).write_text(autogen_venv.stamp_text())

    monkeypatch.setattr(autogen_venv, "create", create)
    runs = [threading.Thread(target=autogen_venv.autogen_python) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert built == [venv]


def test_a_failed_step_is_one_line_naming_the_step_and_the_log(tmp_path):
    log = tmp_path / autogen_venv.LOG
    with pytest.raises(autogen_venv.AutogenVenvError) as failed:
        autogen_venv.run_step("installing AutoGen", [sys.executable, "-c", "import sys; sys.exit('no such package')"], log)
    message = str(failed.value)
    assert "\n" not in message
    assert "installing AutoGen" in message and "no such package" in message and str(log) in message


def test_a_bad_model_spec_fails_before_any_venv_is_made(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SPILLAGE_AUTOGEN_VENV", str(tmp_path / "never"))
    code = spillage_main(["run", "--scenario", "shop-kettle-chat", "--agent", "autogen",
                          "--model", "scripted:nosuch", "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    assert "no scripted policy 'nosuch'" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


# --- inside AutoGen's venv ---------------------------------------------------------------------

def in_autogen_venv(code: str, folder: Path):
    """What `code`, run by AutoGen's venv in `folder`, prints as JSON."""
    python = autogen_venv.venv_dir() / "bin" / "python"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=folder,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(folder)}, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


AUTOGEN_CHECK = """
import json, os
from autogen_ext.agents.web_surfer import MultimodalWebSurfer
from spillage.agents.autogen_agent import model_client
from spillage.agents.model_spec import parse_model
from spillage.scenarios.loader import resolve_scenario
scenario = resolve_scenario("shop-kettle-chat", None)
scripted = model_client(parse_model("scripted:minimal"), scenario, None)
MultimodalWebSurfer("web_surfer", model_client=scripted)  # refuses a model without function calling
local = model_client(parse_model("openai-compatible:http://127.0.0.1:9/v1#qwen2.5-7b"), scenario, None)
known = model_client(parse_model("openai:gpt-4o"), scenario, None)
print(json.dumps([scripted.model_info, local.model_info, known.model_info["family"]]))
"""


@pytest.mark.needs_tool("autogen")
def test_models_tell_the_surfer_they_call_tools_on_text(tmp_path):
    scripted, local, known_family = in_autogen_venv(AUTOGEN_CHECK, tmp_path)
    text_tools = {"vision": False, "function_calling": True, "json_output": False,
                  "family": "unknown", "structured_output": False}
    assert scripted == text_tools and local == text_tools
    assert known_family == "gpt-4o"


PACING_CHECK = """
import asyncio, json, time
from spillage.agents.autogen_agent import model_client, surfer_class
from spillage.agents.autogen_scripted import ScriptedPlaywrightController
from spillage.agents.model_spec import parse_model
from spillage.scenarios.loader import resolve_scenario

class Request:
    frame = "main"
    def is_navigation_request(self):
        return True

class Page:  # what the controller uses of a Playwright page
    main_frame = "main"
    def __init__(self):
        self.handlers, self.calls = {}, []
    def on(self, event, handler):
        self.handlers[event] = handler
    async def wait_for_timeout(self, ms):
        self.calls.append(["sleep", ms])
    async def wait_for_load_state(self):
        self.calls.append(["load"])

async def tool(controller, page, name, sleeps=1, navigates_after=None):
    page.calls = []
    controller.begin(page, name)
    if navigates_after is not None:
        page.handlers["request"](Request())
        asyncio.get_running_loop().call_later(navigates_after, page.handlers["framenavigated"], "main")
    began = time.monotonic()
    for _ in range(sleeps):
        await controller.sleep(page, 3)  # as the surfer calls it
    return [page.calls, time.monotonic() - began]

async def main():
    controller, page = ScriptedPlaywrightController(), Page()
    print(json.dumps({
        "scroll": await tool(controller, page, "scroll_down"),
        "sleep": await tool(controller, page, "sleep", sleeps=2),
        "click": await tool(controller, page, "click", navigates_after=0.3),
        "input": await tool(controller, page, "input_text"),
    }))

surfer = surfer_class(parse_model("scripted:minimal"))
scripted = model_client(parse_model("scripted:minimal"), resolve_scenario("shop-kettle-chat", None), None)
assert type(surfer("web_surfer", model_client=scripted)._playwright_controller) is ScriptedPlaywrightController
asyncio.run(main())
"""


@pytest.mark.needs_tool("autogen")
def test_a_scripted_surfer_waits_for_the_pages_it_loads_instead_of_3_s_but_not_after_scrolls_or_pauses(tmp_path):
    paced = in_autogen_venv(PACING_CHECK, tmp_path)
    assert paced["scroll"][0] == [["sleep", 3000]]  # what a scroll shows stays on screen as long as before
    assert paced["sleep"][0] == [["sleep", 3000]] * 2  # a pause (the sleep tool) too
    calls, took = paced["click"]
    assert calls == [["load"]] and 0.3 <= took < 2.5  # the page the click asked for: committed, then loaded
    calls, took = paced["input"]
    assert calls == [] and took < 2.5  # nothing was loaded: a short grace, no 3 s
