"""`spillage import` and `spillage export`: capture files (HAR, mitmproxy flows, pcap) in and out.

An import builds the session in a temporary folder next to `--out` and renames it into place at the
end, so a failed import leaves nothing behind; an export writes its file the same way. A file that
cannot be read exits 2, a session that does not verify 1 (proxy/settings.py).
"""

import hashlib
import shutil
import secrets
import sys
from pathlib import Path

from spillage.proxy.settings import DAMAGED
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import catalog_seed
from spillage.runner.cli.verbs import require_sessions
from spillage.runner.cli.verbs import session_arg
from spillage.runner.cli.verbs import style
from spillage.runner.cli.verbs import verb

FORMATS = ("har", "mitm", "pcap")


@verb("import", help="turn a HAR, mitmproxy flow or pcap file into a session folder",
      args=[
          arg("file", type=Path, help="the capture file"),
          arg("--scenario", required=True, help="scenario file or id the traffic is audited against"),
          style("style of a persona file"),
          arg("--out", required=True, type=Path, help="the new session folder (must not exist)"),
          arg("--format", choices=FORMATS, help="the file's format (default: from its first bytes)"),
          catalog_seed("seed of the catalog copied in (default %(default)s)"),
          arg("--no-catalog", action="store_true",
              help="do not build our sites' catalog into the session (traffic of other sites)"),
      ])

def cmd_import(args) -> int:
    """Read a capture file (format guessed from its first bytes unless --format) into a new session folder that
    `spillage verify` and `spillage audit` accept; its log starts with an `import` record naming the file and
    its SHA-256 (docs/CAPTURE_FILES.md)."""
    from spillage.proxy.layout import make_private_dir
    from spillage.proxy.signing import load_or_create_key
    from spillage.proxy.formats.imports import ImportFailure
    from spillage.proxy.formats.imports import check_format
    from spillage.scenarios.loader import ScenarioError
    from spillage.scenarios.loader import resolve_scenario

    source, out = Path(args.file), Path(args.out).resolve()
    if not source.is_file():
        raise Refusal(f"{source}: no such file")
    if out.exists():
        raise Refusal(f"{out}: already exists; give a new session folder")
    try:
        scenario = resolve_scenario(args.scenario, args.style)
        fmt = check_format(source, args.format)
    except (ScenarioError, ImportFailure) as e:
        raise Refusal(str(e))
    except OSError as e:
        raise Refusal(f"{source}: {e.strerror or e}")
    tmp = out.parent / f".{out.name}.importing-{secrets.token_hex(3)}"
    out.parent.mkdir(parents=True, exist_ok=True)
    make_private_dir(tmp)
    try:
        home = spillage_home(args)
        record = build_session(source, fmt, tmp, out.name, scenario, args.seed, not args.no_catalog,
                               load_or_create_key(home), home)
        tmp.rename(out)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, ImportFailure):
            raise Refusal(str(e))
        if isinstance(e, OSError):
            raise Refusal(f"{e.filename or source}: {e.strerror or e}")
        raise
    for line in import_summary(source, fmt, record):
        print(f"spillage: {line}", file=sys.stderr)
    print(out)
    return 0


def import_summary(source: Path, fmt: str, record: dict) -> list[str]:
    """What an import says on the console: its counts, its unknown bodies, what the file lacks."""
    counts = record["counts"]
    lines = [f"imported {source.name} ({fmt}): " + ", ".join(f"{k} {v}" for k, v in counts.items())]
    if counts.get("unknown_bodies"):
        lines.append(f"{counts['unknown_bodies']} bodies are not in the file: unknown, not empty "
                     "(null in their records, each with an error record)")
    if record["lacks"]:
        lines.append(f"{source.name} lacks: {'; '.join(record['lacks'])}")
    return lines


