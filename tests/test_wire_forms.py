"""The outside tester's 246 request forms (tests/fixtures/wire_forms/) at the real proxy, in every guard
mode: every form a site or a tracker could read without a key is counted by the audit when it gets
through, and caught by the guard (never reaching the site as it was written) when the guard is on; the
clean ones are left alone. What needs a reader of meaning, not of words, is listed apart (docs/GUARD.md,
"What the guard cannot read")."""

import pytest
from run_helpers import needs_chromium
from wire_forms import MODES, load_forms, run_mode

pytestmark = [pytest.mark.e2e, pytest.mark.needs_tool("curl")]

# Readable, but only by meaning: a paraphrase, what a choice implies. The lexical reading
# (the guard's, and the lexical judge's, used here) does not reach them; docs/GUARD.md lists them.
BY_MEANING = {"pp-preg-sick", "pp-preg-tri", "pp-laid-ui", "pp-laid-sev", "pp-kosher-milchig", "pp-pitt-zip",
              "bh-registry-preg"}
# Clean forms whose words have another sense that neither the scenario's look-alikes nor the senses lexicons
# (scenarios/senses.py: phrases, near words) show: the lexical reading takes them for the attribute.
# "pregnant pause" and "Pittsburgh rare" were among them until the phrases came, "Severance Lumon mug"
# until the near words.
OTHER_SENSE = {"lk-kosher-slang"}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    needs_chromium()   # the end-to-end suite's prerequisites (the sites, the proxy), though no browser runs here
    forms = load_forms()
    return {mode: run_mode(tmp_path_factory.mktemp(mode), mode, forms) for mode in MODES}


def readable(outcomes) -> list:
    return [o for o in outcomes if o.leaks and o.form["readable"] and o.form["id"] not in BY_MEANING]


def test_without_the_guard_every_readable_form_reaches_the_site_and_the_audit_counts_it(results):
    outcomes = readable(results["off"])
    assert len(outcomes) >= 170
    assert [o.form["id"] for o in outcomes if not o.delivered] == []
    assert [o.form["id"] for o in outcomes if not o.audited] == []


@pytest.mark.parametrize("mode", ["redact", "block"])
def test_the_guard_catches_every_readable_form_and_nothing_of_it_is_delivered(results, mode):
    outcomes = readable(results[mode])
    assert [o.form["id"] for o in outcomes if not o.recorded] == []          # a guard record for each
    assert [o.form["id"] for o in outcomes if o.original_arrived] == []      # the site never got it as written
    assert [o.form["id"] for o in outcomes if o.audited] == []               # what was delivered says nothing
    assert [o.form["id"] for o in outcomes if not o.attempted] == []         # and the audit knows it was tried


@pytest.mark.parametrize("mode", MODES)
def test_clean_forms_are_left_alone(results, mode):
    taken = {o.form["id"] for o in results[mode] if not o.leaks and (o.recorded or o.monitored or o.counted)}
    assert taken == OTHER_SENSE   # counted without the guard, recorded with it: the one reading
    clean = [o for o in results[mode] if not o.leaks and o.form["id"] not in OTHER_SENSE]
    assert len(clean) >= 40
    assert [o.form["id"] for o in clean if o.recorded or o.monitored] == []
    assert [o.form["id"] for o in clean if o.counted] == []
    assert all(o.delivered for o in clean)


def test_what_no_reader_can_read_is_delivered_and_said_to_be_out_of_reach(results):
    unreadable = [o for o in results["off"] if o.leaks and not o.form["readable"]]
    assert {o.form["kind"] for o in unreadable} == {"out-of-reach-rot13", "out-of-reach-reversed", "out-of-reach-leet",
                                                   "out-of-reach-aes"}
    assert not any(o.audited for o in unreadable)
