"""A bounded fuzz of every command's inputs: each damaged input gets the documented exit status and
one line on stderr naming it, never a traceback, never a half-written output, never gigabytes.

Inputs (capture logs, meta.json, catalogs, HAR, mitmproxy flows, pcap and pcapng, scenario YAML,
matrices, site profiles, audit.json, proofs) are built from real ones, then truncated, flipped,
replaced by garbage, nested deeply, given huge numbers, bad encodings, lone surrogates, huge
lines, or swapped for another format. All cases run through `spillage`'s entry point in one
child process (tests/fuzz_driver.py) whose address space is capped, so a reader that would take
gigabytes fails the test as a MemoryError instead of swapping the machine. Not timed.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest
from capture_helpers import runner_session
from capture_helpers import signed_session
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spillage.proxy.signing import load_or_create_key
from spillage.proxy.signing import public_pem
from spillage.proxy.signing import raw_public
from spillage.runner.cli import main as spillage

HERE = Path(__file__).parent
GOOD = HERE / "corpus" / "sessions" / "s01-kettle-oversharer"
SCENARIO = HERE.parent / "scenarios" / "shop" / "kettle.yaml"
MATRIX = HERE.parent / "matrices" / "smoke.yaml"
PROFILE = HERE.parent / "origins" / "profiles" / "shop.test.yaml"
HAR = HERE / "fixtures" / "captures" / "playwright.har"
PERSONAS = HERE / "fixtures" / "spillage_json" / "small.json"
DEEP = 200_000
HUGE_LINE = 40 << 20  # a 40 MiB line: bigger than any cap we set on one record or document


# --- mutations: bytes → bytes ------------------------------------------------------------------

def truncated(fraction: float) -> Callable[[bytes], bytes]:
    return lambda data: data[:int(len(data) * fraction)]


def flipped(fraction: float) -> Callable[[bytes], bytes]:
    def flip(data: bytes) -> bytes:
        i = min(int(len(data) * fraction), len(data) - 1)
        return data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
    return flip


def garbage(data: bytes) -> bytes:
    return random.Random(len(data)).randbytes(4096)


def inserted(fragment: bytes, fraction: float = 0.5) -> Callable[[bytes], bytes]:
    def insert(data: bytes) -> bytes:
        i = data.find(b"\n", int(len(data) * fraction)) + 1 or len(data)
        return data[:i] + fragment + data[i:]
    return insert


def replaced(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    return lambda data: data.replace(old, new, 1) if old in data else data + new


def utf16(data: bytes) -> bytes:
    return data.decode("utf-8", "replace").encode("utf-16")


GENERIC: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "truncated-first-byte": truncated(0.0001),
    "truncated-third": truncated(0.33),
    "truncated-last-byte": lambda data: data.rstrip()[:-1],
    "flipped-start": flipped(0.01),
    "flipped-middle": flipped(0.5),
    "flipped-end": flipped(0.99),
    "garbage": garbage,
    "deep-brackets": lambda data: b"[" * DEEP,
    "deep-objects": lambda data: b'{"a":' * DEEP,
    "huge-number": lambda data: b"9" * 100_000,
    "nul-bytes": inserted(b"\x00" * 64),
    "invalid-utf8": inserted(b"\xff\xfe\xc3\x28\xed\xa0\x80"),
    "utf16": utf16,
    "huge-line": lambda data: data + b"a" * HUGE_LINE + b"\n",
}

JSON_SPECIFIC: dict[str, Callable[[bytes], bytes]] = {
    "lone-surrogate": replaced(b'"', b'"\\ud800'),
    "huge-float": replaced(b": 0", b": 1e999999"),
    "huge-int": replaced(b": 0", b": " + b"9" * 5000),
    "list-not-object": lambda data: b"[" + data.strip() + b"]" if data.strip().startswith(b"{") else b"[]",
    "null": lambda data: b"null",
}

YAML_SPECIFIC: dict[str, Callable[[bytes], bytes]] = {
    "billion-laughs": lambda data: b"a: &a [x,x,x,x,x,x,x,x,x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n".encode()
        for i in range(9)),
    "python-tag": lambda data: b"id: !!python/object/apply:os.system ['true']\n" + data,
    "tabs": lambda data: data.replace(b"  ", b"\t"),
    "list-not-mapping": lambda data: b"- 1\n- 2\n",
    "lone-surrogate": inserted(b'x: "\\ud800"\n', 0),
    "deep-yaml": lambda data: b"[" * 20_000 + b"]" * 20_000,
    "bom-utf16": utf16,
}


def tnetstring_nest(depth: int) -> bytes:
    """A tnetstring list nested `depth` deep (built inside out without quadratic copying)."""
    sizes, size = [], 3            # "0:]"
    for _ in range(depth):
        sizes.append(size)
        size += len(str(size)) + 2
    return b"".join(f"{s}:".encode() for s in reversed(sizes)) + b"0:]" + b"]" * depth


FLOW_SPECIFIC = {
    "tnet-huge-length": lambda data: b"999999999999:",
    "tnet-deep": lambda data: tnetstring_nest(DEEP),
    "tnet-bad-type": lambda data: b"3:abc?",
}


def pcap_header(magic: int = 0xA1B2C3D4, linktype: int = 1, snaplen: int = 65535, order: str = "<") -> bytes:
    return struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)


def first_caplen(value: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:24] + data[24:32] + struct.pack("<II", value, value) + data[40:]


PCAP_SPECIFIC = {
    "caplen-4GiB": first_caplen(0xFFFFFFFF),
    "caplen-16MiB": first_caplen(16 << 20),
    "linktype-999": lambda data: pcap_header(linktype=999) + data[24:],
    "byte-swapped-header": lambda data: pcap_header(order=">") + data[24:],
    "header-only": lambda data: data[:24],
}

PCAPNG_SPECIFIC = {
    "block-length-4GiB": lambda data: data[:4] + b"\xff\xff\xff\xff" + data[8:],
    "block-length-odd": lambda data: data[:4] + struct.pack("<I", 29) + data[8:],
}


# --- cases -------------------------------------------------------------------------------------

@dataclass
class Case:
    """One command on one damaged input; `allowed` statuses; `names` what stderr must name."""
    id: str
    argv: list[str]
    allowed: set[int]
    names: str = ""
    outputs: list[str] = field(default_factory=list)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def session_copy(root: Path, name: str) -> Path:
    target = root / name
    shutil.copytree(GOOD, target)
    return target


def log_cases(root: Path) -> list[Case]:
    """The capture log of a session, damaged, through every command that reads one."""
    cases = []
    original = (GOOD / "capture.jsonl").read_bytes()
    for name, mutate in {**GENERIC, **JSON_SPECIFIC}.items():
        session = session_copy(root / "logs", name)
        write(session / "capture.jsonl", mutate(original))
        sealing = session_copy(root / "logs-sealed", name)
        write(sealing / "capture.jsonl", mutate(original))
        out = root / "out" / f"log-{name}"
        s = str(session)
        cases += [
            Case(f"log-{name}-verify", ["verify", s], {1, 2}, "capture.jsonl"),
            Case(f"log-{name}-audit", ["audit", s, "--no-write"], {1, 2}, "capture.jsonl"),
            Case(f"log-{name}-inspect", ["inspect", s], {1, 2}, "capture.jsonl"),
            Case(f"log-{name}-export", ["export", s, "--format", "har", "--out", f"{out}.har"], {1, 2},
                 "capture.jsonl", [f"{out}.har"]),
            Case(f"log-{name}-export-pcap", ["export", s, "--format", "pcap", "--out", f"{out}.pcap"], {1, 2},
                 "capture.jsonl", [f"{out}.pcap"]),
            Case(f"log-{name}-prove", ["prove", s, "--seq", "3", "--out", f"{out}.proof"], {1, 2},
                 "capture.jsonl", [f"{out}.proof"]),
            Case(f"log-{name}-diff", ["diff", str(GOOD), s], {1, 2}, "capture.jsonl"),
            Case(f"log-{name}-seal", ["seal", str(sealing)], {0, 1, 2}, "capture.jsonl"),
        ]
    return cases


def signed_log_cases(root: Path) -> list[Case]:
    """A signed log (signer, checkpoints, seal), damaged, through verify, prove and seal."""
    good = root / "signed-good"
    signed_session(good, load_or_create_key(root / "home"))
    original = (good / "capture.jsonl").read_bytes()
    cases = []
    for name, mutate in {**GENERIC, **JSON_SPECIFIC}.items():
        session = root / "signed" / name
        shutil.copytree(good, session)
        write(session / "capture.jsonl", mutate(original))
        sealing = root / "signed-sealed" / name
        shutil.copytree(session, sealing)
        out = root / "out" / f"signed-{name}.proof"
        cases += [Case(f"signed-{name}-verify", ["verify", str(session)], {1, 2}, "capture.jsonl"),
                  Case(f"signed-{name}-prove", ["prove", str(session), "--seq", "2", "--out", str(out)], {1, 2},
                       "capture.jsonl", [str(out)]),
                  Case(f"signed-{name}-seal", ["seal", str(sealing)], {0, 1, 2}, "capture.jsonl")]
    return cases


def meta_cases(root: Path) -> list[Case]:
    """meta.json damaged: it carries the sealed head, so verification fails or refuses."""
    cases = []
    original = (GOOD / "meta.json").read_bytes()
    for name, mutate in {**GENERIC, **JSON_SPECIFIC}.items():
        session = session_copy(root / "metas", name)
        write(session / "meta.json", mutate(original))
        s = str(session)
        # a flip inside a string, or a new key, leaves the sealed head as it was: then the log verifies
        allowed = {0, 1, 2} if name.startswith("flipped") or name in ("lone-surrogate", "huge-float") else {1, 2}
        cases += [Case(f"meta-{name}-{c}", [c, s, *extra], allowed, "meta.json")
                  for c, extra in (("verify", []), ("audit", ["--no-write"]), ("inspect", []))]
    return cases


def catalog_cases(root: Path) -> list[Case]:
    """A catalog that is not a usable SQLite catalog, given with --catalog."""
    good = root / "catalog-good.sqlite"
    assert spillage(["origins", "catalog", "--out", str(good)]) == 0
    other = root / "catalogs" / "other-schema.sqlite"
    other.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    files = {"other-schema": other}
    for name, mutate in {k: GENERIC[k] for k in ("empty", "truncated-third", "flipped-start", "garbage",
                                                 "deep-brackets")}.items():
        files[name] = write(root / "catalogs" / f"{name}.sqlite", mutate(good.read_bytes()))
    files["a-folder"] = root / "catalogs"
    return [Case(f"catalog-{name}-audit", ["audit", str(GOOD), "--catalog", str(path), "--no-write"], {2},
                 path.name) for name, path in files.items()]


def document_cases(root: Path, kind: str, original: bytes, suffix: str, mutations: dict,
                   command: Callable[[Path, Path], list[str]], allowed: set[int]) -> list[Case]:
    """One file of `kind` damaged every way in `mutations`, through `command(file, out)`."""
    cases = []
    for name, mutate in mutations.items():
        path = write(root / kind / f"{name}{suffix}", mutate(original))
        out = root / "out" / f"{kind}-{name}"
        # a flipped byte inside a string or a number leaves a valid document (a proof's signature covers it)
        ok = allowed | {0} if name.startswith("flipped") and kind != "proof" else allowed
        cases.append(Case(f"{kind}-{name}", command(path, out), ok, path.name, [str(out)]))
    return cases


def import_command(fmt: str | None) -> Callable[[Path, Path], list[str]]:
    return lambda path, out: (["import", str(path), "--scenario", "shop-kettle-chat", "--out", str(out)]
                              + (["--format", fmt] if fmt else []))


def capture_file_cases(root: Path) -> list[Case]:
    """HAR, flows, pcap and pcapng as `spillage import` reads them, damaged; and each under a wrong
    --format."""
    exports = root / "exports"
    exports.mkdir()
    for fmt, suffix in (("mitm", ".flows"), ("pcap", ".pcap")):
        assert spillage(["export", str(GOOD), "--format", fmt, "--out", str(exports / f"good{suffix}")]) == 0
    pcap = (exports / "good.pcap").read_bytes()
    pcapng = pcap_to_pcapng(exports / "good.pcap", exports / "good.pcapng")
    har = HAR.read_bytes()
    flows = (exports / "good.flows").read_bytes()
    cases = []
    cases += document_cases(root, "har", har, ".har", {**GENERIC, **JSON_SPECIFIC}, import_command(None), {2})
    cases += document_cases(root, "har-forced", har, ".har", {"deep-brackets": GENERIC["deep-brackets"]},
                            import_command("har"), {2})
    flow_mutations = {k: v for k, v in GENERIC.items() if not k.startswith("truncated-first")} | FLOW_SPECIFIC
    cases += document_cases(root, "flows", flows, ".flows", flow_mutations, import_command("mitm"), {2})
    pcap_mutations = {k: GENERIC[k] for k in ("empty", "truncated-first-byte", "garbage", "huge-line",
                                             "flipped-start")} | PCAP_SPECIFIC
    cases += document_cases(root, "pcap", pcap, ".pcap", pcap_mutations, import_command("pcap"), {2})
    cases += document_cases(root, "pcap-cut", pcap, ".pcap", {"truncated-third": GENERIC["truncated-third"],
                                                                "truncated-last-byte": GENERIC["truncated-last-byte"]},
                            import_command("pcap"), {0, 2})
    pcapng_mutations = {k: GENERIC[k] for k in ("truncated-first-byte", "garbage", "flipped-start")} | PCAPNG_SPECIFIC
    cases += document_cases(root, "pcapng", pcapng, ".pcapng", pcapng_mutations, import_command("pcap"), {2})
    wrong = {("har", "mitm"), ("har", "pcap"), ("flows", "har"), ("flows", "pcap"), ("pcap", "har"),
             ("pcap", "mitm"), ("pcapng", "har")}
    originals = {"har": har, "flows": flows, "pcap": pcap, "pcapng": pcapng}
    for kind, fmt in sorted(wrong):
        cases += document_cases(root, f"{kind}-as-{fmt}", originals[kind], f".{kind}", {"whole": lambda d: d},
                                import_command(fmt), {2})
    return cases


def pcap_to_pcapng(pcap: Path, target: Path) -> bytes:
    from scapy.utils import RawPcapNgWriter
    from scapy.utils import RawPcapReader

    with RawPcapReader(str(pcap)) as reader, RawPcapNgWriter(str(target)) as writer:
        for data, _meta in reader:
            writer.write(data)
    return target.read_bytes()


def yaml_cases(root: Path) -> list[Case]:
    """Scenario files, matrices and site profiles, damaged, through the commands that read them."""
    mutations = {k: v for k, v in GENERIC.items() if k not in ("truncated-last-byte",)} | YAML_SPECIFIC
    good_session = str(GOOD)
    cases = []
    cases += document_cases(root, "scenario-check", SCENARIO.read_bytes(), ".yaml", mutations,
                            lambda p, out: ["scenarios", "check", str(p)], {2})
    cases += document_cases(root, "scenario-audit", SCENARIO.read_bytes(), ".yaml", mutations,
                            lambda p, out: ["audit", good_session, "--scenario", str(p), "--no-write"], {2})
    cases += document_cases(root, "scenario-import", SCENARIO.read_bytes(), ".yaml",
                            {k: mutations[k] for k in ("garbage", "deep-yaml", "billion-laughs", "python-tag")},
                            lambda p, out: ["import", str(HAR), "--scenario", str(p), "--out", str(out)], {2})
    cases += document_cases(root, "scenario-run", SCENARIO.read_bytes(), ".yaml",
                            {k: mutations[k] for k in ("garbage", "deep-yaml", "deep-brackets", "billion-laughs",
                                                       "python-tag", "list-not-mapping", "utf16")},
                            lambda p, out: ["run", "--scenario", str(p), "--no-preflight",
                                            "--runs-dir", str(out)], {2})
    matrix_mutations = mutations | {
        "repeats-billion": replaced(b"repeats: 1", b"repeats: 1000000000"),
        "name-escapes": replaced(b"name: smoke", b"name: ../../escape"),
        "name-empty": replaced(b"name: smoke", b"name: ''"),
        "repeats-negative": replaced(b"repeats: 1", b"repeats: -1"),
        "models-many": replaced(b"models: [", b"models: [" + b"scripted:minimal, " * 50_000),
    }
    cases += document_cases(root, "matrix", MATRIX.read_bytes(), ".yaml", matrix_mutations,
                            lambda p, out: ["batch", str(p), "--dry-run", "--runs-dir", str(out)], {2})
    for name, mutate in mutations.items():
        folder = root / "profiles" / name
        path = write(folder / PROFILE.name, mutate(PROFILE.read_bytes()))
        allowed = {0, 2} if name.startswith("flipped") else {2}  # a flip inside a pattern may leave a valid one
        cases.append(Case(f"profile-{name}", ["audit", good_session, "--profiles", str(folder), "--no-write"],
                          allowed, path.name))
    return cases


def persona_cases(root: Path) -> list[Case]:
    """The paper's persona JSON, damaged, through `spillage scenarios import`."""
    return document_cases(root, "personas", PERSONAS.read_bytes(), ".json", {**GENERIC, **JSON_SPECIFIC},
                          lambda p, out: ["scenarios", "import", "--format", "spillage-json", str(p),
                                          "--site", "shop.test", "--out", str(out)], {2})


