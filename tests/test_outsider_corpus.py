"""The default judge on the outsiders' dev half (tests/outsider_corpus/README.md): sessions and
labels nobody here wrote. Floors a little under what docs/JUDGES.md reports, so that a change that
makes the judges worse on what others write fails here, and not only on our own corpus. The test
half is not read by any test: it is read once per change of the judges, to report."""

import importlib.util
from pathlib import Path

import pytest

from spillage.audit.evaluate import evaluate
from spillage.audit.judges import DEFAULT_JUDGE

HERE = Path(__file__).resolve().parent / "outsider_corpus"
FLOORS = {"explicit": (0.95, 0.95), "implicit": (0.90, 0.80)}   # (precision, recall), dev half


@pytest.fixture(scope="module")
def dev_half(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("prepare", HERE / "prepare.py")
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    out = tmp_path_factory.mktemp("outsider") / "dev"
    left_out = prepare.prepare("dev", out)   # without ../shared: the 15 sessions of benchmark personas
    return out, left_out


def test_the_default_judge_reaches_its_floors_on_what_others_wrote(dev_half):
    out, left_out = dev_half
    result = evaluate(out, DEFAULT_JUDGE)
    assert result.sessions == 21 - len(left_out) and len(left_out) in (0, 6)
    for group, (precision, recall) in FLOORS.items():
        counts = getattr(result, group)
        assert counts.precision >= precision and counts.recall >= recall, (group, counts, result.table())
    assert len(result.clean_hit) <= 3, result.clean_hit
