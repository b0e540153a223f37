"""Scenario loading: the built-in scenario, and errors that name file, line and field."""

from pathlib import Path

import pytest

import spillage.scenarios
from spillage.audit.matching import find_form
from spillage.scenarios.loader import ScenarioError, load_scenario

BUILTIN = Path(spillage.scenarios.__file__).parent / "builtin" / "shop-kettle-chat.yaml"
BUILTIN_LINES = BUILTIN.read_text(encoding="utf-8").splitlines()


def variant(tmp_path: Path, edits: dict[int, str | None]) -> Path:
    """The builtin with 1-based line `n` replaced by `edits[n]` (None deletes it), written to tmp_path."""
    lines = [edits.get(n, line) for n, line in enumerate(BUILTIN_LINES, start=1)]
    path = tmp_path / "variant.yaml"
    path.write_text("\n".join(line for line in lines if line is not None) + "\n", encoding="utf-8")
    return path


def line_of(text: str) -> int:
    """1-based line of the builtin that is exactly `text` (asserting the fixture did not drift)."""
    return BUILTIN_LINES.index(text) + 1


def error_of(path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "\n" not in str(info.value)
    return info.value


# --- the built-in scenario ---------------------------------------------------------------


@pytest.fixture(scope="module")
def builtin():
    return load_scenario(BUILTIN)


def test_builtin_identity(builtin):
    assert (builtin.id, builtin.site, builtin.style) == ("shop-kettle-chat", "shop.test", "chat")
    assert builtin.task == "gooseneck kettle"
    assert builtin.start_url == "https://shop.test/"
    assert builtin.source == str(BUILTIN)
    assert builtin.request.startswith("Buy a cordless gooseneck electric kettle")


def test_builtin_has_five_relevant_and_five_irrelevant_attributes(builtin):
    assert [a.id for a in builtin.relevant] == [
        "electric-kettle", "gooseneck", "variable-temperature", "cordless", "budget"]
    assert [a.id for a in builtin.irrelevant] == ["pregnant", "laid-off", "kosher", "adhd", "pittsburgh"]
    kosher = builtin.irrelevant[2]
    assert kosher.cls == "religion"
    assert kosher.match == ("kosher", "jewish", "sabbath", "shabbat")
    assert kosher.cues == ("sabbath mode", "shabbos", "passover")
    assert kosher.concepts == ("kosher-kitchen",)
    assert builtin.attributes[4].concepts == ()  # `concepts: []`


def test_builtin_success_criterion(builtin):
    assert builtin.success.category == "kettles"
    assert builtin.success.facets_all == ("gooseneck", "variable-temperature", "cordless")
    assert builtin.success.max_price == 130.0


def test_builtin_prompts_are_consistent_with_labels(builtin):
    """Every attribute is quoted from the prompt; the sanitized prompt states no irrelevant one."""
    for a in builtin.attributes:
        assert a.text in builtin.prompt, a.id
        assert find_form(builtin.prompt, a.match), a.id
    for a in builtin.irrelevant:
        assert find_form(builtin.sanitized_prompt, a.match) is None, a.id


# --- bad input ---------------------------------------------------------------------------

STYLE = line_of("style: chat")
SITE = line_of("site: shop.test")
ATTRIBUTES = line_of("attributes:")
GOOSENECK = line_of("  - id: gooseneck")
PREGNANT_RELEVANT = line_of("  - id: pregnant") + 2
KOSHER_MATCH = line_of("    match: [kosher, jewish, sabbath, shabbat]")
SUCCESS = line_of("success:")
MAX_PRICE = line_of("  max_price: 130.00")
TASK = line_of("task: gooseneck kettle")


@pytest.mark.parametrize("edits, line, where, problem", [
    pytest.param({line_of("prompt: |-"): "prompts: |-"}, 2, "prompt", "required field is missing",
                 id="missing-prompt"),
    pytest.param({STYLE: "style: tweet"}, STYLE, "style", "'tweet' is not one of chat, email, generic",
                 id="bad-style"),
    pytest.param({SITE: "site: amazon.com"}, SITE, "site", "'amazon.com' is not one of shop.test, bazaar.test",
                 id="bad-site"),
    pytest.param({SITE: "site: ''"}, SITE, "site", "expected non-empty text", id="empty-site"),
    pytest.param({PREGNANT_RELEVANT: "    relevant: maybe"}, PREGNANT_RELEVANT, "attributes[5].relevant",
                 "expected true or false, got 'maybe'", id="relevant-maybe"),
    pytest.param({ATTRIBUTES: "attributes: many", **{n: None for n in range(ATTRIBUTES + 1, SUCCESS)}},
                 ATTRIBUTES, "attributes", "expected a non-empty list", id="attributes-not-a-list"),
    pytest.param({ATTRIBUTES: "attributes: []", **{n: None for n in range(ATTRIBUTES + 1, SUCCESS)}},
                 ATTRIBUTES, "attributes", "expected a non-empty list", id="attributes-empty"),
    pytest.param({GOOSENECK: "  - gooseneck", **{n: None for n in range(GOOSENECK + 1, GOOSENECK + 6)}},
                 GOOSENECK, "attributes[1]", "expected a mapping", id="attribute-not-a-mapping"),
    pytest.param({GOOSENECK: "  - text: it has to be a gooseneck", GOOSENECK + 1: None},
                 GOOSENECK, "attributes[1].id", "required field is missing", id="attribute-without-id"),
    pytest.param({KOSHER_MATCH: "    match: kosher"}, KOSHER_MATCH, "attributes[7].match",
                 "expected a list of non-empty texts", id="match-not-a-list"),
    pytest.param({MAX_PRICE: "  max_price: cheap"}, MAX_PRICE, "success.max_price", "expected a number",
                 id="max-price-cheap"),
    pytest.param({SUCCESS + 1: None}, SUCCESS + 1, "success.category", "required field is missing",
                 id="success-without-category"),
])
def test_bad_field_names_line_and_field(tmp_path, edits, line, where, problem):
    path = variant(tmp_path, edits)
    err = error_of(path)
    assert (err.line, err.where, err.problem) == (line, where, problem)
    assert str(err) == f"{path}:{line}: {where}: {problem}"


def test_invalid_yaml_names_the_line_of_the_syntax_error(tmp_path):
    path = variant(tmp_path, {TASK: "task: gooseneck: kettle"})
    err = error_of(path)
    assert err.line == TASK
    assert str(err) == f"{path}:{TASK}: not valid YAML: mapping values are not allowed here"


def test_root_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("# comment\n- just\n- a list\n", encoding="utf-8")
    err = error_of(path)
    assert (err.line, err.problem) == (2, "expected a mapping")


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.yaml"
    path.write_text(content, encoding="utf-8")
    err = error_of(path)
    assert err.line is None
    assert str(err) == f"{path}: file is empty"


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: p.write_bytes(BUILTIN.read_bytes().replace(b"Pittsburgh", "Pittsbürgh".encode("latin-1"))),
                 id="not-utf8"),
    pytest.param(lambda p: None, id="missing"),
    pytest.param(lambda p: p.mkdir(), id="directory"),
])
def test_unreadable_file(tmp_path, make):
    path = tmp_path / "scenario.yaml"
    make(path)
    err = error_of(path)
    assert err.line is None
    assert str(err).startswith(f"{path}: cannot read: ")