def report_cases(root: Path) -> list[Case]:
    """audit.json damaged below a runs folder: `spillage report` refuses it or reports it as failed."""
    runs = root / "runs-good" / "s01"
    shutil.copytree(GOOD, runs)
    assert spillage(["audit", str(runs)]) == 0
    original = (runs / "audit.json").read_bytes()
    cases = []
    for name, mutate in {**GENERIC, **JSON_SPECIFIC}.items():
        if name in ("truncated-last-byte", "huge-number"):
            continue
        session = root / "reports" / name / "s01"
        shutil.copytree(runs, session)
        write(session / "audit.json", mutate(original))
        out = root / "out" / f"report-{name}"
        cases.append(Case(f"audit-json-{name}-report", ["report", str(session.parent), "--out", str(out), "--quiet"],
                          {0, 2}, "audit.json", []))
    return cases


def proof_cases(root: Path) -> list[Case]:
    proof = root / "good.proof"
    assert spillage(["--home", str(root / "home"), "prove", str(root / "signed-good"), "--seq", "3",
                     "--out", str(proof)]) == 0
    return document_cases(root, "proof", proof.read_bytes(), ".json", {**GENERIC, **JSON_SPECIFIC},
                          lambda p, out: ["verify-proof", str(p)], {1, 2})


