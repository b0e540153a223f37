"""Capture log speed against `sha256sum` of the same bytes, measured in the same run.

    python bench/bench_capturelog.py [--records 20000]

Writes the same records unsigned and signed (a Merkle tree head over every line, an Ed25519-signed
checkpoint every 256 records), verifies both, and cuts and checks an inclusion proof and a consistency
proof from the signed one. Prints one line per measurement and the ratios; docs/BENCHMARKS.md records
the results.
"""

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import iter_records
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.proofs import check_proof
from spillage.proxy.proofs import prove_consistency
from spillage.proxy.proofs import prove_inclusion
from spillage.proxy.signing import SessionKey
from spillage.proxy.verify import verify

HEADERS = [["Host", "shop.test"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/150"],
           ["Accept", "text/html,application/xhtml+xml"], ["Accept-Language", "en-US,en;q=0.9"]]
PAGE = ("<li data-product=\"106\"><a href=\"/p/106\">Fenn Gooseneck Kettle</a></li>\n" * 60).encode()


def timed(fn) -> tuple[float, object]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def write_session(session: Path, records: int, signing: SessionKey | None) -> None:
    with CaptureWriter(session, signing=signing) as writer:
        writer.append("session_start", session=session.name,
                      tool={"name": "bench", "version": "0", "mitmproxy": "-"}, options={})
        for i in range(records // 2):
            request = writer.append("request", flow=f"f{i}", method="GET",
                                    url=f"https://shop.test/s?k=kettle+{i}", http_version="HTTP/2.0",
                                    headers=HEADERS, body=None)
            writer.append("response", flow=f"f{i}", request=request["seq"], status=200, reason="OK",
                          http_version="HTTP/2.0", headers=HEADERS, body=writer.body(PAGE))
        writer.append("session_end", reason="bench", records=writer.count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, signed = Path(tmp) / "plain", Path(tmp) / "signed"
        signing = SessionKey.issue(Ed25519PrivateKey.generate(), signed.name, utc_timestamp())
        t_write, _ = timed(lambda: write_session(plain, args.records, None))
        t_write_signed, _ = timed(lambda: write_session(signed, args.records, signing))
        log = signed / LOG_NAME
        size_mb = log.stat().st_size / 1e6
        t_sha, _ = timed(lambda: subprocess.run(["sha256sum", str(log)], check=True, capture_output=True))
        t_read, _ = timed(lambda: sum(1 for _ in iter_records(signed)))
        t_verify, _ = timed(lambda: verify(plain))
        t_verify_signed, result = timed(lambda: verify(signed))
        assert result.ok and result.signed, result.summary()
        sizes = sorted(r.record["records"] for r in iter_records(signed) if r.record["kind"] == "checkpoint")
        t_prove, proof = timed(lambda: prove_inclusion(signed, args.records // 2))
        t_check, verdict = timed(lambda: check_proof(proof))
        t_consistency, consistency = timed(lambda: prove_consistency(signed, sizes[len(sizes) // 2], sizes[-1]))
        assert verdict[0] and check_proof(consistency)[0]
    print(f"log: {args.records} records, {size_mb:.1f} MB signed ({len(sizes)} checkpoints)")
    for name, seconds in [("sha256sum (anchor)", t_sha), ("write, unsigned", t_write),
                          ("write, signed", t_write_signed), ("read", t_read), ("verify, unsigned", t_verify),
                          ("verify, signed", t_verify_signed), ("prove inclusion", t_prove),
                          ("prove consistency", t_consistency)]:
        print(f"{name:<20} {seconds:8.3f} s  {size_mb / seconds:8.1f} MB/s  {seconds / t_sha:6.1f}x anchor")
    print(f"{'verify-proof':<20} {t_check * 1000:8.3f} ms (no log at hand)")


if __name__ == "__main__":
    main()
