"""Scenario files: loading both shapes, errors that name file, line and field, and `scenarios check`."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from spillage.scenarios.files import BENCHMARK_DIRS
from spillage.scenarios.files import SCENARIO_DIR
from spillage.scenarios.check import check_paths
from spillage.scenarios.dump import scenario_yaml
from spillage.scenarios.loader import ScenarioError
from spillage.scenarios.loader import load_file
from spillage.scenarios.loader import load_scenario
from spillage.scenarios.loader import resolve_scenario
from spillage.scenarios.files import scenario_files
from spillage.scenarios.matching import find_form
from spillage.scenarios.vocabulary import load_vocabulary

KETTLE = SCENARIO_DIR / "shop" / "kettle.yaml"
KETTLE_TEXT = KETTLE.read_text(encoding="utf-8")
VOCABULARY = load_vocabulary()


def variant(tmp_path: Path, *replacements: tuple[str, str], name: str = "variant.yaml") -> Path:
    """The kettle persona file with each (old, new) replaced once (old must occur), in tmp_path."""
    text = KETTLE_TEXT
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, text: str) -> int:
    """1-based number of the first line of `path` containing `text`."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def problems_in(*paths: Path) -> list[str]:
    return [str(p) for p in check_paths(list(paths), VOCABULARY)[1]]


# --- loading ------------------------------------------------------------------------------


def test_a_persona_file_is_three_scenarios_sharing_their_labels():
    chat, email, generic = load_file(KETTLE)
    assert [s.id for s in (chat, email, generic)] == [
        "shop-kettle-chat", "shop-kettle-email", "shop-kettle-generic"]
    assert {s.persona for s in (chat, email, generic)} == {"shop-kettle"}
    assert chat.attributes == email.attributes == generic.attributes
    assert chat.success == generic.success and chat.success.features == (
        "gooseneck", "variable-temperature", "cordless")
    assert len({chat.prompt, email.prompt, generic.prompt}) == 3
    assert (len(chat.relevant), len(chat.irrelevant)) == (5, 5)


def test_every_prompt_states_every_attribute_and_sanitized_prompts_only_relevant_ones():
    for scenario in load_file(KETTLE):
        for a in scenario.attributes:
            assert find_form(scenario.prompt, (a.text, *a.match)), (scenario.id, a.id)
            assert bool(find_form(scenario.sanitized_prompt, (a.text, *a.match))) == a.relevant, (scenario.id, a.id)


def test_a_single_scenario_file_round_trips_through_the_dump(tmp_path):
    email = load_scenario(KETTLE, "email")
    single = tmp_path / "single.yaml"
    single.write_text(scenario_yaml(email), encoding="utf-8")
    again = load_scenario(single)
    assert again == email
    assert again.file == str(single) and again.line("prompt") == 8  # after the folded request


def test_style_must_be_chosen_for_a_persona_file():
    with pytest.raises(ScenarioError, match=r"choose a style with --style \(chat, email, generic\)"):
        load_scenario(KETTLE)


def test_a_scenario_is_found_by_file_or_by_id():
    assert resolve_scenario(str(KETTLE), "generic").id == "shop-kettle-generic"
    assert resolve_scenario("shop-kettle-email").style == "email"
    with pytest.raises(ScenarioError, match="neither a file nor the id of a scenario"):
        resolve_scenario("shop-no-such-thing")


@pytest.mark.parametrize("old, new, anchor, where, problem", [
    ("task: gooseneck kettle\n", "", "id: shop-kettle", "task", "required field is missing"),
    ("site: shop.test", "site: shop.example", "site:", "site", "'shop.example' is not one of shop.test, bazaar.test"),
    ("  chat:\n", "  letter:\n", "letter:", "styles.letter", "unknown field"),
    ("success:\n", "sucess:\n", "sucess:", "sucess", "unknown field"),
    ("    relevant: true\n", "    relevant: maybe\n", "relevant: maybe", "attributes[0].relevant", "expected true or false, got 'maybe'"),
    ("  max_price: 130", "  max_price: cheap", "max_price:", "success.max_price", "expected a number"),
    ("  max_price: 130", "  max_price: -5", "max_price:", "success.max_price", "expected a positive number"),
    ("    match: [gooseneck]", "    match: gooseneck", "match: gooseneck", "attributes[1].match", "expected a list of non-empty texts"),
    ("    text: cordless\n", "    text: cordless\n    text: again\n", "text: again", "attributes[3].text", "field given twice"),
])
def test_structural_problems_name_line_and_field(tmp_path, old, new, anchor, where, problem):
    path = variant(tmp_path, (old, new))
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    assert (info.value.line, info.value.where, info.value.problem) == (line_of(path, anchor), where, problem)
    assert str(info.value) == f"{path}:{line_of(path, anchor)}: {where}: {problem}"


