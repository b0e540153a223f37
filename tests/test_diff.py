"""`spillage diff A B`: paired requests, responses and derived actions; volatile fields named, not counted."""

import json
import random
from pathlib import Path

import pytest

from audit_helpers import KETTLE, Traffic
from spillage.audit.diff import diff_sessions
from spillage.audit.diff import pairing
from spillage.runner.cli import main

SEARCH = "https://shop.test/s?k=kettle+for+my+pregnancy"


def session(folder: Path, visitor: str, day: str, results: bytes = b"<p>3 kettles</p>", extra: bool = False,
            home_status: int = 200) -> Path:
    """Home page (sets a visitor cookie, shows a time and the visitor id) and a search, as the proxy
    records them; the date, cookie and times depend on the run."""
    t = Traffic(folder, KETTLE)

    def exchange(url: str, cookie: str | None, headers: list, body: bytes, status: int = 200) -> None:
        flow = f"00000000-0000-4000-8000-{len(t.records):012d}"
        request = t.add("request", flow=flow, method="GET", url=url, http_version="HTTP/2.0",
                        headers=[["host", "shop.test"]] + ([["cookie", cookie]] if cookie else []), body=None)
        t.add("response", flow=flow, request=request["seq"], status=status, reason="", http_version="HTTP/2.0",
              headers=[["Content-Type", "text/html"], ["Date", f"{day}, 29 Nov 2026 10:00:00 GMT"],
                       ["Content-Length", str(len(body))], *headers], body=t.writer.body(body))

    home = f"<p>Welcome back</p><time>2026-11-{29 if day == 'Sun' else 30}T10:00:00Z</time><a href=/v/{visitor}>"
    exchange("https://shop.test/", None, [["Set-Cookie", f"visitor={visitor}; HttpOnly; Path=/"]], home.encode(),
             home_status)
    exchange(SEARCH, f"visitor={visitor}; _mt_id=abc", [], results)
    if extra:
        exchange("https://shop.test/p/10241", f"visitor={visitor}", [], b"<h1>a kettle</h1>")
    return t.close()


@pytest.fixture
def original(tmp_path):
    return session(tmp_path / "a", "qgTbSV1mRCslOqzAv-l8JgWs", "Sun")


def test_runs_that_differ_only_in_volatile_fields_are_equal(tmp_path, original, capsys):
    again = session(tmp_path / "b", "Zx0PqL9sTu2VwYa1Bc3dEf4G", "Mon")
    assert main(["diff", str(original), str(again)]) == 0
    summary, volatile = capsys.readouterr().out.splitlines()
    assert summary == "equal: 0 differences; requests 2 vs 2, 2 paired; actions 1 vs 1, events 1 vs 1"
    for named in ("date header (2)", "set-cookie header (1)", "cookie value in body (1)", "time in body (1)",
                  "flow ids"):
        assert named in volatile


