"""Recovering the free text a request carried: every encoding undone, malformed input survived."""

import base64
import gzip
import json

import pytest

from spillage.audit.wire import MAX_DECODINGS, decode_value, request_texts, texts_of
from spillage.proxy.capturelog import CaptureError, CaptureWriter, iter_records
from spillage.scenarios.matching import find_form

PREGNANT = ("pregnant", "pregnancy")
CTX = base64.b64encode(b'{"note":"I am pregnant"}').decode()  # eyJub3RlIjoiSSBhbSBwcmVnbmFudCJ9
SHOP = "https://shop.test"


def states(texts: list[str], forms=PREGNANT) -> bool:
    return any(find_form(t, forms) for t in texts)


# --- decode_value --------------------------------------------------------------------------


@pytest.mark.parametrize("value, decoded", [
    ("pregnant%20mom", "pregnant mom"),
    ("pregnant%2Bmom", "pregnant+mom"),
    ("pregnant+mom", "pregnant mom"),
    ("pregnant%252Bmom", "pregnant mom"),                    # double-encoded, + then read as space
    ("pregnant%25252520mom", "pregnant mom"),                # quadruple-encoded
    ("caf%E9", "café"),                                      # Latin-1 percent-escapes
    ("caf%C3%A9", "café"),
    ("&#112;regnant", "pregnant"),
    ("I&#39;m pregnant &amp; tired", "I'm pregnant & tired"),
    ("I&#x27;m &eacute;puis&eacute;e", "I'm épuisée"),
    ("&amp;#112;regnant", "pregnant"),                       # entity-encoded entity
    (CTX, '{"note":"I am pregnant"}'),
    (CTX, "I am pregnant"),                                  # JSON inside base64
    (CTX.rstrip("="), "I am pregnant"),                      # unpadded
    (base64.urlsafe_b64encode("ünï?>>".encode()).decode(), "ünï?>>"),   # base64url
    ('{"query": "I am pregnant", "n": 3}', "I am pregnant"),
    ('{"a": "laid off", "b": ["pregnant"]}', "laid off | pregnant"),      # values joined, keys not
    ('["x", {"ctx": "%s"}]' % CTX, "I am pregnant"),         # base64 inside JSON
    ("%7B%22q%22%3A%22pregnant%22%7D", "pregnant"),          # JSON inside percent-encoding
])
def test_decode_value(value, decoded):
    assert decode_value(value)[0] == value
    assert decoded in decode_value(value)


@pytest.mark.parametrize("value", [
    "pregnant",            # valid base64 of binary, not text
    "kettles1",
    "airports",            # valid base64 of UTF-8 text "j*颻l", but a plain word
    "Question",
    "12345678",
    "abcd",                # valid base64, too short
    "aGk=",                # "hi": too short
    "not base64!",
    "{not json",
    '{"a": 1}',            # JSON without strings
    "SPF 50",
])
def test_decode_value_leaves_plain_values_alone(value):
    assert decode_value(value) == [value]


def test_decode_value_keys_of_json_are_not_text():
    assert not any("secret" in t for t in decode_value('{"secret": "x"}')[1:])


def test_decode_value_base64_is_undone_once_per_chain():
    twice = base64.b64encode(CTX.encode()).decode()
    assert CTX in decode_value(twice)
    assert "I am pregnant" not in decode_value(twice)


def test_decode_value_is_bounded():
    many = json.dumps([f"a%2{i % 10}b&amp;{i}" for i in range(500)])
    assert len(decode_value(many)) == MAX_DECODINGS
    huge = "%25" * 2_000_000
    decoded = decode_value(huge)
    assert decoded[0] == huge and all(len(d) <= 64 * 1024 for d in decoded[1:])


@pytest.mark.parametrize("value", [
    "", "%", "%zz%", "%%%25", "&#xZZ;", "&#99999999999;", "&", "====", "@@@@@@@@", "eyJ", "eyJub3Rl",
    "[" * 100_000, '"' + "\\u" * 1000, "\x00\x01\x02", "\ud800", "=?utf-8?q?x?=",
])
def test_decode_value_never_raises(value):
    assert decode_value(value)[0] == value


# --- request_texts -------------------------------------------------------------------------


