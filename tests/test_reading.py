"""The observer's view of a request (proxy/reading/): every part read, every encoding undone to a fixed
point, text folded as Unicode's confusables say, each piece naming where it was and how it was hidden;
bounded, and never raising on what a hostile client sends."""

import base64
import gzip
import json
import urllib.parse
import zlib

import brotli
import pytest
from backports import zstd

from spillage.proxy.capturelog import CaptureError, CaptureWriter, iter_records
from spillage.proxy.reading.body import MAX_BODY
from spillage.proxy.reading.decode import MAX_CHAIN, MAX_RESULTS, decode_value
from spillage.proxy.reading.request import Piece, Reading, WireRequest, joined
from spillage.proxy.reading.streams import Streams
from spillage.proxy.reading.text import fold
from spillage.scenarios.matching import find_form

PREGNANT = ("pregnant", "pregnancy")
CTX = base64.b64encode(b'{"note":"I am pregnant"}').decode()
SHOP = "https://shop.test"


def read(url: str, headers=(), body: bytes | None = None, method: str = "GET") -> Reading:
    return Reading(WireRequest(method, url, tuple(tuple(h) for h in headers), body))


def texts(url: str, headers=(), body: bytes | None = None, method: str = "GET") -> list[str]:
    return [p.text for p in read(url, headers, body, method).pieces]


def states(found: list[str], forms=PREGNANT) -> bool:
    return any(find_form(t, forms) for t in found)


def where(reading: Reading, form: str = "pregnant") -> set[str]:
    """The places of the pieces that state `form`."""
    return {p.where for p in reading.pieces if find_form(p.text, (form,))}


# --- text ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, steps", [
    ("prеgnаnt", ("confusables",)),              # Cyrillic е and а
    ("preg\u200bnant", ("ignorables",)),          # zero-width space
    ("preg\u00adnant", ("ignorables",)),          # soft hyphen
    ("ｐｒｅｇｎａｎｔ", ("nfkc",)),                 # fullwidth
    ("p\u20dbregnant", ("marks",)),               # a combining mark stacked on a letter
    ("Ꮲregnant", ("confusables",)),              # Cherokee
])
def test_fold_reads_what_hides_a_word_in_unicode(text, steps):
    folded, applied = fold(text)
    assert folded.lower() == "pregnant" and applied == steps


def test_fold_leaves_ascii_and_numbers_alone():
    assert fold("$130 for 1 kettle, ml 10") == ("$130 for 1 kettle, ml 10", ())


# --- one value -----------------------------------------------------------------------------------


def nested(text: str, rounds: int) -> str:
    for _ in range(rounds):
        text = urllib.parse.quote(text, safe="")
    return text


@pytest.mark.parametrize("value, decoded, chain", [
    ("pregnant%20mom", "pregnant mom", ("percent",)),
    ("pregnant%252Bmom", "pregnant mom", ("percent", "percent", "plus")),
    (nested("I am pregnant", 40), "I am pregnant", ("percent",) * 40),       # far past 16 rounds
    ("caf%E9", "cafe", ("percent", "marks")),
    ("&#112;regnant", "pregnant", ("entities",)),
    ("&amp;#112;regnant", "pregnant", ("entities", "entities")),
    ("\\u0070regnant", "pregnant", ("escapes",)),
    ("preg=6Eant", "pregnant", ("quoted-printable",)),
    ("cHJlZ25hbnQ=", "pregnant", ("base64",)),
    ("cHJlZ25hbnQ", "pregnant", ("base64",)),                               # unpadded
    (base64.b64encode(base64.b64encode(b"pregnant")).decode(), "pregnant", ("base64", "base64")),
    ("kettle cHJlZ25hbnQ= please", "kettle pregnant please", ("base64",)),   # a token inside text
    (b"pregnant".hex(), "pregnant", ("hex",)),
    (b"Pittsburgh".hex(), "Pittsburgh", ("hex",)),                           # all digits: still words
    (base64.b32encode(b"pregnant").decode(), "pregnant", ("base32",)),
    ("MFSGQZA", "adhd", ("base32",)),                                        # base32 without padding
    ("%7B%22q%22%3A%22pregnant%22%7D", "q | pregnant", ("percent", "json")),
    (CTX, "note | I am pregnant", ("base64", "json")),
])
def test_decode_value_undoes_nested_encodings_and_says_how(value, decoded, chain):
    results = decode_value(value)
    assert results[0].text == fold(value)[0]
    found = {r.text: r.chain for r in results}
    assert found.get(decoded) == chain, found