def test_styles_and_a_single_prompt_together_are_refused(tmp_path):
    path = variant(tmp_path, ("task: gooseneck kettle\n", "task: gooseneck kettle\nstyle: chat\n"))
    with pytest.raises(ScenarioError, match="give either styles or style/prompt/sanitized_prompt"):
        load_file(path)


@pytest.mark.parametrize("content, problem", [
    (b"", "file is empty"),
    (b"id: [unclosed\n", "not valid YAML"),
    (b"- just\n- a list\n", "expected a mapping"),
    (b"id: caf\xe9\n", "not UTF-8 text (byte 7)"),
])
def test_unusable_files_are_one_line_errors(tmp_path, content, problem):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    assert problem in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith(str(path))


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + KETTLE_TEXT.encode())
    assert len(load_file(path)) == 3


# --- checking -----------------------------------------------------------------------------


def test_the_kettle_persona_has_no_problems():
    assert problems_in(KETTLE) == []


@pytest.mark.parametrize("old, new, anchor, expected", [
    ("class: reproductive", "class: fertility", "class: fertility",
     "error: attributes[5].class: unknown class 'fertility'"),
    ("    class: employment", "    class: requirement", "class: requirement\n    match: [laid off",
     "error: attributes[6].class: a requirement must be relevant"),
    ("    concepts: [cordless]", "    concepts: [kosher-kitchen]", "concepts: [kosher-kitchen]\n  - id: budget",
     "error: attributes[3].concepts: relevant attribute 'cordless' has no role in success"),
    ("    concepts: [gooseneck]", "    concepts: [swan-neck]", "concepts: [swan-neck]",
     "error: attributes[1].concepts: concept 'swan-neck' is not in the vocabulary"),
    ("  category: kettles", "  category: teapots", "category: teapots",
     "error: success.category: category 'teapots' is not in the vocabulary"),
    ("  max_price: 130", "  max_price: 130\n  condition: [mint]", "condition: [mint]",
     "error: success.condition: 'mint' is not one of new, refurbished, used, for-parts"),
    ("  - id: pittsburgh", "  - id: adhd", "- id: adhd\n    text: the apartment",
     "error: attributes[9].id: duplicate attribute id 'adhd'"),
])
def test_each_content_rule_gives_one_line_at_the_right_place(tmp_path, old, new, anchor, expected):
    path = variant(tmp_path, (old, new))
    text = path.read_text()
    line = text[:text.index(anchor)].count("\n") + 1
    found = problems_in(path)
    assert any(p.startswith(f"{path}:{line}: {expected}") for p in found), found


def test_irrelevant_attribute_needs_match_or_cues(tmp_path):
    path = variant(tmp_path, ("    match: [adhd, attention deficit]\n    cues: [adderall, ritalin, my meds]\n", ""),
                   ("my ADHD brain", "my tired brain"), ("my ADHD brain", "my tired brain"),
                   ("my ADHD brain", "my tired brain"))
    assert f"{path}:{line_of(path, '- id: adhd')}: error: attributes[8]: irrelevant attribute 'adhd' has neither match nor cues" in problems_in(path)


def test_a_prompt_that_does_not_state_an_attribute(tmp_path):
    path = variant(tmp_path, ("ship it to the apartment here in Pittsburgh", "ship it to the apartment"))
    assert f"{path}:{line_of(path, '  chat:') + 1}: error: styles.chat.prompt: does not state attribute 'pittsburgh' (neither its text nor a match form)" in problems_in(path)


