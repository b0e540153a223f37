"""The benchmark itself: 180 scenarios that pass every check, to the paper's size and better annotated."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from spillage.scenarios.files import BENCHMARK_DIRS
from spillage.scenarios.benchmark import personas
from spillage.scenarios.benchmark import stats_markdown
from spillage.scenarios.check import check_paths
from spillage.scenarios.model import SENSITIVE_CLASSES
from spillage.scenarios.model import STYLES
from spillage.scenarios.vocabulary import load_vocabulary

ROOT = Path(__file__).resolve().parents[1]
PAPER_DATA = ROOT.parent / "shared" / "data" / "spillage" / "shopping_Amazon_chat.json"


@pytest.fixture(scope="module")
def checked():
    return check_paths(BENCHMARK_DIRS, load_vocabulary())


@pytest.fixture(scope="module")
def scenarios(checked):
    return checked[0]


def test_every_file_passes_the_check_without_warnings(checked):
    assert [str(p) for p in checked[1]] == []


def test_thirty_personas_per_site_each_in_three_styles(scenarios):
    assert len(scenarios) == 180
    people = personas(scenarios)
    assert Counter(p.site for p in people) == {"shop.test": 30, "bazaar.test": 30}
    styles = Counter(s.persona for s in scenarios)
    assert set(styles.values()) == {3}
    assert Counter(s.style for s in scenarios) == {style: 60 for style in STYLES}


def test_each_persona_has_at_least_four_relevant_and_five_irrelevant_attributes(scenarios):
    thin = [(p.persona, len(p.relevant), len(p.irrelevant)) for p in personas(scenarios)
            if len(p.relevant) < 4 or len(p.irrelevant) < 5]
    assert thin == []


def test_every_sensitive_class_is_irrelevant_at_least_five_times(scenarios):
    counts = Counter(a.cls for p in personas(scenarios) for a in p.irrelevant)
    assert {c: counts[c] for c in SENSITIVE_CLASSES if counts[c] < 5} == {}


def test_irrelevant_attributes_have_forms_cues_and_surfaces(scenarios):
    bare = [(p.persona, a.id) for p in personas(scenarios) for a in p.irrelevant
            if not (a.match and a.cues and a.concepts)]
    assert bare == []


def test_the_numbers_document_is_up_to_date(scenarios):
    assert (ROOT / "docs" / "SCENARIOS.md").read_text(encoding="utf-8") == stats_markdown(scenarios), (
        "regenerate it: spillage scenarios stats --write docs/SCENARIOS.md")


@pytest.mark.shared_data("data/spillage/shopping_Amazon_chat.json")
def test_no_sentence_is_copied_from_the_papers_data(scenarios):
    paper = json.loads(PAPER_DATA.read_text(encoding="utf-8"))["personas"]

    def phrases(text: str) -> set[str]:
        words = re.findall(r"[a-z0-9$%']+", text.lower())
        return {" ".join(words[i:i + 8]) for i in range(len(words) - 7)}

    theirs = set().union(*(phrases(p["prompt"]) for p in paper))
    copied = {s.id: sorted(phrases(s.prompt) & theirs)[:2] for s in scenarios if phrases(s.prompt) & theirs}
    assert copied == {}
