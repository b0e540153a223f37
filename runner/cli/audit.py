"""`spillage audit`: actions, leaks, choices and recoveries of sessions (docs/AUDIT.md)."""

import json
from pathlib import Path

from spillage.audit.judge_default import DEFAULT_JUDGE
from spillage.proxy.settings import AGENT_FAILED
from spillage.proxy.settings import BAD_INPUT
from spillage.runner.cli.console import progress
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.types import positive
from spillage.runner.cli.types import scheduler_address
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import quiet
from spillage.runner.cli.verbs import style
from spillage.runner.cli.verbs import verb


@verb("audit", help="actions, leaks, choices and recoveries of sessions (writes audit.json)", args=[
    arg("runs", type=Path, nargs="*", metavar="RUNS",
        help="session folders, or folders holding sessions (searched recursively)"),
    arg("--judge", default=DEFAULT_JUDGE,
        help=f"embedding, lexical or llm (default {DEFAULT_JUDGE}); with --evaluate several side by side: "
             "lexical,embedding"),
    arg("--judge-url", help="llm judge: base URL of an OpenAI-compatible API (…/v1)"),
    arg("--judge-model", help="llm judge: the model name"),
    arg("--judge-threshold", type=float, help="embedding judge: similarity threshold"),
    arg("--judge-timeout", type=float, help="llm judge: seconds to wait for each answer (default 120)"),
    arg("--jobs", type=positive, default=1, help="worker processes for many sessions (default 1)"),
    arg("--scheduler", metavar="tcp://HOST:PORT", type=scheduler_address,
        help="audit on the workers of this Dask scheduler instead (docs/CLUSTER.md)"),
    arg("--scenario", help="scenario file or id (default: each session's copy)"),
    arg("--profiles", type=Path, action="append", default=[], metavar="DIR",
        help="a folder of site profiles (*.yaml, docs/SITE_PROFILES.md) added to the shipped ones; repeatable"),
    style("style of a persona file"),
    arg("--catalog", type=Path, metavar="FILE",
        help="the catalog the sessions' sites served, for a session that neither holds its "
             "catalog.sqlite nor names it in meta.json (the audit never guesses it)"),
    arg("--format", choices=["json", "text"],
        help="one session: the report as json (default) or text; --evaluate: text (default) or json"),
    arg("--no-write", action="store_true", help="one session: do not write its audit.json"),
    quiet("many sessions: no progress (default: a bar on a terminal, else one line per audited session)"),
    arg("--allow-unverified", action="store_true",
        help="audit the records before the first damage instead of refusing (the report says so)"),
    arg("--evaluate", type=Path, metavar="CORPUS",
        help="audit a labelled corpus and print precision and recall per category"),
])
def cmd_audit(args) -> int:
    from spillage.audit.batch import audit_many
    from spillage.audit.batch import find_sessions
    from spillage.audit.judges import JudgeError
    from spillage.audit.judges import make_judge
    from spillage.audit.session_audit import AuditError
    from spillage.audit.session_audit import audit_session
    from spillage.audit.session_audit import summary_text
    from spillage.audit.session_audit import write_report
    from spillage.origins.grammar import load_grammars
    from spillage.scenarios.loader import resolve_scenario

    options = {k: v for k, v in (("base_url", args.judge_url), ("model", args.judge_model),
                                 ("threshold", args.judge_threshold), ("timeout", args.judge_timeout)) if v is not None}
    try:
        if args.evaluate:
            from spillage.audit.evaluate import evaluation_text  # its CorpusError is a ValueError

            print(evaluation_text(args.evaluate, args.judge, args.judge_threshold, args.judge_url,
                                  args.judge_model, args.format == "json", findings=True))
            return 0
        make_judge(args.judge, **options)  # a bad judge name or option fails here, once
        load_grammars(args.profiles, shipped=False)  # and so does a bad site profile
        if not args.runs:
            raise Refusal("give session folders or run folders to audit, or --evaluate CORPUS")
        scenario = resolve_scenario(args.scenario, args.style) if args.scenario else None
        sessions = find_sessions(args.runs)
        if args.scheduler and (args.scenario or args.profiles or args.catalog or args.jobs > 1):
            raise Refusal("--scheduler audits each session with its own scenario copy and catalog on the workers: "
                          "it takes no --scenario, --profiles, --catalog or --jobs")
        if len(sessions) == 1 and len(args.runs) == 1 and args.jobs <= 1 and not args.scheduler:
            report = audit_session(sessions[0], scenario, args.allow_unverified, make_judge(args.judge, **options),
                                   args.profiles, args.catalog, spillage_home(args))
            if not args.no_write:
                write_report(sessions[0], report, spillage_home(args))
            print(summary_text(report) if args.format == "text" else json.dumps(report, indent=2, ensure_ascii=False))
            return 0
    except (AuditError, JudgeError, ValueError) as e:
        raise Refusal(str(e), getattr(e, "status", BAD_INPUT)) from None   # AuditError and JudgeError say theirs
    bar = not args.quiet
    if args.scheduler:
        outcomes = audit_cluster(args, sessions, options, bar)
    else:
        outcomes = audit_many(sessions, args.judge, options, args.jobs, args.allow_unverified, scenario, bar=bar,
                              profile_dirs=args.profiles, catalog=args.catalog, home=spillage_home(args))
    for o in outcomes:
        if o.error:
            print(f"{o.session}\tFAILED\t{o.error}")
        else:
            s = o.summary
            print(f"{o.session}\tactions {s['actions']}\tevents {sum(s['occurrences'].values())}\t"
                  f"OR {s['oversharing_rate']}\tsuccess {s['task_success']}"
                  + ("" if s["verified"] else "\tUNVERIFIED"))
    failed = sum(bool(o.error) for o in outcomes)
    progress(f"audited {len(outcomes) - failed} of {len(outcomes)} sessions"
             + (f", {failed} failed" if failed else "") + "; each has its audit.json")
    if any(o.status == AGENT_FAILED for o in outcomes):
        return AGENT_FAILED   # a judge that cannot be trusted, like a model that does not answer
    return 1 if failed else 0


def audit_cluster(args, sessions, options: dict, bar: bool):
    """The outcomes of auditing `sessions` on the Dask cluster of --scheduler (Refusal when it cannot be
    reached)."""
    from spillage.runner.cluster import ClusterError
    from spillage.runner.cluster import connect
    from spillage.runner.cluster_audit import audit_on_cluster

    try:
        client = connect(args.scheduler, browsers=False)
    except ClusterError as e:
        raise Refusal(str(e)) from None
    try:
        return audit_on_cluster(client, sessions, args.judge, options, args.allow_unverified, bar, spillage_home(args))
    finally:
        client.close()