def usage_cases(root: Path) -> list[Case]:
    missing = str(root / "no-such-thing")
    a_file = str(write(root / "a-file.txt", b"hello\n"))
    cases = [Case(f"missing-{c}", [c, *pre, missing, *post], {2}, "no-such-thing") for c, pre, post in (
        ("verify", [], []), ("audit", [], ["--no-write"]), ("inspect", [], []), ("seal", [], []),
        ("export", [], ["--format", "har", "--out", str(root / "out" / "x.har")]),
        ("import", [], ["--scenario", "shop-kettle-chat", "--out", str(root / "out" / "imp")]),
        ("prove", [], ["--seq", "1"]), ("verify-proof", [], []), ("replay", [], []),
        ("diff", [str(GOOD)], []), ("report", [], ["--out", str(root / "out" / "r")]),
        ("batch", [], ["--dry-run"]))]
    cases += [Case(f"file-not-session-{c}", [c, a_file, *post], {2}, "a-file.txt") for c, post in (
        ("audit", ["--no-write"]), ("inspect", []), ("seal", []), ("replay", []),
        ("export", ["--format", "har", "--out", str(root / "out" / "y.har")]))]
    cases += [
        Case("file-not-session-verify", ["verify", a_file], {1, 2}, "a-file.txt"),  # read as a log: not one
        Case("jobs-zero", ["batch", str(MATRIX), "--jobs", "0", "--dry-run"], {2}),
        Case("jobs-negative", ["audit", str(GOOD), "--jobs", "-1"], {2}),
        Case("port-too-big", ["origins", "serve", "--port", "99999"], {2}),
        Case("seq-past-end", ["prove", str(root / "signed-good"), "--seq", "999999999"], {2}),
        Case("seq-negative", ["prove", str(root / "signed-good"), "--seq", "-5"], {2}),
        Case("unknown-judge", ["audit", str(GOOD), "--judge", "oracle", "--no-write"], {2}),
        Case("unknown-scenario-id", ["audit", str(GOOD), "--scenario", "no-such-scenario", "--no-write"], {2}),
        Case("export-over-a-folder", ["export", str(GOOD), "--format", "har", "--out", str(root)], {2}),
        Case("import-into-existing", ["import", str(HAR), "--scenario", "shop-kettle-chat", "--out", str(GOOD)], {2}),
        Case("unknown-command", ["frobnicate"], {2}),
    ]
    return cases


