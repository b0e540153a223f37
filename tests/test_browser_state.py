"""Parsing the `<browser_state>` block browser-use shows its model (real captured fixtures)."""

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spillage.agents.browser_state import Element, PageState, parse_attrs, parse_browser_state

FIXTURES = Path(__file__).parent / "fixtures" / "browser_states"


def fixture_text(step: int) -> str:
    return (FIXTURES / f"step{step}.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pages() -> dict[int, PageState]:
    """Step 1 home page, 2 search results, 3 filtered results, 4 product page."""
    return {step: parse_browser_state(fixture_text(step)) for step in (1, 2, 3, 4)}


def by_index(page: PageState, index: int) -> Element:
    (element,) = [e for e in page.elements if e.index == index]
    return element


def indices(elements: list[Element]) -> list[int]:
    return [e.index for e in elements]


# --- URL ---------------------------------------------------------------------------------


def test_url_is_the_current_tab(pages):
    assert pages[1].url == "https://shop.test/"
    assert pages[4].url == "https://shop.test/p/109"


def test_abbreviated_url_keeps_its_path(pages):
    """browser-use shortens long URLs with '...'; the path survives."""
    assert pages[2].url == "https://shop.test/s?k=electric+kettle+goosen...598bdd0"
    assert urlsplit(pages[2].url).path == "/s"


def test_current_tab_chosen_among_several():
    text = fixture_text(1).replace(
        "Tab AAAB: https://shop.test/ - shop.test",
        "Tab ZZZZ: https://shop.test/p/101 - Arden\nTab AAAB: https://shop.test/cart - Cart")
    assert parse_browser_state(text).url == "https://shop.test/cart"


@pytest.mark.parametrize("message", ["", "Your task: buy a kettle.", "<agent_history>step 1</agent_history>"])
def test_message_without_browser_state_gives_empty_page(message):
    page = parse_browser_state(message)
    assert page == PageState()
    assert (page.url, page.elements) == ("", [])


def test_newest_of_several_blocks_wins():
    page = parse_browser_state(fixture_text(1) + "\n" + fixture_text(4))
    assert page.url == "https://shop.test/p/109"
    assert 548 in indices(page.elements) and 27 not in indices(page.elements)


# --- elements ----------------------------------------------------------------------------


def test_home_page_elements_in_document_order(pages):
    assert indices(pages[1].elements) == [27, 3, 4, 32, 36, 51, 56, 69, 76, 83, 90]
    assert [e.tag for e in pages[1].elements[:4]] == ["a", "form", "input", "button"]
    assert [e.depth for e in pages[1].elements[:5]] == [0, 0, 1, 1, 0]


def test_attribute_values_may_contain_spaces(pages):
    box = by_index(pages[1], 4)
    assert box.attrs == {"type": "search", "name": "k", "aria-label": "Search products",
                         "placeholder": "Search"}
    assert box.label() == "Search products"  # no text: falls back to aria-label


def test_new_element_markers_are_parsed(pages):
    """`*[n]` marks elements new since the last step; they are elements like any other."""
    facets = pages[2].with_attr("data-facet")
    assert indices(facets) == [173, 178, 183, 188, 193, 198, 203, 208, 213]
    assert by_index(pages[2], 188).attrs == {"data-facet": "kosher-kitchen"}
    assert by_index(pages[2], 188).text == "Kosher kitchen (Sabbath mode) (2)"


def test_shadow_prefix_without_new_marker(pages):
    assert by_index(pages[1], 4).tag == "input"


@pytest.mark.parametrize("step, index, value", [
    (2, 122, "electric kettle gooseneck variable temperature cordless pregnant kosher"),
    (4, 456, None),
])
def test_shadow_prefix_with_new_marker(pages, step, index, value):
    box = by_index(pages[step], index)
    assert (box.tag, box.attrs["type"], box.attrs.get("value")) == ("input", "search", value)
    form = by_index(pages[step], index - 1)
    assert form.tag == "form" and form.text == ""


def test_attribute_value_containing_key_value_pairs():
    attrs = parse_attrs("type=number id=qty name=qty value=1 min=1 max=99 compound_components="
                        "(name=Increment,role=button),(name=Value,role=textbox,min=1.0,max=99.0)")
    assert (attrs["name"], attrs["min"], attrs["max"]) == ("qty", "1", "99")
    assert attrs["compound_components"].startswith("(name=Increment")


# --- text --------------------------------------------------------------------------------


def test_text_children_attach_to_their_element(pages):
    assert by_index(pages[1], 32).text == "Search"  # nested two tabs under the form
    assert by_index(pages[1], 27).text == "Copperleaf Home"
    assert by_index(pages[1], 3).text == ""  # its children are elements, not text
    assert by_index(pages[4], 548).label() == "Add to cart"
    assert by_index(pages[3], 382).text == "Remove filter: Pregnancy safe (BPA-free)"


def test_unindented_page_text_belongs_to_no_element(pages):
    texts = " ".join(e.text for e in pages[1].elements)
    for loose in ("$59.00", "Shop by category", "Featured products"):
        assert loose not in texts


def test_multiline_text_is_joined():
    text = "<browser_state>\n[7]<button />\n\tAdd\n\t\tto cart\n\nSome page text\n</browser_state>"
    assert by_index(parse_browser_state(text), 7).text == "Add to cart"


# --- queries -----------------------------------------------------------------------------


def test_find_by_tag_and_attributes(pages):
    assert indices(pages[1].find("button", type="submit")) == [32]
    assert indices(pages[1].find(aria_label="Search products")) == [4]  # _ → -
    assert indices(pages[2].find("a", data_product="106")) == [229]
    assert pages[2].find("button", data_product="106") == []
    assert indices(pages[1].find("form")) == [3]


def test_with_attr(pages):
    assert indices(pages[1].with_attr("data-product")) == [69, 76, 83, 90]
    assert [e.attrs["data-facet"] for e in pages[3].with_attr("data-facet")] == [
        "pregnancy-safe", "variable-temperature", "cordless", "under-40", "glass"]
    assert pages[4].with_attr("data-facet") == []


def test_label_prefers_text_then_aria_label_then_value():
    assert Element(1, "a", {"aria-label": "x", "value": "y"}, 0, "text").label() == "text"
    assert Element(1, "input", {"aria-label": "x", "value": "y"}, 0).label() == "x"
    assert Element(1, "input", {"value": "y"}, 0).label() == "y"
    assert Element(1, "input", {}, 0).label() == ""