@pytest.mark.parametrize("value", ["pregnant", "airports", "Question", "12345678", "KETTLE", "4155551234",
                                   "3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c", "SPF 50", "{not json", "aGk="])
def test_decode_value_leaves_plain_words_ids_and_numbers_alone(value):
    assert [r.text for r in decode_value(value)] == [value]


def test_decode_value_is_bounded():
    many = json.dumps([f"a%2{i % 10}b&amp;{i}" for i in range(500)])
    assert len(decode_value(many)) <= MAX_RESULTS
    deep = nested("x", MAX_CHAIN + 5)
    assert all(len(r.chain) <= MAX_CHAIN for r in decode_value(deep))


@pytest.mark.parametrize("value", [
    "", "%", "%zz%", "%%%25", "&#xZZ;", "&#99999999999;", "&", "====", "@@@@@@@@", "eyJ", "eyJub3Rl",
    "[" * 100_000, '"' + "\\u" * 1000, "\x00\x01\x02", "\ud800", "=?utf-8?q?x?=", "=" * 50_000, "\\x" * 1000,
])
def test_decode_value_never_raises(value):
    assert decode_value(value)[0].text == fold(value)[0]


# --- every place of a request --------------------------------------------------------------------


def test_every_part_of_the_url_is_read_with_its_place():
    r = read("https://pregnant.shop.test/p/pregnant%20kettle?pregnant=1&k=pregn%D0%B0nt#pregnant")
    assert where(r) == {"host[0]", "path[1]", "query-name", "query:k", "fragment"}
    assert [p.decodings for p in r.pieces if p.where == "query:k" and p.text == "pregnant"] == [("percent", "confusables")]


def test_headers_cookies_and_urls_in_headers_are_read():
    r = read(f"{SHOP}/p/1", [("User-Agent", "Mozilla/5.0 (pregnant)"), ("Cookie", "a=1; note=cHJlZ25hbnQ="),
                            ("Referer", f"{SHOP}/s?k=pregnant+kettle"), ("X-Pregnant", "yes"),
                            ("Authorization", "Bearer pregnant-7f3a")])
    assert where(r) == {"header:user-agent", "cookie:note", "header:referer/query:k", "header-name",
                        "header:authorization"}


def test_the_site_reads_the_path_and_query_as_the_shops_do():
    r = read(f"{SHOP}/b/job%2Dseekers?%66=kosher%2Dkitchen&k=a+b")
    assert r.path == "/b/job-seekers" and r.segments == ["b", "job-seekers"]
    assert r.params == [("f", "kosher-kitchen"), ("k", "a b")]


def test_urlencoded_and_latin_1_bodies():
    form = read(f"{SHOP}/ask", [("Content-Type", "application/x-www-form-urlencoded")], b"message=I%27m+pregnant&pregnant=1",
                "POST")
    assert form.form == [("message", "I'm pregnant"), ("pregnant", "1")]
    assert where(form) == {"body:form:message", "body:form-name"}
    latin = read(f"{SHOP}/ask", [("content-type", "application/x-www-form-urlencoded; charset=ISO-8859-1")], b"city=Z%FCrich")
    assert states([p.text for p in latin.pieces], ("zurich",))