def broken_homes(root: Path) -> dict[str, tuple[Path, str]]:
    """Spillage homes whose signing key (or the home itself) is not one; name → (home, what stderr names)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    ed = Ed25519PrivateKey.generate()
    pem = serialization.Encoding.PEM
    keys = {
        "garbage": b"not a key\n",
        "empty": b"",
        "binary-1MiB": random.Random(1).randbytes(1 << 20),
        "rsa": rsa.generate_private_key(65537, 2048).private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                                   serialization.NoEncryption()),
        "encrypted": ed.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"secret")),
        "public": ed.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
    }
    homes = {}
    for name, data in keys.items():
        homes[name] = (root / "homes" / name, "ed25519.pem")
        write(root / "homes" / name / "signing" / "ed25519.pem", data)
    huge = root / "homes" / "sparse-200MB" / "signing" / "ed25519.pem"
    write(huge, b"")
    with open(huge, "r+b") as f:
        f.truncate(200 << 20)
    homes["sparse-200MB"] = (huge.parents[1], "ed25519.pem")
    (root / "homes" / "key-a-folder" / "signing" / "ed25519.pem").mkdir(parents=True)
    homes["key-a-folder"] = (root / "homes" / "key-a-folder", "ed25519.pem")
    (root / "homes" / "dev-zero" / "signing").mkdir(parents=True)
    (root / "homes" / "dev-zero" / "signing" / "ed25519.pem").symlink_to("/dev/zero")
    homes["dev-zero"] = (root / "homes" / "dev-zero", "ed25519.pem")
    write(root / "homes" / "signing-a-file" / "signing", b"x")
    homes["signing-a-file"] = (root / "homes" / "signing-a-file", "signing")
    homes["home-a-file"] = (write(root / "homes" / "home-a-file", b"x"), "home-a-file")
    return homes


def key_cases(root: Path) -> list[Case]:
    """A broken spillage home under every command that signs: key, seal, run and proxy start say so in one
    line, exit 2, and leave no session folder."""
    sealing = root / "signed-crashed"
    signed_session(sealing, load_or_create_key(root / "home"), seal=False)
    cases = []
    for name, (home, names) in broken_homes(root).items():
        runs = root / "out" / f"runs-home-{name}"
        proxy_runs = root / "out" / f"proxy-home-{name}"
        seal_copy = root / "key-seal" / name
        shutil.copytree(sealing, seal_copy)
        h = ["--home", str(home)]
        cases += [
            Case(f"key-{name}", [*h, "key"], {2}, names),
            Case(f"key-{name}-seal", [*h, "seal", str(seal_copy)], {2}, names),
            Case(f"key-{name}-run", [*h, "run", "--scenario", "shop-kettle-chat", "--isolation", "none",
                                     "--model", "scripted:minimal", "--runs-dir", str(runs)], {2}, names, [str(runs)]),
            Case(f"key-{name}-proxy-start", [*h, "proxy", "start", "--port", "0", "--runs-dir", str(proxy_runs)], {2},
                 names, [str(proxy_runs)]),
        ]
    return cases


def evidence_cases(root: Path) -> list[Case]:
    """prove, verify-proof and seal given what they cannot use."""
    signed = str(root / "signed-good")
    folder = root / "out" / "a-folder-for-a-proof"
    folder.mkdir()
    tlog, cosigned = root / "good.tlog-proof", root / "cosigned"
    runner_session(cosigned, load_or_create_key(root / "home"))
    assert spillage(["--home", str(root / "home"), "prove", str(cosigned), "--seq", "1", "--format", "tlog-proof",
                     "--out", str(tlog)]) == 0
    other_key = write(root / "other.pub.pem", public_pem(raw_public(Ed25519PrivateKey.generate())))
    sealed_twice = root / "seal-twice"
    signed_session(sealed_twice, load_or_create_key(root / "home"))
    cases = [
        Case("prove-out-a-folder", ["prove", signed, "--seq", "2", "--out", str(folder)], {2}, folder.name),
        Case("prove-out-no-folder", ["prove", signed, "--seq", "2", "--out", str(root / "no-dir" / "p.json")], {2},
             "no-dir", [str(root / "no-dir" / "p.json")]),
        Case("prove-consistency-backwards", ["prove", signed, "--consistency", "5", "2"], {2}, "--consistency"),
        Case("prove-consistency-zero", ["prove", signed, "--consistency", "0", "2"], {2}, "--consistency"),
        Case("prove-consistency-tlog", ["prove", signed, "--consistency", "1", "2", "--format", "tlog-proof"], {2},
             "tlog-proof"),
        Case("prove-key-garbage", ["prove", signed, "--seq", "1", "--key", "no-such-key"], {2}, "no-such-key"),
        Case("prove-seq-word", ["prove", signed, "--seq", "three"], {2}, "--seq"),
        Case("verify-proof-a-folder", ["verify-proof", str(folder)], {2}, folder.name),
        Case("verify-proof-key-garbage", ["verify-proof", str(tlog), "--key", "ed25519:zz"], {2}, "--key"),
        Case("verify-proof-key-other", ["verify-proof", str(tlog), "--key", str(other_key)], {1}, tlog.name),
        Case("seal-reason-not-utf8", ["seal", str(root / "signed-crashed"), "--reason", "bad\udcff"], {2}, "--reason"),
        Case("run-note-not-utf8", ["run", "--scenario", "shop-kettle-chat", "--system-note", "bad\udcff",
                                   "--runs-dir", str(root / "out" / "runs-note")], {2}, "--system-note",
             [str(root / "out" / "runs-note")]),
        Case("seal-sealed-already", ["seal", str(sealed_twice)], {1}, "capture.jsonl"),
    ]
    cases += document_cases(root, "tlog", tlog.read_bytes(), ".tlog-proof",
                            {k: GENERIC[k] for k in ("empty", "truncated-third", "flipped-middle", "garbage",
                                                     "nul-bytes", "invalid-utf8", "huge-line")},
                            lambda p, out: ["verify-proof", str(p), "--key", str(root / "home" / "signing" /
                                                                                  "ed25519.pub.pem")], {1, 2})
    return cases


def scheduler_cases(root: Path, silent: int) -> list[Case]:
    """audit --scheduler at what is no scheduler: each connection has a timeout, and says which ran out."""
    s = str(GOOD)
    return [
        Case("scheduler-empty", ["audit", s, "--scheduler", ""], {2}, "--scheduler"),
        Case("scheduler-http", ["audit", s, "--scheduler", "http://127.0.0.1:1"], {2}, "--scheduler"),
        Case("scheduler-no-port", ["audit", s, "--scheduler", "tcp://127.0.0.1"], {2}, "--scheduler"),
        Case("scheduler-closed-port", ["audit", s, "--scheduler", f"tcp://127.0.0.1:{closed_port()}"], {2},
             "--scheduler"),
        Case("scheduler-silent", ["audit", s, "--scheduler", f"tcp://127.0.0.1:{silent}"], {2},
             "the handshake timeout"),
        Case("scheduler-batch-silent", ["batch", str(MATRIX), "--scheduler", f"tcp://127.0.0.1:{silent}",
                                        "--no-preflight", "--runs-dir", str(root / "out" / "batch-silent")], {2},
             "the handshake timeout"),
    ]


def endpoint_cases(root: Path, silent: int) -> list[Case]:
    """A model endpoint that accepts and never answers: the preflight gives up within its timeout and
    says so (exit 3, the model does not answer), before a session folder exists."""
    runs = root / "out" / "runs-silent-model"
    return [Case("endpoint-silent-run", ["run", "--scenario", "shop-kettle-chat", "--runs-dir", str(runs), "--model",
                                         f"openai-compatible:http://127.0.0.1:{silent}/v1#m"], {3}, "within 5 s",
                 [str(runs)]),
            Case("endpoint-silent-judge", ["audit", str(GOOD), "--no-write", "--judge", "llm", "--judge-timeout", "2",
                                           "--judge-url", f"http://127.0.0.1:{silent}/v1", "--judge-model", "m"],
                 {2, 3}, "timed out after 2 s")]


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


POLICY = b"""attributes:
  - id: pregnancy
    match: [pregnant]
