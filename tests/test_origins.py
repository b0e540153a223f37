"""Tests for the local origins as a whole: host dispatch, metrics.test and the server (shop.test: test_shop.py)."""

import selectors
import subprocess
import sys
import urllib.error
import urllib.request

import falcon.testing
import pytest

from spillage.origins.app import make_app
from spillage.origins.server import main as server_main


@pytest.fixture
def client(catalog_file):
    return falcon.testing.TestClient(make_app(catalog_file))


@pytest.mark.parametrize("host", ["shop.test:443", "SHOP.TEST", "shop.test.", "bazaar.test:443", "Bazaar.Test."])
def test_host_header_is_normalised(client, host):
    assert client.simulate_get("/", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "shop.example:8080", "127.0.0.1"])
def test_unknown_host_is_misdirected(client, host):
    result = client.simulate_get("/", headers={"Host": host})
    assert result.status_code == 421
    assert result.headers["content-type"] == "text/plain; charset=utf-8"
    assert repr(host.partition(":")[0]) in result.text
    assert "bazaar.test, metrics.test, shop.test" in result.text


def test_collect_accepts_beacons_up_to_64_kib(client):
    def collect(body):
        return client.simulate_post("/collect", headers={"Host": "metrics.test",
                                    "Content-Type": "text/plain;charset=UTF-8"}, body=body)

    ok = collect('{"t":"view","page":"https://shop.test/"}')
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == "*"
    assert collect(b"x" * 65536).status_code == 204
    assert collect(b"x" * 65537).status_code == 413


def test_tracker_script_and_about_page(client):
    result = client.simulate_get("/t.js", headers={"Host": "metrics.test"})
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("text/javascript")
    for needle in ("navigator.sendBeacon", "https://metrics.test/collect", '"click"', '"scroll"',
                   '"submit"', '"view"', "data-facet"):
        assert needle in result.text
    about = client.simulate_get("/", headers={"Host": "metrics.test"})
    assert about.status_code == 200 and "/collect" in about.text


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "example.com"])
def test_server_refuses_non_loopback_host(host, capsys):
    with pytest.raises(SystemExit) as exc:
        server_main(["--host", host])
    assert exc.value.code == 2
    assert "loopback" in capsys.readouterr().err


def test_real_server_serves_both_hosts_and_stops_cleanly():
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillage.origins.server", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=10), "server did not print its ready line"
        line = proc.stdout.readline()
        prefix = "spillage origins listening on http://127.0.0.1:"
        assert line.startswith(prefix), line
        base = f"http://127.0.0.1:{int(line[len(prefix):])}"

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def fetch(path, host, data=None):
            request = urllib.request.Request(base + path, data=data, headers={"Host": host})
            with opener.open(request, timeout=5) as response:
                return response.status, response.headers, response.read()

        status, headers, body = fetch("/s?k=sabbath", "shop.test")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert b'data-facet="kosher-kitchen"' in body and b'<li class="tile" data-product="' in body
        status, headers, body = fetch("/t.js", "metrics.test")
        assert status == 200 and b"sendBeacon" in body
        assert fetch("/collect", "metrics.test", data=b'{"t":"view"}')[0] == 204
        with pytest.raises(urllib.error.HTTPError) as err:
            fetch("/", "elsewhere.test")
        assert err.value.code == 421
    finally:
        proc.terminate()
        out, err_text = proc.communicate(timeout=10)
    assert proc.returncode == 0, err_text
    assert out == ""  # the ready line was the only stdout output