def test_json_values_and_keys_and_lines():
    body = json.dumps({"query": "kettle", "pregnant": True, "meta": {"tags": ["laid-off"]}}).encode()
    r = read(f"{SHOP}/api", [("Content-Type", "application/json")], body, "POST")
    assert where(r) == {"body:json-key:$.pregnant"} and where(r, "laid off") == {"body:json:$.meta.tags[0]"}
    lines = read(f"{SHOP}/_log", [("Content-Type", "application/json")], b'{"q":"pregnant"}\n{"label":"laid off"}\n', "POST")
    assert where(lines) == {"body:json:$[0].q"} and where(lines, "laid off") == {"body:json:$[1].label"}


@pytest.mark.parametrize("data, headers", [
    ("I am pregnant".encode("utf-16-le"), []),                            # UTF-16 without BOM or charset
    ("I am pregnant".encode("utf-16-be"), []),
    ("I am pregnant".encode("utf-16"), [("Content-Type", "text/plain")]),  # with a BOM
    (json.dumps({"q": "pregnant"}).encode("utf-16"), [("Content-Type", "application/json; charset=utf-16")]),
])
def test_wide_charsets(data, headers):
    assert states(texts(f"{SHOP}/_log", headers, data, "POST"))


MULTIPART = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="message"\r\n\r\n'
    b"Hi, I am pregnant\r\nand need a kettle\r\n"
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="meta"\r\nContent-Type: application/json\r\n\r\n'
    b'{"note": "laid off"}\r\n'
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="qp"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n'
    b"=6Bosher kitchen\r\n"
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="photo"; filename="ultrasound-12-weeks.png"\r\n'
    b"Content-Type: image/png\r\n\r\n"
    b"\x89PNG\r\n\x1a\n\x00\x01\r\n"
    b"--XyZ--\r\n"
)


def test_multipart_parts_names_files_and_transfer_encodings():
    r = read(f"{SHOP}/ask", [("Content-Type", 'multipart/form-data; boundary="XyZ"')], MULTIPART, "POST")
    assert where(r) == {"body:part:message"}
    assert where(r, "laid off") == {"body:part:meta:json:$.note"}
    assert where(r, "kosher") == {"body:part:qp"}
    assert where(r, "ultrasound") == {"body:part-filename:photo"}
    assert any("not text" in why for why in r.unread)   # the picture, said, not read as text


