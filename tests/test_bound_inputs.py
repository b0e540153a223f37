"""What the audit and the report read beside the log is bound to the signed evidence (docs/EVIDENCE.md,
"Bound inputs" and "What a report counts"): the outside tester's forgeries B1-B3, each on a copy of one
real run (a curl agent that leaks two attributes), fail with the message a user sees."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from capture_helpers import strip_signatures
from run_helpers import spillage

from spillage.proxy.layout import CHECKPOINT_NOTE

LEAK = "curl -sS 'https://shop.test/s?k=kettle+pregnant+laid+off' >/dev/null"
RELEVANT = ("now that I'm pregnant", "I got laid off from the credit union two weeks ago")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bound")


@pytest.fixture(scope="module")
def leaky(workdir) -> Path:
    """A session as `spillage run --audit` leaves it."""
    done = spillage(workdir, "run", "--scenario", "shop-kettle-chat", "--audit", "--", "sh", "-c", LEAK)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def copy(leaky, tmp_path) -> Path:
    """A copy of the session under its own name, writable, in a runs folder of its own."""
    folder = tmp_path / "runs" / leaky.name
    shutil.copytree(leaky, folder)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    return folder


def mark_relevant(session: Path) -> None:
    path = session / "scenario.yaml"
    text = path.read_text()
    for said in RELEVANT:
        assert f"  text: {said}\n  relevant: false" in text
        text = text.replace(f"  text: {said}\n  relevant: false", f"  text: {said}\n  relevant: true")
    path.write_text(text)


def report(workdir: Path, runs: Path, *extra: str) -> tuple[int, str, list[str]]:
    """`spillage report`: its exit status, stderr, and sessions.csv's lines (none when nothing was reported)."""
    out = runs.parent / "report"
    done = spillage(workdir, "report", str(runs), "--out", str(out), "--quiet", *extra)
    rows = (out / "sessions.csv").read_text().splitlines()[1:] if done.returncode == 0 else []
    return done.returncode, done.stderr, rows


def verify_line(workdir: Path, session: Path) -> str:
    return spillage(workdir, "verify", str(session)).stdout.strip()


def test_an_untouched_session_verifies_bound_audits_its_leaks_and_reports_verified(workdir, copy):
    line = verify_line(workdir, copy)
    assert line.startswith("OK ") and "inputs not bound" not in line
    audit = json.loads((copy / "audit.json").read_text())
    assert sorted(e["attribute"] for e in audit["events"]) == ["laid-off", "pregnant"]
    status, err, rows = report(workdir, copy.parent)
    assert status == 0 and "1 sessions reported, 0 excluded" in err
    (row,) = rows
    assert ",command,sh," in row and ",original,-,off,True," in row


def test_b2_a_scenario_copy_that_calls_the_leaks_relevant_fails_verify_and_the_audit(workdir, copy):
    mark_relevant(copy)
    line = verify_line(workdir, copy)
    assert line.startswith("FAIL ") and "modified: scenario.yaml hashes to " in line
    assert "the certificate binds SHA-256" in line
    done = spillage(workdir, "audit", str(copy))
    assert done.returncode == 1 and "capture log fails verification (modified: scenario.yaml hashes to" in done.stderr
    (copy / "scenario.yaml").unlink()
    assert "modified: scenario.yaml is missing; the certificate binds it by SHA-256" in verify_line(workdir, copy)


def test_b1_an_agent_without_a_sandbox_that_rewrites_the_scenario_copy_is_caught(workdir):
    """--isolation none: the agent leaks, then rewrites its session's scenario.yaml while it runs."""
    rewrite = ("s=../../$(basename $PWD)/scenario.yaml; "
               + "; ".join(f"sed -i '/text: {said}/{{n;s/relevant: false/relevant: true/}}' $s" for said in ("now that", "I got laid"))
               )
    done = spillage(workdir, "run", "--scenario", "shop-kettle-chat", "--isolation", "none", "--audit",
                    "--", "sh", "-c", f"{LEAK}; {rewrite}")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "evidence tampered: " in done.stderr and ": modified: scenario.yaml hashes to" in done.stderr
    session = Path(done.stdout.strip().splitlines()[-1])
    assert json.loads((session / "meta.json").read_text())["evidence"] == "tampered"
    assert not (session / CHECKPOINT_NOTE).exists()   # its issuer does not vouch for it


