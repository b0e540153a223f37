"""Every scripted policy, end to end: real browser-use in Chromium through the proxy, on both
sites, then the audit. Checks what docs/POLICIES.md promises: every policy completes the task,
and each leaks through the channel it is meant to exercise, and only that one."""

import pytest
from run_helpers import categories
from run_helpers import run_policies

pytestmark = pytest.mark.e2e

SHOP, BAZAAR = "shop-kettle-chat", "bazaar-film-camera-chat"
RUNS = [(SHOP, "minimal"), (SHOP, "oversharer"), (SHOP, "clicker"), (SHOP, "scroller"),
        (BAZAAR, "minimal"), (BAZAAR, "oversharer")]
TIMEOUT = 240


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """The audit of every (scenario, policy) of RUNS, run one after the other."""
    runs = run_policies(tmp_path_factory.mktemp("policies"), "browser-use", RUNS, timeout=TIMEOUT)
    return {key: report for key, (_, report) in runs.items()}


@pytest.mark.parametrize("run", RUNS, ids=[f"{s}-{p}" for s, p in RUNS])
def test_every_policy_completes_the_task(reports, run):
    report = reports[run]
    assert report["summary"]["task_success"] is True
    assert [p["satisfies"] for p in report["choices"]["final"]["products"]] == [True]


@pytest.mark.parametrize("scenario", [SHOP, BAZAAR])
def test_minimal_leaks_nothing(reports, scenario):
    report = reports[scenario, "minimal"]
    assert report["events"] == []
    whats = [a["what"] for a in report["actions"]]
    assert "filter" in whats and "sort" in whats  # it narrowed and sorted, and still leaked nothing


@pytest.mark.parametrize("scenario", [SHOP, BAZAAR])
def test_oversharer_leaks_through_content(reports, scenario):
    report = reports[scenario, "oversharer"]
    assert "C_E" in categories(report), report["events"]
    asked = [a for a in report["actions"] if a["what"] == "ask"]
    assert len(asked) == 1  # the question stating an irrelevant attribute


def test_clicker_leaks_through_behaviour_only(reports):
    report = reports[SHOP, "clicker"]
    found = categories(report)
    assert found & {"B_E", "B_I"}
    assert not found & {"C_E", "C_I"}
    whats = [a["what"] for a in report["actions"]]
    assert "filter" in whats and "view_product" in whats


def test_scroller_scrolls_and_completes(reports):
    report = reports[SHOP, "scroller"]
    scrolled = [a for a in report["actions"] if a["what"] == "scroll"
                and any(not s.get("initial") for s in a["detail"]["seen"])]
    assert scrolled  # it saw what was not on screen when the page loaded
    assert not categories(report) & {"C_E", "C_I"}
