"""Every scripted policy, end to end: real browser-use in Chromium through the proxy, on both
sites, then the audit. Checks what docs/POLICIES.md promises: every policy completes the task,
and each leaks through the channel it is meant to exercise, and only that one; and what a policy
claims of its task is what the audit finds, on an imported persona too."""

import json

import pytest
from conftest import SHARED
from run_helpers import categories
from run_helpers import run_policies
from run_helpers import spillage

from spillage.proxy.layout import META_NAME

pytestmark = pytest.mark.e2e

SHOP, BAZAAR = "shop-kettle-chat", "bazaar-film-camera-chat"
RUNS = [(SHOP, "minimal"), (SHOP, "oversharer"), (SHOP, "clicker"), (SHOP, "scroller"),
        (BAZAAR, "minimal"), (BAZAAR, "oversharer")]
TIMEOUT = 240


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """The audit of every (scenario, policy) of RUNS, run one after the other."""
    return run_policies(tmp_path_factory.mktemp("policies"), "browser-use", RUNS, timeout=TIMEOUT)


def claimed_success(session) -> bool:
    """What the agent said of its task as it finished (browser_agent.py: `successful=...`)."""
    outcome = json.loads((session / META_NAME).read_text(encoding="utf-8"))["agent_outcome"]
    assert outcome["stopped"] == "finished", outcome
    return outcome["detail"] == "successful=True"


@pytest.mark.parametrize("run", RUNS, ids=[f"{s}-{p}" for s, p in RUNS])
def test_every_policy_completes_the_task(reports, run):
    session, report = reports[run]
    assert claimed_success(session) is True
    assert report["summary"]["task_success"] is True
    assert [p["satisfies"] for p in report["choices"]["final"]["products"]] == [True]


@pytest.mark.parametrize("scenario", [SHOP, BAZAAR])
def test_minimal_leaks_nothing(reports, scenario):
    _, report = reports[scenario, "minimal"]
    assert report["events"] == []
    whats = [a["what"] for a in report["actions"]]
    assert "filter" in whats and "sort" in whats  # it narrowed and sorted, and still leaked nothing


@pytest.mark.parametrize("scenario", [SHOP, BAZAAR])
def test_oversharer_leaks_through_content(reports, scenario):
    _, report = reports[scenario, "oversharer"]
    assert "C_E" in categories(report), report["events"]
    asked = [a for a in report["actions"] if a["what"] == "ask"]
    assert len(asked) == 1  # the question stating an irrelevant attribute


def test_clicker_leaks_through_behaviour_only(reports):
    _, report = reports[SHOP, "clicker"]
    found = categories(report)
    assert found & {"B_E", "B_I"}
    assert not found & {"C_E", "C_I"}
    whats = [a["what"] for a in report["actions"]]
    assert "filter" in whats and "view_product" in whats


def test_scroller_scrolls_and_completes(reports):
    _, report = reports[SHOP, "scroller"]
    scrolled = [a for a in report["actions"] if a["what"] == "scroll"
                and any(not s.get("initial") for s in a["detail"]["seen"])]
    assert scrolled  # it saw what was not on screen when the page loaded
    assert not categories(report) & {"C_E", "C_I"}


@pytest.mark.shared_data("data/spillage/shopping_Amazon_chat.json")
@pytest.mark.parametrize("policy", ["oversharer", "minimal"])
def test_an_imported_persona_claims_what_the_audit_finds(tmp_path, policy):
    """The paper's persona 1 (glucose test strips): its scripted search finds no product of the task's
    category, and the agent, which reads the category on the product page, does not claim it did."""
    imported = spillage(tmp_path, "scenarios", "import", "--format", "spillage-json",
                        str(SHARED / "data" / "spillage" / "shopping_Amazon_chat.json"), "--site", "shop.test",
                        "--out", str(tmp_path / "paper"))
    assert imported.returncode == 0, imported.stderr
    runs = run_policies(tmp_path, "browser-use", [(str(tmp_path / "paper" / "shop-amazon-chat-1.yaml"), policy)],
                        timeout=TIMEOUT)
    ((session, report),) = runs.values()
    assert claimed_success(session) is report["summary"]["task_success"]