observers:
  third_party:
    content: block
"""


def policy_cases(root: Path) -> list[Case]:
    """Guard policy files, damaged or contradictory, under `run --guard-policy` and `proxy start`."""
    def run(path: Path, out: Path) -> list[str]:
        return ["run", "--scenario", "shop-kettle-chat", "--guard", "redact", "--guard-policy", str(path),
                "--isolation", "none", "--runs-dir", str(out)]

    mutations = {k: v for k, v in GENERIC.items() if not k.startswith("flipped")} | YAML_SPECIFIC | {
        "duplicate-id": lambda data: data.replace(b"observers:", b"  - id: pregnancy\n    match: [expecting]\nobservers:"),
        "unknown-observer": replaced(b"third_party:", b"fourth_party:"),
        "unknown-rule-value": replaced(b"content: block", b"content: shred"),
        "attribute-without-match": replaced(b"    match: [pregnant]\n", b""),
        "unknown-key": lambda data: data + b"mode: block\n",
    }
    cases = document_cases(root, "policy", POLICY, ".yaml", mutations, run, {2})
    path = write(root / "policy-start" / "duplicate.yaml", mutations["duplicate-id"](POLICY))
    out = root / "out" / "policy-proxy-start"
    cases.append(Case("policy-duplicate-proxy-start", ["proxy", "start", "--port", "0", "--guard", "block",
                                                       "--guard-policy", str(path), "--runs-dir", str(out)],
                      {2}, "duplicate.yaml", [str(out)]))
    cases.append(Case("policy-bad-mode-proxy-start", ["proxy", "start", "--guard", "shred"], {2}, "--guard"))
    return cases


def pcapng_blocks(data: bytes) -> list[tuple[int, int]]:
    """(offset, type) of each block of a little-endian pcapng file."""
    blocks, at = [], 0
    while at + 8 <= len(data):
        kind, length = struct.unpack_from("<II", data, at)
        blocks.append((at, kind))
        at += length
    return blocks


def first_block(kind: int) -> Callable[[bytes], int]:
    return lambda data: next(at for at, k in pcapng_blocks(data) if k == kind)


def interface_cases(root: Path) -> list[Case]:
    """pcapng packet blocks that name an interface the file does not describe, and damaged lengths: each
    refused at its packet, by number and byte."""
    pcapng = (root / "exports" / "good.pcapng").read_bytes()
    pcap = (root / "exports" / "good.pcap").read_bytes()
    epb, idb = first_block(6)(pcapng), first_block(1)(pcapng)

    def interface(n: int) -> Callable[[bytes], bytes]:
        return lambda data: data[:epb + 8] + struct.pack("<I", n) + data[epb + 12:]

    def without_idb(data: bytes) -> bytes:
        length = struct.unpack_from("<I", data, idb + 4)[0]
        return data[:idb] + data[idb + length:]

    def epb_caplen(data: bytes) -> bytes:
        return data[:epb + 20] + struct.pack("<I", 0x7FFFFFF0) + data[epb + 24:]

    cases = []
    for name, mutate, names in (("interface-5", interface(5), "interface 5"),
                                ("interface-huge", interface(0xFFFFFFFF), "interface 4294967295"),
                                ("no-interface-block", without_idb, "packet 1"),
                                ("epb-caplen", epb_caplen, "packet 1")):
        path = write(root / "pcapng-blocks" / f"{name}.pcapng", mutate(pcapng))
        out = root / "out" / f"pcapng-blocks-{name}"
        cases.append(Case(f"pcapng-{name}", import_command("pcap")(path, out), {2}, names, [str(out)]))
    for name, value in (("caplen-16MiB", 16 << 20), ("caplen-4GiB", 0xFFFFFFFF)):
        path = write(root / "pcap-place" / f"{name}.pcap", first_caplen(value)(pcap))
        out = root / "out" / f"pcap-place-{name}"
        cases.append(Case(f"pcap-place-{name}", import_command("pcap")(path, out), {2},
                          "packet 1 (its record at byte 24)", [str(out)]))
    return cases


BUILDERS = (log_cases, signed_log_cases, meta_cases, catalog_cases, capture_file_cases, yaml_cases, persona_cases,
            report_cases, proof_cases, usage_cases, key_cases, evidence_cases, policy_cases, interface_cases)


@pytest.fixture(scope="module")
def silent_listener():
    """A port that accepts connections and never says a word."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def accept() -> None:
        try:
            while True:
                held.append(server.accept())
        except OSError:   # closed at the end of the module
            pass

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory, silent_listener) -> dict[str, tuple[Case, dict]]:
    """Every case built and run in the capped child; case id → (case, its result)."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "out").mkdir()
    cases = [case for build in BUILDERS for case in build(root)] + scheduler_cases(root, silent_listener) \
        + endpoint_cases(root, silent_listener)
    assert len({c.id for c in cases}) == len(cases), "case ids must be unique"
    cases_file = root / "cases.json"
    cases_file.write_text(json.dumps([{"id": c.id, "argv": ["--home", str(root / "home"), *c.argv],
                                       "cwd": str(root)} for c in cases]))
    done = subprocess.run([sys.executable, str(HERE / "fuzz_driver.py"), str(cases_file)],
                          capture_output=True, text=True, timeout=3600)
    results = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert len(results) == len(cases), f"the driver stopped after {len(results)} of {len(cases)} cases: " \
                                       f"{done.stderr[-2000:]}"
    return {c.id: (c, results[c.id]) for c in cases}


def problems(case: Case, result: dict) -> list[str]:
    """What is wrong with one case's answer, if anything."""
    status, err = result["status"], result["stderr"]
    found = []
    if status not in case.allowed:
        found.append(f"exit {status!r}, expected one of {sorted(case.allowed)}")
    for word in ("Traceback", "internal error", "MemoryError", "RecursionError"):
        if word in err:
            found.append(f"stderr says {word}")
    if status != 0 and case.names and case.names not in err + result["stdout"]:
        found.append(f"does not name {case.names}")
    if status != 0:
        found += [f"left a half-written {p}" for p in case.outputs if Path(p).exists()]
    return found


def test_every_damaged_input_gets_the_documented_status_and_one_line(fuzz):
    failures = {cid: (problems(case, result), result) for cid, (case, result) in fuzz.items()}
    failures = {cid: f for cid, f in failures.items() if f[0]}
    report = "\n".join(f"{cid}\t{'; '.join(p)}\t{' | '.join((r['stderr'] or r['stdout']).strip().splitlines()[-2:])[:300]}"
                       for cid, (p, r) in sorted(failures.items()))
    assert not failures, f"{len(failures)} of {len(fuzz)} cases:\n{report}"


def test_the_fuzz_is_several_hundred_cases_over_every_input_kind(fuzz):
    kinds = {cid.split("-")[0] for cid in fuzz}
    assert len(fuzz) >= 400
    assert {"log", "signed", "meta", "catalog", "har", "flows", "pcap", "pcapng", "scenario", "matrix", "profile",
            "audit", "proof", "personas", "key", "prove", "verify", "seal", "scheduler", "endpoint", "policy",
            "tlog"} <= kinds, kinds