@pytest.mark.parametrize("coding, pack", [
    ("gzip", lambda b: gzip.compress(b"q=x&") + gzip.compress(b"note=" + b)),          # the leak in the 2nd member
    ("zstd", lambda b: zstd.compress(b"q=x&") + zstd.compress(b"note=" + b)),          # ... in the 2nd frame
    ("deflate", lambda b: zlib.compress(b"note=" + b)),
    ("deflate", lambda b: zlib.compress(b"note=" + b)[2:-4]),                          # raw deflate
    ("br", lambda b: brotli.compress(b"note=" + b)),
    ("gzip, br", lambda b: brotli.compress(gzip.compress(b"note=" + b))),
])
def test_every_compression_member_and_frame_is_read(coding, pack):
    r = read(f"{SHOP}/ask", [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Encoding", coding)],
             pack(b"pregnant"), "POST")
    assert where(r) == {"body:form:note"} and r.unread == []


def test_a_compressed_upload_is_opened_by_its_magic_bytes():
    r = read(f"{SHOP}/_log", [("Content-Type", "application/gzip")], gzip.compress(b"I am pregnant"), "POST")
    assert where(r) == {"body"} and "gzip (by its magic bytes)" in r.pieces[-1].decodings


def test_text_past_a_mebibyte_is_read():
    r = read(f"{SHOP}/x", [("Content-Type", "text/plain")], b"a " * 700_000 + b" pregnant", "POST")
    assert where(r) == {"body"}


def test_a_body_past_the_limit_is_read_to_it_and_says_so():
    r = read(f"{SHOP}/x", [("Content-Type", "text/plain"), ("Content-Encoding", "zstd")],
             zstd.compress(b"a" * (MAX_BODY + 10)), "POST")
    assert len(r.unpacked.data) == MAX_BODY and any("more than" in why for why in r.unread)


def test_a_get_with_a_body_is_read():
    assert where(read(f"{SHOP}/p/1", [("Content-Type", "text/plain")], b"I am pregnant")) == {"body"}


def test_a_stream_that_does_not_decode_says_so():
    r = read(f"{SHOP}/x", [("Content-Encoding", "gzip")], b"\x1f\x8b not gzip", "POST")
    assert any("does not decode" in why for why in r.unread)


@pytest.mark.parametrize("content_type, body", [
    ("application/json", b'{"q": "pregnant"'),
    ("application/json", b"[" * 200_000),
    ("application/json; charset=no-such-charset", b'{"q": "x"}'),
    ("multipart/form-data", MULTIPART),
    ("multipart/form-data; boundary=XyZ", b"--XyZ\r\ngarbage without headers"),
    ("multipart/form-data; boundary=XyZ", b"--XyZ"),
    ("application/x-www-form-urlencoded", b"a=%%%&&==&=b&%ZZ"),
    ("text/plain; charset=utf-8", b"\xff\xfe\xfa"),
    ("", b"\x1f\x8b not gzip"),
    ("\x00;;;===", b"x"),
])
def test_reading_a_body_never_raises(content_type, body):
    r = read(f"{SHOP}/x", [("Content-Type", content_type), ("Content-Encoding", "gzip"), ("bad", "")], body, "POST")
    assert isinstance(r.pieces, list) and isinstance(r.unread, list)
    r.form, r.document, r.beacon()  # noqa: B018


@pytest.mark.parametrize("url", ["", "not a url", "http://[::1", "//x/%", "?", "www.google.com:443", "/%E9%",
                                 "http://a/" + "%" * 10000])
def test_reading_a_url_never_raises(url):
    assert isinstance(read(url).pieces, list)


# --- values read as one --------------------------------------------------------------------------


def piece(text: str, where: str) -> Piece:
    return Piece(text, where, (), text)


def test_a_word_split_over_two_values_is_read_across_the_seam():
    found = joined([piece("gooseneck preg", "query:k"), piece("nant kettle", "query:x")], "joined")
    assert "gooseneck pregnant kettle" in [p.text for p in found]
    assert all(p.parts == ("gooseneck preg", "nant kettle") for p in found)
    assert joined([piece("150", "a"), piece("Would you", "b")], "joined") == []   # no seam between a number and a word


def test_one_character_per_request_is_read_as_one_text():
    streams = Streams()
    runs = [streams.add(("shop.test", "/suggest", "query:q"), c) for c in "xpregnant"]
    assert "pregnant" in runs[-1]             # whatever came before the first letter of it
    assert streams.add(("shop.test", "/suggest", "query:q"), "kettle") == []   # a longer value ends the run
    typing = Streams()
    assert [typing.add(("h", "/s", "q"), v) for v in ("p", "pr", "pre")] == [[], [], []]   # typing is one value


# --- capture records -----------------------------------------------------------------------------


def test_a_capture_record_is_read_with_its_body(tmp_path):
    with CaptureWriter(tmp_path, inline_limit=64) as w:
        w.append("request", flow="1", method="POST", url=f"{SHOP}/ask", http_version="HTTP/1.1",
                 headers=[["Content-Type", "application/x-www-form-urlencoded"]],
                 body=w.body(b"message=" + b"x" * 100 + b"+laid+off"))   # a blob
    record = next(iter_records(tmp_path)).record
    assert where(Reading(WireRequest.of_record(record, tmp_path)), "laid off") == {"body:form:message"}


def test_a_record_whose_body_does_not_match_its_hash_is_refused(tmp_path):
    record = {"method": "POST", "url": f"{SHOP}/ask", "headers": [], "body": {"size": 3, "sha256": "0" * 64, "text": "abc"}}
    with pytest.raises(CaptureError):
        WireRequest.of_record(record, tmp_path)
