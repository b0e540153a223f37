"""Scripted policies: deterministic stand-ins for an LLM that drive browser-use on our sites.

A policy sees what the model would see (the parsed browser state) and answers with
browser-use actions. It knows the scenario's labels, which a real agent never does: that is
what lets `oversharer` leak on purpose and `minimal` stay clean, so the auditor can be tested
against known ground truth.
"""

import functools
from urllib.parse import urlsplit

from spillage.runner.browser_state import Element
from spillage.runner.browser_state import PageState
from spillage.scenarios.matching import find_form
from spillage.scenarios.model import Attribute
from spillage.scenarios.model import Scenario
from spillage.scenarios.vocabulary import load_vocabulary

MAX_STEPS = 12
TASK_CLASSES = ("requirement",)  # relevant attributes that describe the product itself


class ScriptedPolicy:
    """Search, pick a facet, open a product, add it to the cart, stop: one step per call."""

    name = "scripted"

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.steps = 0
        self.searched = False
        self.faceted = False

    def query(self) -> str:
        """The text this policy types into the search box."""
        return " ".join(a.match[0] for a in self.scenario.relevant if a.cls in TASK_CLASSES)

    def facet_attributes(self) -> tuple[Attribute, ...]:
        """Attributes whose facets this policy wants to click, in order of preference."""
        return self.scenario.relevant

    def next_actions(self, page: PageState) -> list[dict]:
        """browser-use actions for this step, given the page."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            return [done("gave up: step limit reached", False)]
        path = urlsplit(page.url).path
        if not self.searched:
            return self.search(page)
        if path == "/s" and not self.faceted:
            self.faceted = True
            facet = self.pick_facet(page)
            if facet:
                return [{"click": {"index": facet.index}}]
        if path == "/s":
            product = self.pick_product(page)
            if product:
                return [{"click": {"index": product.index}}]
            return [done("no products found", False)]
        if path.startswith("/p/"):
            buttons = [e for e in page.find("button") if e.label().lower() == "add to cart"]
            if buttons:
                return [{"click": {"index": buttons[0].index}}]
        if path == "/cart":
            return [done("added the product to the cart", True)]
        return [done(f"lost on {page.url}", False)]

    def search(self, page: PageState) -> list[dict]:
        boxes = page.find("input", type="search") or page.find("input", name="k")
        if not boxes:
            return [done(f"no search box on {page.url}", False)]
        self.searched = True
        actions = [{"input": {"index": boxes[0].index, "text": self.query()}}]
        submit = [e for e in page.find("button", type="submit") if e.label().lower() == "search"]
        actions.append({"click": {"index": submit[0].index}} if submit else {"send_keys": {"keys": "Enter"}})
        return actions

    def pick_product(self, page: PageState) -> Element | None:
        """The first product link that is neither an ad nor one this policy avoids."""
        links = [e for e in page.with_attr("data-product") if "data-sponsored" not in e.attrs]
        return next((e for e in links if not self.avoids(e)), None)

    def avoids(self, element: Element) -> bool:
        """Whether this policy would rather not choose `element`."""
        return False

    def pick_facet(self, page: PageState) -> Element | None:
        facets = {e.attrs["data-facet"]: e for e in page.with_attr("data-facet")}
        for attribute in self.facet_attributes():
            for concept in attribute.concepts:
                if concept in facets:
                    return facets[concept]
        return None


class Minimal(ScriptedPolicy):
    """Uses only what the task needs: relevant words in the search, relevant facets, and no
    product whose name states an irrelevant attribute or carries one of its concepts."""

    name = "minimal"

    def avoids(self, element: Element) -> bool:
        labels = concept_labels()
        for attribute in self.scenario.irrelevant:
            forms = (*attribute.match, *(labels[c] for c in attribute.concepts if c in labels))
            if find_form(element.label(), forms):
                return True
        return False


class Oversharer(ScriptedPolicy):
    """Adds irrelevant attributes to its search and prefers a facet that names one."""

    name = "oversharer"

    def query(self) -> str:
        """The relevant words plus the first two irrelevant attributes, stated verbatim."""
        leaked = [a.match[0] for a in self.scenario.irrelevant[:2]]
        return " ".join([super().query(), *leaked])

    def facet_attributes(self) -> tuple[Attribute, ...]:
        """Any facet that names an irrelevant attribute, before the relevant ones."""
        return (*self.scenario.irrelevant, *self.scenario.relevant)


POLICIES = {p.name: p for p in (Minimal, Oversharer)}


@functools.cache
def concept_labels() -> dict[str, str]:
    """The label sites show for each vocabulary concept."""
    return {slug: term.label for slug, term in load_vocabulary().concepts.items()}


def done(text: str, success: bool) -> dict:
    """browser-use's `done` action."""
    return {"done": {"text": text, "success": success}}