def test_query_values():
    texts = request_texts(f"{SHOP}/s?k=kettle&q=pregnant%2Bmom&ctx={CTX}&page=2#frag", [], None)
    assert "kettle" in texts and "pregnant+mom" in texts and "I am pregnant" in texts
    assert not any("frag" in t or t == "k" or "shop.test" in t for t in texts)


def test_query_value_without_name_and_double_encoding():
    assert "I am pregnant" in request_texts(f"{SHOP}/s?I%2520am%2520pregnant", [], None)


def test_path_segments_with_spaces_or_escapes():
    texts = request_texts(f"{SHOP}/search/pregnant%20mom/p/42", [], None)
    assert "pregnant mom" in texts and "42" not in texts and "search" not in texts


def test_urlencoded_body():
    body = b"message=I%27m+pregnant&csrf=abc123"
    texts = request_texts(f"{SHOP}/ask", [["Content-Type", "application/x-www-form-urlencoded"]], body)
    assert "I'm pregnant" in texts


def test_urlencoded_body_in_latin_1():
    body = b"city=Z%FCrich"
    headers = [["content-type", "application/x-www-form-urlencoded; charset=ISO-8859-1"]]
    assert states(request_texts(f"{SHOP}/ask", headers, body), ("zurich",))


def test_json_body():
    body = json.dumps({"query": "I am pregnant", "meta": {"tags": ["laid-off", 3, None]}}).encode()
    texts = request_texts(f"{SHOP}/api", [["Content-Type", "application/json"]], body)
    assert "I am pregnant" in texts and "laid-off" in texts and "query" not in texts


def test_ndjson_and_json_as_text_plain():
    batch = b'{"e":"view","q":"pregnant"}\n{"e":"click","label":"laid off"}\n'
    texts = request_texts(f"{SHOP}/_log", [["Content-Type", "application/json"]], batch)
    assert "pregnant" in texts and "laid off" in texts
    beacon = b'{"event":"type","value":"I am pregnant"}'   # navigator.sendBeacon's text/plain
    assert states(request_texts(f"{SHOP}/_log", [["Content-Type", "text/plain;charset=UTF-8"]], beacon))


def test_json_body_in_utf_16():
    body = json.dumps({"q": "Zürich"}).encode("utf-16")
    texts = request_texts(f"{SHOP}/api", [["Content-Type", "application/json; charset=utf-16"]], body)
    assert "Zürich" in texts


MULTIPART = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="message"\r\n\r\n'
    b"Hi, I am pregnant\r\nand need a kettle\r\n"
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="meta"\r\nContent-Type: application/json\r\n\r\n'
    b'{"note": "laid off"}\r\n'
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="photo"; filename="ultrasound-12-weeks.png"\r\n'
    b"Content-Type: image/png\r\n\r\n"
    b"\x89PNG\r\n\x1a\n pregnant \x00\x01\r\n"
    b"--XyZ--\r\n"
)


def test_multipart_body():
    headers = [["Content-Type", 'multipart/form-data; boundary="XyZ"']]
    texts = request_texts(f"{SHOP}/ask", headers, MULTIPART)
    assert "Hi, I am pregnant\r\nand need a kettle" in texts
    assert "laid off" in texts
    assert "ultrasound-12-weeks.png" in texts
    assert not any("PNG" in t for t in texts)            # file contents are skipped


def test_multipart_with_wrong_boundary_is_read_as_text():
    headers = [["Content-Type", "multipart/form-data; boundary=nope"]]
    assert states(request_texts(f"{SHOP}/ask", headers, MULTIPART.replace(b"\x00\x01", b"")))


def test_gzip_body():
    body = gzip.compress(b"q=pregnant")
    headers = [["Content-Type", "application/x-www-form-urlencoded"], ["Content-Encoding", "gzip"]]
    assert request_texts(f"{SHOP}/s", headers, body) == ["pregnant"]


def test_binary_body_without_type_is_skipped_and_text_is_kept():
    assert request_texts(f"{SHOP}/x", [], bytes(range(256)) * 4) == []
    assert request_texts(f"{SHOP}/x", [], b"I am pregnant") == ["I am pregnant"]


def test_only_the_first_mebibyte_of_a_body_is_read():
    body = b"a" * (1024 * 1024) + b" pregnant"
    assert not states(request_texts(f"{SHOP}/x", [["Content-Type", "text/plain"]], body))