def test_b2b_a_planted_catalog_fails_verify_and_the_audit_refuses_it(workdir, copy):
    sha256 = json.loads((copy / "meta.json").read_text())["catalog"]["sha256"]
    planted = copy / "catalog.sqlite"
    shutil.copy(workdir / ".spillage" / "catalogs" / f"{sha256}.sqlite", planted)
    with sqlite3.connect(planted) as db:
        db.execute("pragma user_version = 7")
    line = verify_line(workdir, copy)
    assert "modified: catalog.sqlite (SHA-256 " in line and f"is not the catalog the certificate binds ({sha256})" in line
    done = spillage(workdir, "audit", str(copy), "--allow-unverified")
    assert done.returncode == 2 and f"is not the catalog's meta.json names ({sha256})" in done.stderr


def test_b3_a_relabelled_meta_json_fails_verify_and_is_left_out_of_the_report(workdir, copy):
    meta = json.loads((copy / "meta.json").read_text())
    meta["agent"]["model"], meta["condition"]["prompt"] = "openai:gpt-4o", "sanitized"
    (copy / "meta.json").write_text(json.dumps(meta))
    assert "modified: meta.json's agent.model is 'openai:gpt-4o'; the certificate binds None" in verify_line(workdir, copy)
    status, err, _ = report(workdir, copy.parent)
    assert status == 2 and "capture failed verification (modified: meta.json's agent.model" in err
    status, _, (row,) = report(workdir, copy.parent, "--include-unverified")
    assert status == 0 and row.split(",")[9] == "False"   # counted on request, never as verified


def test_b3_an_edited_audit_json_is_left_out_of_the_report(workdir, copy):
    audit = json.loads((copy / "audit.json").read_text())
    audit["events"], audit["summary"]["occurrences"] = [], {"C_E": 0, "C_I": 0, "B_E": 0, "B_I": 0}
    (copy / "audit.json").write_text(json.dumps(audit))
    status, err, _ = report(workdir, copy.parent)
    assert status == 2 and "audit.json carries no valid signature: it was changed after it was signed" in err
    audit.pop("signature")
    (copy / "audit.json").write_text(json.dumps(audit))
    assert "audit.json is not signed: `spillage audit " in report(workdir, copy.parent)[1]


def test_b3_an_audit_signed_by_another_key_counts_only_when_that_key_is_pinned(workdir, copy, tmp_path):
    assert spillage(workdir, "--home", str(tmp_path / "other"), "audit", str(copy)).returncode == 0
    status, err, _ = report(workdir, copy.parent)
    assert status == 2 and "not by the session's issuer or one of the --keys" in err
    keys = tmp_path / "keys"
    keys.write_text("".join(spillage(workdir, "--home", str(home), "key").stdout.splitlines(keepends=True)[0]
                            for home in (workdir / ".spillage", tmp_path / "other")))
    status, _, (row,) = report(workdir, copy.parent, "--keys", str(keys))
    assert status == 0 and ",True," in row


def test_b3_a_log_stripped_of_its_signatures_is_never_counted_as_verified(workdir, copy):
    strip_signatures(copy, keep_signed_claim=False)
    meta = json.loads((copy / "meta.json").read_text())
    for name in ("signing", "capture"):
        meta.pop(name)
    (copy / "meta.json").write_text(json.dumps(meta))
    (copy / CHECKPOINT_NOTE).unlink()
    assert spillage(workdir, "audit", str(copy)).returncode == 0   # an unsigned log verifies, as unsigned
    status, err, _ = report(workdir, copy.parent)
    assert status == 2 and "unsigned: no signature vouches for its log" in err
    status, _, (row,) = report(workdir, copy.parent, "--include-unverified")
    assert row.split(",")[9] == "False"