def test_a_changed_response_body_is_a_difference(tmp_path, original, capsys):
    tampered = session(tmp_path / "b", "Zx0PqL9sTu2VwYa1Bc3dEf4G", "Sun", results=b"<p>0 kettles</p>")
    assert main(["diff", str(original), str(tampered)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("DIFFERENT: 1 differences")
    assert out[2:] == [f"  response body seq 3/3 GET {SEARCH}: line 1: '3 kettles</p>' vs '0 kettles</p>'"]


def test_a_request_only_one_session_made_is_a_difference_with_its_action(tmp_path, original, capsys):
    longer = session(tmp_path / "b", "qgTbSV1mRCslOqzAv-l8JgWs", "Sun", extra=True)
    assert main(["diff", "--format", "json", str(original), str(longer)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert not result["equal"]
    assert [(d["what"], d.get("url")) for d in result["differences"]] == [
        ("only in B", "https://shop.test/p/10241"), ("action only in B", None)]
    assert result["differences"][1]["detail"].startswith("view_product ")
    assert result["requests"] == {"a": 2, "b": 3, "paired": 2}


def lcs_length(a: list, b: list) -> int:
    """The textbook dynamic programme, to check the diff's alignment against."""
    row = [0] * (len(b) + 1)
    for x in a:
        previous, row = row, [0]
        for j, y in enumerate(b):
            row.append(previous[j] + 1 if x == y else max(previous[j + 1], row[j]))
    return row[-1]


def test_requests_pair_by_a_longest_common_subsequence():
    """difflib pairs one of these (it takes the longest block first); a longest common subsequence two."""
    in_order, moved, only_a, only_b = pairing(list("cbcb"), list("baac"), list("cbcb"), list("baac"))
    assert len(in_order) == 2 and len(in_order) + len(only_a) == 4 and len(moved) == 0
    rng = random.Random(26)
    for _ in range(300):
        a = [rng.choice("GPJS") for _ in range(rng.randint(0, 12))]
        b = [rng.choice("GPJS") for _ in range(rng.randint(0, 12))]
        in_order, moved, only_a, only_b = pairing(a, b, a, b)
        assert len(in_order) == lcs_length(a, b)
        assert all(a[i] == b[j] for i, j in in_order + moved)
        assert [j for _, j in in_order] == sorted(j for _, j in in_order)    # in order on both sides
        assert not set(a[i] for i in only_a) & set(b[j] for j in only_b)    # what is left is unpaired
        assert sorted([i for i, _ in in_order + moved] + only_a) == list(range(len(a)))


def test_the_same_pages_in_another_order_pair_and_are_named_volatile(tmp_path):
    """Page GETs that a run made in another order showed as both 'only in A' and 'only in B'."""
    def pages(folder: Path, products: list[int]) -> Path:
        t = Traffic(folder, KETTLE)
        for product in products:
            t.exchange("GET", f"https://shop.test/p/{product}", response=b"<h1>a kettle</h1>")
        return t.close()

    result = diff_sessions(pages(tmp_path / "a", [10241, 10242, 10243]), pages(tmp_path / "b", [10242, 10241, 10243]))
    assert result["requests"] == {"a": 3, "b": 3, "paired": 3}
    assert not [d for d in result["differences"] if d["what"] in ("only in A", "only in B")]
    assert result["volatile"]["requests in another order"] == 1


def test_a_status_change_is_a_difference(tmp_path, original):
    failed = session(tmp_path / "b", "qgTbSV1mRCslOqzAv-l8JgWs", "Sun", home_status=500)
    result = diff_sessions(original, failed)
    assert [(d["what"], d["detail"]) for d in result["differences"]] == [("status", "200 vs 500")]


def test_bad_input_is_one_line_and_exit_2(tmp_path, original, capsys):
    assert main(["diff", str(original), str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == \
        f"spillage: {tmp_path / 'nowhere'}: no capture.jsonl here; is this a session folder?\n"
    broken = session(tmp_path / "b", "qgTbSV1mRCslOqzAv-l8JgWs", "Sun")
    log = broken / "capture.jsonl"
    log.write_text(log.read_text().replace("3 kettles", "4 kettles"))
    assert main(["diff", str(original), str(broken)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "fails verification (modified" in err[0]


def test_diff_keeps_its_status_when_the_reader_closes_the_pipe(tmp_path):
    import subprocess
    import sys

    corpus = Path(__file__).parent / "corpus" / "sessions"
    diff = subprocess.Popen([sys.executable, "-m", "spillage.runner.cli", "diff", str(corpus / "s01-kettle-oversharer"),
                             str(corpus / "s02-kettle-minimal")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path)
    diff.stdout.close()   # the reader is gone before a byte is written: the write meets a closed pipe
    err = diff.stderr.read().decode()
    assert diff.wait(120) == 1 and "Traceback" not in err and "Broken pipe" not in err   # they differ