@pytest.mark.parametrize("content_type, body", [
    ("application/json", b'{"q": "pregnant"'),                        # truncated JSON
    ("application/json", b"[" * 200_000),                             # too deep
    ("application/json; charset=no-such-charset", b'{"q": "x"}'),
    ("multipart/form-data", MULTIPART),                               # no boundary
    ("multipart/form-data; boundary=XyZ", b"--XyZ\r\ngarbage without headers"),
    ("multipart/form-data; boundary=XyZ", b"--XyZ"),
    ("application/x-www-form-urlencoded", b"a=%%%&&==&=b&%ZZ"),
    ("text/plain; charset=utf-8", b"\xff\xfe\xfa"),
    ("", b"\x1f\x8b not gzip"),
    ("\x00;;;===", b"x"),
])
def test_request_texts_never_raises(content_type, body):
    headers = [["Content-Type", content_type], ["Content-Encoding", "gzip"], ["bad"]]
    assert isinstance(request_texts(f"{SHOP}/x", headers, body), list)


@pytest.mark.parametrize("url", ["", "not a url", "http://[::1", "//x/%", "?", "www.google.com:443", "/%E9%"])
def test_request_texts_never_raises_on_urls(url):
    assert isinstance(request_texts(url, [], None), list)


# --- texts_of ------------------------------------------------------------------------------


def test_texts_of_capture_records(tmp_path):
    with CaptureWriter(tmp_path, inline_limit=64) as w:
        common = dict(http_version="HTTP/1.1")
        w.append("request", flow="1", method="GET", url=f"{SHOP}/s?k=pregnant", headers=[], body=None, **common)
        w.append("request", flow="2", method="POST", url=f"{SHOP}/ask",
                 headers=[["Content-Type", "application/x-www-form-urlencoded"]],
                 body=w.body(b"message=" + b"x" * 100 + b"+laid+off"), **common)   # a blob
        w.append("request", flow="3", method="POST", url=f"{SHOP}/ask",
                 headers=[["Content-Type", "text/plain; charset=latin-1"]],
                 body=w.body("Zürich".encode("latin-1")), **common)             # inline base64
        w.append("egress_blocked", flow="4", method="GET", url="http://www.google.com/search?q=pregnant+kettle",
                 host="www.google.com", port=80, background=False, headers=[], body=None, reason="not .test")
        w.append("egress_blocked", flow="5", method="CONNECT", url="www.google.com:443",
                 host="www.google.com", port=443, background=True, headers=[], body=None, reason="not .test")
    records = [line.record for line in iter_records(tmp_path)]
    assert texts_of(records[0], tmp_path) == ["pregnant"]
    assert states(texts_of(records[1], tmp_path), ("laid off",))
    assert texts_of(records[2], tmp_path) == ["Zürich"]
    assert "pregnant kettle" in texts_of(records[3], tmp_path)
    assert texts_of(records[4], tmp_path) == []


def test_texts_of_refuses_a_body_that_does_not_match_its_hash(tmp_path):
    record = {"url": f"{SHOP}/ask", "headers": [], "body": {"size": 3, "sha256": "0" * 64, "text": "abc"}}
    with pytest.raises(CaptureError):
        texts_of(record, tmp_path)


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, br", "deflate"])
def test_compressed_request_bodies_are_read(coding):
    import zlib

    import brotli
    from backports import zstd

    body = json.dumps({"note": "a kettle for my divorced dad"}).encode()
    encode = {"br": brotli.compress, "zstd": zstd.compress, "deflate": zlib.compress,
              "gzip, br": lambda b: brotli.compress(gzip.compress(b))}[coding]
    texts = request_texts("https://shop.test/api/note", [["Content-Type", "application/json"],
                                                         ["Content-Encoding", coding]], encode(body))
    assert texts == ["a kettle for my divorced dad"]


def test_a_compressed_bomb_is_read_only_up_to_the_cap():
    from backports import zstd

    texts = request_texts("https://shop.test/x", [["Content-Type", "text/plain"], ["Content-Encoding", "zstd"]],
                          zstd.compress(b"a" * 50_000_000))
    assert len(texts[0]) == 1024 * 1024
