"""Word senses, on text nobody here wrote: an outside tester's searches and product questions for six
scenarios (tests/fixtures/senses_eval/), each a match word or cue in a harmless other sense (clean) or
the attribute really said (leak), judged by the guard as the proxy runs it (GuardEngine.decide, whose
findings are the lexical judge's events on the actions the request makes). The senses lexicon
(scenarios/senses.yaml) was written by another outsider, who saw neither these texts nor the code.
docs/GUARD.md ("Word senses") gives the table; this test holds the counts to it."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote_plus
from urllib.parse import urlencode

import pytest
import yaml
from mitmproxy import http

from spillage.addons.guard_engine import GuardEngine
from spillage.addons.guard_policy import default_policy
from spillage.origins.catalog import Catalog
from spillage.scenarios.loader import resolve_scenario
from spillage.scenarios.matching import find_form
from spillage.scenarios.senses import lexicon

EVAL = Path(__file__).parent / "fixtures" / "senses_eval" / "eval.jsonl"
LEXICON = Path(__file__).parents[1] / "scenarios" / "senses.yaml"
# Measured once, the lexicon untuned on these texts (docs/GUARD.md, "Word senses"): 42 clean and 49 leaks;
# without the lexicon 41 of the clean were flagged.
CLEAN, LEAKS, FLAGGED, MISSED = 42, 49, 34, 0
UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"


def items() -> list[dict]:
    return [json.loads(line) for line in EVAL.read_text(encoding="utf-8").splitlines() if line.strip()]


def neutral_product(catalog: Catalog, site: str, scenario) -> int:
    """A product of the scenario's category that carries none of its irrelevant attributes' concepts."""
    concepts = {c for a in scenario.irrelevant for c in a.concepts}
    return next(p.id for p in catalog.products(site)
                if p.category == scenario.success.category and not concepts & set(p.facets))


def request_for(item: dict, scenario, catalog: Catalog) -> http.Request:
    """The request the site's own search box or question form sends with the item's text."""
    site = "bazaar.test" if item["scenario"].startswith("bazaar-") else "shop.test"
    headers = {"User-Agent": UA, "Referer": f"https://{site}/"}
    if item["where"] == "search":
        path = f"/sch/?_nkw={quote_plus(item['text'])}" if site == "bazaar.test" else f"/s?k={quote_plus(item['text'])}"
        return http.Request.make("GET", f"https://{site}{path}", b"", headers)
    product = neutral_product(catalog, site, scenario)
    if site == "bazaar.test":
        path, body = f"/itm/{product}/ask", urlencode({"subject": "Item details", "message": item["text"]})
    else:
        path, body = f"/p/{product}/ask", urlencode({"question": item["text"]})
    headers |= {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"https://{site}"}
    return http.Request.make("POST", f"https://{site}{path}", body.encode(), headers)


def judged(catalog_file, profiles) -> list[tuple[dict, set[str]]]:
    """Each item and the attributes the guard (redact) finds in its request."""
    catalog, found = Catalog(catalog_file), []
    for item in items():
        scenario = resolve_scenario(item["scenario"])
        guard = GuardEngine(default_policy("redact", scenario.irrelevant), profiles)
        decision = guard.decide(request_for(item, scenario, catalog))
        found.append((item, {f.attribute for f in decision.findings} if decision else set()))
    return found


@pytest.fixture(scope="module")
def results(catalog_file, profiles):
    return judged(catalog_file, profiles)


def test_the_lexicon_is_well_formed():
    data = yaml.safe_load(LEXICON.read_text(encoding="utf-8"))
    for term, phrases in data.items():
        for phrase in phrases:
            assert find_form(phrase, (term,)), (term, phrase)
    assert len(lexicon()) == len({p for ps in data.values() for p in ps})


def test_other_senses_are_not_flagged_and_leaks_still_are(results):
    clean = [(item, found) for item, found in results if item["label"] == "clean"]
    leaks = [(item, found) for item, found in results if item["label"] == "leak"]
    alarms = [item["text"] for item, found in clean if found]
    missed = [item["text"] for item, found in leaks if item["attribute"] not in found]
    print(f"clean {len(clean)}: flagged {len(alarms)}; leaks {len(leaks)}: missed {len(missed)}")
    for text in alarms:
        print("  flagged:", text)
    for text in missed:
        print("  missed:", text)
    assert (len(clean), len(leaks)) == (CLEAN, LEAKS)
    assert (len(alarms), len(missed)) == (FLAGGED, MISSED), (alarms, missed)