def build_session(source: Path, fmt: str, session_dir: Path, name: str, scenario, seed: int,
                  with_catalog: bool, signing_key, home: Path) -> dict:
    """Fill `session_dir` (to be renamed `name`) as `spillage run` would: log signed by a session key
    that `signing_key` certifies, scenario copy, meta.json with status `imported` naming the catalog
    (kept in the catalog store of the spillage `home`); the import record."""
    from spillage.origins.catalog_store import stored_catalog
    from spillage.proxy.layout import SCENARIO_COPY
    from spillage.proxy.capturelog import utc_timestamp
    from spillage.proxy.formats.imports import write_import_log
    from spillage.proxy.layout import seal_permissions
    from spillage.proxy.layout import write_meta
    from spillage.proxy.signing import SessionKey
    from spillage.proxy.signing import fingerprint
    from spillage.proxy.signing import raw_public
    from spillage.proxy.verify import verify
    from spillage.proxy.version import SPILLAGE_VERSION
    from spillage.runner.session_run import catalog_scenarios
    from spillage.scenarios.dump import scenario_yaml

    started = utc_timestamp()
    signing = SessionKey.issue(signing_key, name, started)
    record = write_import_log(source, fmt, session_dir, session_name=name, signing=signing)
    (session_dir / SCENARIO_COPY).write_text(scenario_yaml(scenario), encoding="utf-8")
    catalog = None
    if with_catalog:
        scenarios, added = catalog_scenarios(scenario)
        catalog = {"sha256": stored_catalog(home, scenarios, seed)[1], "seed": seed,
                   "adds": scenario.id if added else None}
    check = verify(session_dir)
    write_meta(session_dir, {
        "session": name,
        "spillage": SPILLAGE_VERSION,
        "status": "imported",
        "scenario": {"id": scenario.id, "file": scenario.file, "copy": SCENARIO_COPY,
                     "file_sha256": hashlib.sha256(Path(scenario.file).read_bytes()).hexdigest()},
        "import": {key: record[key] for key in ("format", "file", "size", "sha256", "counts", "lacks")},
        "catalog": catalog,
        "started": started,
        "ended": utc_timestamp(),
        "capture": {"records": check.count, "head": check.head},
        "evidence": "sealed" if check.ok else "damaged",
        "signing": {"key": fingerprint(raw_public(signing_key)), "session_key": signing.key},
    })
    seal_permissions(session_dir)
    return record


@verb("export", help="write a session's traffic as HAR, mitmproxy flows or pcap",
      args=[
          session_arg(),
          arg("--format", required=True, choices=FORMATS),
          arg("--out", required=True, type=Path, help="the file to write (replaced atomically)"),
          arg("--redact-cookies", action="store_true",
              help="replace the values of cookies and other credentials in headers by REDACTED (names kept): "
                   "a file to share from a session on live sites"),
      ])
def cmd_export(args) -> int:
    """Write a session's requests and responses as HAR 1.2, a mitmproxy flow file or a pcap that Wireshark/tshark
    dissect (docs/CAPTURE_FILES.md). The log is verified first."""
    from spillage.proxy.layout import LOG_NAME
    from spillage.proxy.capturelog import CaptureError
    from spillage.proxy.documents import DocumentError
    from spillage.proxy.formats.exports import export_session
    from spillage.proxy.live import live_notice
    from spillage.proxy.verify import verify

    session, out = args.session, args.out
    require_sessions(session)
    check = verify(session)
    if not check.ok:
        raise Refusal(f"{check.summary().removeprefix('FAIL ')}", DAMAGED)
    if not out.parent.is_dir():
        raise Refusal(f"{out.parent}: no such folder")
    try:
        n = export_session(session, args.format, out, args.redact_cookies)
    except DocumentError as e:
        raise Refusal(str(e))
    except (CaptureError, ValueError) as e:
        raise Refusal(f"{session / LOG_NAME}: {e}")
    except OSError as e:
        raise Refusal(f"{e.filename or out}: {e.strerror or e}")
    print(f"spillage: exported {n} exchanges of {session.name} as {args.format}"
          + (", credentials redacted" if args.redact_cookies else ""), file=sys.stderr)
    notice = live_notice(session, "the export")
    if notice:
        print(f"spillage: {notice}" + ("; their header values are redacted, not what URLs and bodies carry"
                                       if args.redact_cookies else "; --redact-cookies keeps them out"), file=sys.stderr)
    print(out)
    return 0

