"""Read the page as browser-use shows it to its model: the current URL and the indexed elements."""

import re
from dataclasses import dataclass
from dataclasses import field

# browser-use writes an interactive element as `[12]<a data-facet=x />`, indented with tabs by
# nesting depth, prefixed by `|SHADOW(open)|` for shadow hosts, `*` when new since the last
# step and `|scroll element` for scrollable ones (then followed by scroll info in brackets).
_ELEMENT = re.compile(
    r"^(?P<indent>\t*)(?:\|SHADOW\((?:open|closed)\)\|)?\*?(?:\|scroll element)?"
    r"\[(?P<index>\d+)\]<(?P<tag>[\w-]+)(?P<attrs>.*?)\s*/>(?:\s*\(.*\))?\s*$"
)
_ATTR = re.compile(r"(?:^|(?<=\s))([\w-]+)=")
_TAB = re.compile(r"^Tab (?P<id>\w+): (?P<url>\S+)")


@dataclass
class Element:
    """One interactive element: its index for actions, tag, attributes and the text inside it."""

    index: int
    tag: str
    attrs: dict[str, str]
    depth: int
    text: str = ""

    def label(self) -> str:
        """What a person would read as this element's name."""
        return self.text or self.attrs.get("aria-label", "") or self.attrs.get("value", "")


@dataclass
class PageState:
    """The current URL and the interactive elements of the page, in document order, and `lines`: the
    elements and the page's text outside them (what a model reads between them: titles, prices), in
    document order."""

    url: str = ""
    elements: list[Element] = field(default_factory=list)
    lines: list[Element | str] = field(default_factory=list)

    def find(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Elements with this tag (any if None) whose attributes have these values."""
        return [
            e for e in self.elements
            if (tag is None or e.tag == tag)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def with_attr(self, name: str) -> list[Element]:
        """Elements that carry attribute `name`."""
        return [e for e in self.elements if name in e.attrs]


def parse_attrs(text: str) -> dict[str, str]:
    """`type=search name=k aria-label=Search products` → dict (values may contain spaces)."""
    marks = list(_ATTR.finditer(text))
    attrs = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        attrs[m.group(1)] = text[m.end():end].strip()
    return attrs


def parse_browser_state(message: str) -> PageState:
    """Parse the `<browser_state>` block of a browser-use step message."""
    start = message.rfind("<browser_state>")
    end = message.find("</browser_state>", start)
    if start < 0:
        return PageState()
    block = message[start:end if end > 0 else None]
    state = PageState()
    current_tab = re.search(r"^Current tab: (\w+)", block, re.MULTILINE)
    current: Element | None = None
    for line in block.splitlines():
        tab = _TAB.match(line)
        if tab and current_tab and tab.group("id") == current_tab.group(1):
            state.url = tab.group("url")
            continue
        m = _ELEMENT.match(line)
        if m:
            current = Element(int(m.group("index")), m.group("tag"), parse_attrs(m.group("attrs")),
                              len(m.group("indent")))
            state.elements.append(current)
            state.lines.append(current)
        elif current and line.startswith("\t" * (current.depth + 1)) and line.strip():
            current.text = f"{current.text} {line.strip()}".strip()
        elif current and line.strip():
            state.lines.append(line.strip())
    return state
