"""The origins send the same bytes as when tests/fixtures/site_bytes.json was written (tests/site_bytes.py):
every route of shop.test, bazaar.test and metrics.test, good and bad input, a visitor's whole visit."""

import json

import pytest
from site_bytes import GOLDEN
from site_bytes import catalog_digest
from site_bytes import replay
from site_bytes import shown

RECORD = json.loads(GOLDEN.read_text("utf-8"))


@pytest.fixture(scope="module")
def exchanges(catalog_file):
    assert catalog_digest(catalog_file) == RECORD["catalog"], (
        "the default catalog changed since site_bytes.json was written: the sites' bytes cannot be compared; "
        "rewrite it with `python tests/site_bytes.py` on the code before your change")
    requests, answers = replay(catalog_file)
    return [{"request": shown(r), "answer": a} for r, a in zip(requests, answers)]


def test_the_same_requests_are_sent(exchanges):
    assert [e["request"] for e in exchanges] == [e["request"] for e in RECORD["exchanges"]]


def test_every_answer_is_the_same_to_the_byte(exchanges):
    changed = [(e["request"]["method"], e["request"]["host"], e["request"]["path"], e["request"].get("query", ""))
               for e, old in zip(exchanges, RECORD["exchanges"]) if e["answer"] != old["answer"]]
    assert not changed, f"{len(changed)} answers differ, the first: {changed[:5]}"


def test_the_requests_reach_every_route_and_status():
    """The list is broad: both shops' pages, forms and errors, the tracker and a host nobody serves."""
    statuses = {e["answer"]["status"][:3] for e in RECORD["exchanges"]}
    hosts = {e["request"]["host"] for e in RECORD["exchanges"]}
    assert statuses >= {"200", "204", "303", "400", "404", "405", "413", "415", "421"}
    assert hosts >= {"shop.test", "bazaar.test", "metrics.test", "nowhere.test"}