def test_sanitized_prompts_must_drop_irrelevant_and_keep_relevant_attributes(tmp_path):
    path = variant(tmp_path, ("since I mostly drink green tea. Cordless", "since I mostly drink green tea while pregnant. Cordless"),
                   ("Money's the annoying part: I can't go over $130.", "Money's the annoying part."))
    found = problems_in(path)
    generic = line_of(path, "while pregnant")
    assert f"{path}:{generic}: error: styles.generic.sanitized_prompt: still states irrelevant attribute 'pregnant' ('pregnant')" in found
    assert any(p.endswith("error: styles.email.sanitized_prompt: no longer states relevant attribute 'budget'") for p in found)


def test_duplicate_scenario_ids_across_files(tmp_path):
    one = variant(tmp_path, name="one.yaml")
    two = variant(tmp_path, name="two.yaml")
    assert f"{two}:1: error: id: duplicate scenario id 'shop-kettle-chat' (also in {one})" in problems_in(tmp_path)


def test_problems_in_derived_fields_and_guessed_classes_are_warnings(tmp_path):
    path = variant(tmp_path, ("success:\n", "derived: [success, sanitized_prompt]\nsuccess:\n"),
                   ("  category: kettles", "  category: ''"),
                   ("    class: mental health", "    class: mental health\n    guessed: true"),
                   ("since I mostly drink green tea. Cordless", "since I mostly drink green tea while pregnant. Cordless"))
    found = problems_in(path)
    assert found and all(": warning: " in p for p in found), found
    assert any("success.category: empty: the task's success cannot be scored" in p for p in found)
    assert any("attributes[8].class: class 'mental health' was guessed; review it" in p for p in found)
    assert any("relevant attribute 'electric-kettle' has no role in success" in p for p in found)


def test_conflicting_vocabulary_definitions_are_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("concepts:\n  gooseneck: {label: Gooseneck spout, kind: feature}\n")
    (tmp_path / "b.yaml").write_text("concepts:\n  gooseneck: {label: Swan neck, kind: feature}\n"
                                     "  odd: {label: Odd, kind: mood}\n")
    vocabulary = load_vocabulary(tmp_path)
    assert [(Path(f).name, line, where) for f, line, where, _ in vocabulary.problems] == [
        ("b.yaml", 2, "concepts.gooseneck"), ("b.yaml", 3, "concepts.odd")]
    assert "defined differently at" in vocabulary.problems[0][3]


# --- the command --------------------------------------------------------------------------


def spillage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spillage.runner.cli", *args],
                          capture_output=True, text=True, timeout=60)


def test_check_command_prints_problems_and_exits_2(tmp_path):
    path = variant(tmp_path, ("class: reproductive", "class: fertility"))
    done = spillage("scenarios", "check", str(path))
    assert done.returncode == 2
    assert done.stdout == f"{path}:{line_of(path, 'class: fertility')}: error: attributes[5].class: unknown class 'fertility'\n"
    assert done.stderr == "spillage: 3 scenarios checked: 1 errors, 0 warnings\n"


def test_check_command_on_a_missing_path_exits_2(tmp_path):
    done = spillage("scenarios", "check", str(tmp_path / "nope"))
    assert done.returncode == 2 and "no such file or folder" in done.stderr


def test_list_command_shows_a_table():
    done = spillage("scenarios", "list", str(KETTLE))
    assert done.returncode == 0
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["id", "site", "style", "task", "#relevant", "#irrelevant"]
    assert rows[1].split() == ["shop-kettle-email", "shop.test", "email", "gooseneck", "kettle", "5", "5"]


def test_every_scenario_file_matches_the_json_schema(tmp_path):
    validator = jsonschema.Draft202012Validator(json.loads((SCENARIO_DIR / "scenario.schema.json").read_text()))
    single = tmp_path / "single.yaml"
    single.write_text(scenario_yaml(load_scenario(KETTLE, "chat")), encoding="utf-8")
    files = [*scenario_files(BENCHMARK_DIRS), single]
    assert len(files) == 61
    for path in files:
        errors = [f"{path}: {e.json_path}: {e.message}" for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == []
    broken = yaml.safe_load(KETTLE_TEXT)
    broken["attributes"][0]["class"] = "product"
    broken["style"] = "chat"
    assert len(list(validator.iter_errors(broken))) == 2
