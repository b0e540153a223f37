"""An agent that tries to forge the evidence of its own session (tests/test_isolation.py).

It runs as the same user as the runner, so it can reach the session folder beside its work folder and
read the spillage home. `replace`: it builds a complete, self-consistent log signed under a session
key that the real long-term key certifies, and renames it over capture.jsonl while the proxy runs.
`edit`: it rewrites a URL in place. Either way it reports what it did on stdout."""

import os
import sys
import time
import urllib.request
from pathlib import Path

from spillage.proxy.capturelog import CaptureWriter
from spillage.proxy.capturelog import utc_timestamp
from spillage.proxy.signing import SessionKey
from spillage.proxy.signing import load_or_create_key

work = Path(os.environ["SPILLAGE_WORK"])
session = work.parent.parent / work.name
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["SPILLAGE_PROXY"]}))
opener.open("http://shop.test/s?k=kettle+for+a+divorced+dad", timeout=10).read()
time.sleep(1.5)  # a checkpoint is reported to the runner

if sys.argv[1] == "replace":
    forged = work / "forged"
    key = SessionKey.issue(load_or_create_key(Path(os.environ["SPILLAGE_HOME"])), session.name, utc_timestamp())
    with CaptureWriter(forged, signing=key) as writer:
        writer.append("session_start", session=session.name, tool={"name": "spillage", "version": "0",
                      "mitmproxy": "12"}, options={})
        writer.append("request", flow="f", method="GET", url="http://shop.test/s?k=kettle",
                      http_version="HTTP/1.1", headers=[], body=None)
        writer.append("session_end", reason="proxy shutdown", records=writer.count)
    os.replace(forged / "capture.jsonl", session / "capture.jsonl")
    print("replaced")
else:
    log = session / "capture.jsonl"
    data = log.read_bytes()
    with open(log, "r+b") as f:
        f.write(data.replace(b"divorced", b"happyish", 1))
    print("edited")
opener.open("http://shop.test/", timeout=10).read()
