"""Browser-use actions (what the scripted policies answer) as MultimodalWebSurfer tool calls,
and the page state the policies read, taken from the elements the surfer labelled.

No AutoGen import: the translation is tested in the main venv. docs/AUTOGEN.md describes it.
"""

import json
from dataclasses import dataclass
from dataclasses import field

from spillage.agents.browser_state import Element
from spillage.agents.browser_state import PageState

KEPT_ATTRIBUTES = ("type", "name", "aria-label", "value", "href")
EDGE_PIXELS = 5  # the surfer offers scroll_up/scroll_down only this far from the page's edges

# For every visible element the surfer labelled: id, tag, the attributes the policies read,
# its text, a select's option labels, how many boxes it is laid out in (a link that wraps has
# two); and whether the viewport is at the top or bottom.
PAGE_STATE_SCRIPT = """() => {
  const kept = new Set(%s);
  const elements = Array.from(document.querySelectorAll("[__elementId]"))
    .filter(e => e.getClientRects().length > 0)
    .map(e => ({
      id: e.getAttribute("__elementId"),
      tag: e.tagName.toLowerCase(),
      attrs: Object.fromEntries(Array.from(e.attributes)
        .filter(a => a.name.startsWith("data-") || kept.has(a.name)).map(a => [a.name, a.value])),
      text: e.tagName === "SELECT" ? "" : (e.innerText || "").replace(/\\s+/g, " ").trim(),
      options: e.tagName === "SELECT" ? Array.from(e.options, o => o.label) : [],
      boxes: e.getClientRects().length,
    }));
  const top = window.scrollY, bottom = top + window.innerHeight;
  return {elements, atTop: top <= %d,
          atBottom: bottom + %d >= document.documentElement.scrollHeight};
}""" % (json.dumps(KEPT_ATTRIBUTES), EDGE_PIXELS, EDGE_PIXELS)


@dataclass
class View:
    """What the page looks like beyond the PageState: viewport at its top or bottom, and the
    ids of elements that wrap onto several lines."""

    at_top: bool = True
    at_bottom: bool = False
    wrapped: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, found: dict) -> "View":
        """The View of PAGE_STATE_SCRIPT's result."""
        return cls(found["atTop"], found["atBottom"],
                   {int(item["id"]) for item in found["elements"] if item["boxes"] > 1})


class UnsupportedAction(ValueError):
    """A browser-use action AutoGen's surfer has no tool for."""


def page_state(url: str, found: dict) -> PageState:
    """The PageState of PAGE_STATE_SCRIPT's result. A select's options are given the way
    browser-use shows them (`compound_components`), which is where the policies read them."""
    elements = []
    for item in found["elements"]:
        attrs = dict(item["attrs"])
        if item["options"]:
            attrs["compound_components"] = f"(options={'|'.join(item['options'])})"
        elements.append(Element(int(item["id"]), item["tag"], attrs, 0, item["text"]))
    return PageState(url, elements)


def next_call(actions: list[dict], page: PageState,
              view: View | None = None) -> tuple[str | tuple[str, dict] | None, list[dict]]:
    """Translate the first of `actions` (browser-use action dicts): a tool call (name, arguments),
    the final answer (str), or None when it needs no call; and the actions left after it.

    `input_text` presses Enter after typing, which submits a search form: a click on a submit
    button (or an Enter) right after typing into anything but a textarea is dropped. A select is
    chosen by typing its option's label into it (Chromium's type-ahead). The surfer clicks the
    middle of an element's bounding box, which misses a link wrapped onto two lines: such a
    link is activated from the keyboard instead (`input_text` of nothing: focus, then Enter).
    A scroll of N pages is one call per page, stopping at the page's edge.
    """
    view = view or View()
    action, rest = actions[0], actions[1:]
    (name, params), = action.items()
    if name == "done":
        return params["text"], []
    if name == "click":
        if params["index"] in view.wrapped and element(page, params["index"]).tag == "a":
            return ("input_text", {"input_field_id": params["index"], "text_value": ""}), rest
        return ("click", {"target_id": params["index"]}), rest
    if name in ("input", "select_dropdown"):
        target = element(page, params["index"])
        if name == "input" and target.tag != "textarea" and rest and submits(rest[0], page):
            rest = rest[1:]
        return ("input_text", {"input_field_id": params["index"], "text_value": params["text"]}), rest
    if name == "scroll":
        down = params.get("down", True)
        if view.at_bottom if down else view.at_top:
            return None, rest
        pages = round(params.get("pages", 1.0))
        if pages > 1:
            rest = [{"scroll": {"down": down, "pages": pages - 1}}, *rest]
        return ("scroll_down" if down else "scroll_up", {}), rest
    if name == "go_back":
        return ("history_back", {}), rest
    if name == "wait":
        return ("sleep", {}), rest  # the surfer always sleeps 3 s
    raise UnsupportedAction(f"no AutoGen tool for browser-use action {action!r}")


def element(page: PageState, index: int) -> Element:
    found = next((e for e in page.elements if e.index == index), None)
    if found is None:
        raise UnsupportedAction(f"no element {index} on {page.url}")
    return found


def submits(action: dict, page: PageState) -> bool:
    """Whether `action` submits a form: Enter, or a click on a submit button."""
    if "send_keys" in action:
        return action["send_keys"]["keys"] == "Enter"
    if "click" in action:
        target = element(page, action["click"]["index"])
        return target.tag == "button" and target.attrs.get("type") == "submit"
    return False
