"""The `spillage` command."""

import argparse
import json
import os
import sys
from pathlib import Path

from spillage.runner.console import AGENT_FAILED
from spillage.runner.console import BAD_INPUT
from spillage.runner.console import DEFAULT_RUNS
from spillage.runner.console import INTERNAL
from spillage.runner.console import INTERRUPTED
from spillage.runner.console import ISOLATION
from spillage.runner.console import progress
from spillage.runner.console import spillage_home
from spillage.runner.console import utf8_text
from spillage.agents.model_spec import DEFAULT_MODEL
from spillage.agents.model_spec import MODEL_HELP
from spillage.addons.guard_policy import MODES as GUARD_MODES
from spillage.audit.judge_default import DEFAULT_JUDGE

LIVE_HELP = ("let requests to these real hosts through, captured and signed (NAME, *.NAME for the names under "
             "it, :PORT; @FILE for one a line); every other host stays refused (README, Live sites)")


def cmd_run(args) -> int:
    from spillage.agents.model_spec import ModelSpecError
    from spillage.agents.model_spec import parse_model
    from spillage.proxy.layout import check_session_name
    from spillage.proxy.live import live_hosts
    from spillage.runner.conditions import Condition
    from spillage.runner.session_run import AgentSpec
    from spillage.runner.session_run import run_session
    from spillage.scenarios.loader import resolve_scenario

    scenario = resolve_scenario(args.scenario, args.style)
    condition = Condition(args.prompt, args.system_note, args.guard, str(args.guard_policy or ""))
    try:
        condition.task(scenario)
        condition.check_guard(scenario)   # a bad policy is one line before anything starts
        if args.session_name:
            check_session_name(args.session_name)
        live = live_hosts(args.live)
    except ValueError as e:
        progress(str(e))
        return 2
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.model_endpoint and not command:
        progress("--model-endpoint is for a command agent (-- CMD); a framework's endpoint is its --model's")
        return 2
    if command:
        agent = AgentSpec.command(command, args.model_endpoint)
    else:
        if args.model is None:
            args.model = DEFAULT_MODEL
            progress(f"model {DEFAULT_MODEL} (no --model given): a scripted policy that overshares on purpose, no LLM")
        try:
            spec = parse_model(args.model, args.base_url)  # fail here, not inside the child
        except ModelSpecError as e:
            progress(str(e))
            return 2
        if not args.no_preflight:
            from spillage.runner.preflight import PreflightError
            from spillage.runner.preflight import preflight
            try:
                preflight(spec)
            except PreflightError as e:
                progress(f"{e} (checked before starting; --no-preflight skips the check)")
                return 3
        make = AgentSpec.autogen if args.agent == "autogen" else AgentSpec.browser_use
        agent = make(args.model, args.max_steps, args.base_url)
    try:
        isolation = agent_isolation(args, agent)
    except ValueError as e:
        progress(str(e))
        return 2
    try:
        result = run_session(scenario, agent, args.runs_dir, spillage_home(args), args.timeout,
                             progress, args.seed, condition, args.session_name, args.model_via_proxy, isolation,
                             live)
    except FileExistsError as e:
        progress(f"session folder exists already: {e.filename}")
        return 2
    print(result.session_dir, flush=True)
    if not result.capture_ok:
        progress(f"the evidence is not clean ({result.evidence}): `spillage verify {result.session_dir}` "
                 "says why")
        return 1
    if args.audit:
        from spillage.audit.session_audit import AuditError   # the audit's modules: once the run is over
        from spillage.audit.session_audit import audit_session
        from spillage.audit.session_audit import summary_text
        from spillage.audit.session_audit import write_report

        try:
            report = audit_session(result.session_dir, home=spillage_home(args))
        except AuditError as e:
            progress(f"the audit failed: {e}")
            return e.status
        write_report(result.session_dir, report)
        print(summary_text(report), file=sys.stderr)
    if result.agent.status == "interrupted":
        return 130
    return 0 if result.agent.status == "completed" and result.agent.exit_code == 0 else 3


def agent_isolation(args, agent):
    """The Isolation of `--isolation` and `--agent-user`, checked before anything starts: a sandbox must
    be possible here and for this agent, and without one `--agent-user` must be able to run the agent's
    program and reach the runs folder. ValueError (SandboxError, AgentUserError) says why not."""
    from spillage.runner.agent_user import AgentUser
    from spillage.runner.sandbox import Isolation
    from spillage.runner.sandbox import SandboxError
    from spillage.runner.sandbox import check_sandbox
    from spillage.runner.sandbox import sandbox_problem

    user = AgentUser.named(args.agent_user) if args.agent_user else None
    if args.isolation == "sandbox":
        problem = sandbox_problem()
        if problem:
            raise SandboxError(f"no sandbox for the agent: {problem}; `--isolation none` runs it without one, "
                               "where it can reach the evidence (docs/EVIDENCE.md)")
        model = None if args.model_via_proxy else agent.model_host
        check_sandbox(list(agent.argv), (spillage_home(args), args.runs_dir.resolve()), model)
    elif user is not None:
        user.check_can_run(agent.argv[0])
        args.runs_dir.mkdir(parents=True, exist_ok=True)
        user.check_can_enter(args.runs_dir)
    return Isolation(args.isolation, user)


def cmd_batch(args) -> int:
    from spillage.runner.batch import Batch
    from spillage.runner.batch import BatchLocked
    from spillage.runner.batch import batch_status
    from spillage.runner.matrix import MatrixError
    from spillage.runner.matrix import load_matrix
    from spillage.runner.preflight import PreflightError

    try:
        matrix = load_matrix(args.matrix)
    except MatrixError as e:
        progress(str(e))
        return 2
    if args.scheduler and args.jobs:
        progress("--jobs is for a local batch; on a cluster each worker's browser resource says how many runs it holds")
        return 2
    if args.keys and not args.scheduler:
        progress("--keys pins the keys of a cluster's workers; a local batch signs with this machine's key")
        return 2
    if args.dry_run:
        for run in matrix.runs:
            print(run.key)
        return 0
    runs_dir = args.runs_dir or DEFAULT_RUNS / matrix.name
    models = sorted({r.model for r in matrix.runs})
    options = dict(retry_failed=args.retry_failed, audit=not args.no_audit, progress=progress, bar=not args.quiet)
    client = None
    try:
        if args.scheduler:
            from spillage.runner.cluster import ClusterBatch
            from spillage.runner.cluster import ClusterError
            from spillage.runner.cluster import connect
            from spillage.runner.cluster import preflight_workers
            from spillage.runner.cluster import read_pins

            try:
                pins = read_pins(args.keys) if args.keys else frozenset()
                client = connect(args.scheduler)
            except (ClusterError, ValueError) as e:
                progress(str(e))
                return 2
            if not args.no_preflight:
                preflight_workers(client, models)
            batch = ClusterBatch(client, matrix, runs_dir, spillage_home(args), pins=pins, **options)
        else:
            if not args.no_preflight:
                preflight_models(models)
            batch = Batch(matrix, runs_dir, spillage_home(args), args.jobs or 1, **options)
        batch.run()
    except PreflightError as e:
        progress(f"{e} (checked before starting the batch; --no-preflight skips the check)")
        return 3
    except BatchLocked as e:
        progress(str(e))
        return 2
    finally:
        if client is not None:
            client.close()
    for line in batch.summary():
        print(line)
    if batch.interrupted:
        return 130
    return batch_status(batch.ledger.states(), matrix.runs)


def preflight_models(models: list[str]) -> None:
    """Check that every model answers from here (PreflightError when one does not)."""
    from spillage.agents.model_spec import parse_model
    from spillage.runner.preflight import preflight

    for model in models:
        preflight(parse_model(model))


def cmd_proxy_start(args) -> int:
    from spillage.addons.guard_policy import PolicyError
    from spillage.addons.guard_policy import policy_for
    from spillage.proxy.live import LiveError
    from spillage.proxy.live import live_hosts
    from spillage.runner.proxy_start import run_proxy
    from spillage.runner.stack import GuardSetting

    scenario = None
    if args.scenario:
        from spillage.scenarios.loader import resolve_scenario   # the scenario model and YAML: only with one

        scenario = resolve_scenario(args.scenario, args.style)
    guard = GuardSetting(args.guard, str(args.guard_policy or ""))
    try:
        policy_for(args.guard, args.guard_policy, scenario.irrelevant if scenario else ())
        live = live_hosts(args.live)
    except (PolicyError, LiveError) as e:
        progress(str(e))
        return BAD_INPUT
    return run_proxy(spillage_home(args), args.runs_dir, args.port, progress, scenario, guard, live)


def cmd_origins_serve(args) -> int:
    from spillage.origins.server import main as serve_main

    return serve_main(["--host", args.host, "--port", str(args.port), "--seed", str(args.seed)]
                      + (["--catalog", str(args.catalog)] if args.catalog else []))


def cmd_origins_catalog(args) -> int:
    import tempfile
    import time

    from spillage.origins.catalog import build_catalog
    from spillage.origins.knowledge import knowledge_json

    export = "-" if args.export is None and args.out is None else args.export
    for option, path in (("--out", args.out), ("--export", None if export == "-" else export)):
        if path is not None and not Path(path).resolve().parent.is_dir():
            progress(f"{option}: no folder {Path(path).resolve().parent}")
            return 2
    began = time.monotonic()
    scenarios = load_scenarios(args.scenarios)
    with tempfile.TemporaryDirectory(prefix="spillage-catalog-") as tmp:
        out = args.out or Path(tmp) / "sites.sqlite"
        build_catalog(out, scenarios, args.seed)
        took = time.monotonic() - began
        knowledge = knowledge_json(out)
    sites = knowledge["sites"]
    progress(f"catalog seed {args.seed} from {len(scenarios)} scenarios: "
             + ", ".join(f"{host} {len(site['products'])} products" for host, site in sites.items())
             + f"; {sum(len(s['sections']) for s in sites.values())} sections, "
             f"{sum(len(s['facets']) for s in sites.values())} facets; built in {took:.1f} s"
             + (f" into {args.out}" if args.out else ""))
    if export is not None:
        text = json.dumps(knowledge, indent=1, ensure_ascii=False) + "\n"
        if export == "-":
            sys.stdout.write(text)
        else:
            Path(export).write_text(text, encoding="utf-8")
            progress(f"wrote site knowledge to {export}")
    return 0


def cmd_verify(args) -> int:
    from spillage.proxy.verify import run_verify

    return run_verify(args.session, args.key)


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
            progress("give session folders or run folders to audit, or --evaluate CORPUS")
            return 2
        scenario = resolve_scenario(args.scenario, args.style) if args.scenario else None
        sessions = find_sessions(args.runs)
        if args.scheduler and (args.scenario or args.profiles or args.catalog or args.jobs > 1):
            progress("--scheduler audits each session with its own scenario copy and catalog on the workers: "
                     "it takes no --scenario, --profiles, --catalog or --jobs")
            return BAD_INPUT
        if len(sessions) == 1 and len(args.runs) == 1 and args.jobs <= 1 and not args.scheduler:
            report = audit_session(sessions[0], scenario, args.allow_unverified, make_judge(args.judge, **options),
                                   args.profiles, args.catalog, spillage_home(args))
            if not args.no_write:
                write_report(sessions[0], report)
            print(summary_text(report) if args.format == "text" else json.dumps(report, indent=2, ensure_ascii=False))
            return 0
    except (AuditError, JudgeError, ValueError) as e:
        progress(str(e))
        return getattr(e, "status", BAD_INPUT)   # AuditError and JudgeError say theirs
    bar = not args.quiet
    if args.scheduler:
        outcomes = audit_cluster(args, sessions, options, bar)
        if outcomes is None:
            return BAD_INPUT
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
    """The outcomes of auditing `sessions` on the Dask cluster of --scheduler; None when it cannot be
    reached (said in one line)."""
    from spillage.runner.cluster import ClusterError
    from spillage.runner.cluster import connect
    from spillage.runner.cluster_audit import audit_on_cluster

    try:
        client = connect(args.scheduler, browsers=False)
    except ClusterError as e:
        progress(str(e))
        return None
    try:
        return audit_on_cluster(client, sessions, args.judge, options, args.allow_unverified, bar)
    finally:
        client.close()


def cmd_scenarios_check(args) -> int:
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.check import check_paths
    from spillage.scenarios.check import report
    from spillage.scenarios.vocabulary import load_vocabulary

    paths = args.paths or BENCHMARK_DIRS
    missing = [p for p in paths if not p.exists()]
    if missing:
        progress(f"{missing[0]}: no such file or folder")
        return 2
    scenarios, problems = check_paths(paths, load_vocabulary())
    for line in report(problems, args.every):
        print(line)
    errors = sum(not p.warning for p in problems)
    progress(f"{len(scenarios)} scenarios checked: {errors} errors, {len(problems) - errors} warnings")
    return BAD_INPUT if errors else 0


def load_scenarios(paths: list[Path]) -> list:
    """Every scenario under `paths` (the benchmark by default); bad files stop with their error."""
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.loader import load_file
    from spillage.scenarios.files import scenario_files

    return [s for f in scenario_files(paths or BENCHMARK_DIRS) for s in load_file(f)]


def cmd_scenarios_list(args) -> int:
    from spillage.scenarios.benchmark import scenario_table

    print(scenario_table(load_scenarios(args.paths)))
    return 0


def cmd_scenarios_stats(args) -> int:
    from spillage.scenarios.benchmark import stats_markdown

    text = stats_markdown(load_scenarios(args.paths))
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        progress(f"wrote {args.write}")
    else:
        print(text, end="")
    return 0


def cmd_scenarios_import(args) -> int:
    from spillage.scenarios.importers.spillage_json import main as import_main

    return import_main(["--format", args.format, str(args.file), "--site", args.site, "--out", str(args.out)]
                       + (["--style", args.style] if args.style else []))


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0")
    return value


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to 65535)")
    return value


def host_port(text: str) -> str:
    """An argparse type: HOST:PORT (a name or an address, [v6] in brackets), as the proxy names endpoints."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or host != host.strip() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return f"{host.lower()}:{int(port)}"


class Parser(argparse.ArgumentParser):
    """argparse with the one line every other bad input gets (`spillage: batch: argument --jobs: …`),
    exit 2. Its subcommands' parsers are of this class too."""

    def error(self, message: str):
        command = self.prog.removeprefix("spillage").strip()
        progress(f"{command + ': ' if command else ''}{message} (`{self.prog} --help` lists the options)")
        self.exit(BAD_INPUT)


def scheduler_address(text: str) -> str:
    """An argparse type: a Dask scheduler's tcp://HOST:PORT (or tls://HOST:PORT)."""
    scheme, sep, location = text.partition("://")
    if scheme not in ("tcp", "tls") or not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not tcp://HOST:PORT (or tls://HOST:PORT)")
    host_port(location)
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="spillage", description="Capture and audit what web agents reveal about their users.",
        epilog="exit status: 0 done; 1 the evidence does not verify, or the sessions differ; 2 bad input "
               "or usage; 3 the agent failed; 70 an error of ours (the traceback is saved); 130 interrupted",
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--home", help="folder for the CA, the signing key and other state "
                                       "(default $SPILLAGE_HOME or ./.spillage)")
    sub = parser.add_subparsers(dest="cmd", required=True)

    run = sub.add_parser("run", help="run an agent on a scenario behind the capturing proxy",
                         description="Run an agent behind the proxy: --agent browser-use --model M, "
                                     "or any command after --.")
    run.add_argument("--scenario", required=True,
                     help="a scenario file, or a scenario id from the benchmark (e.g. shop-kettle-chat)")
    run.add_argument("--style", choices=["chat", "email", "generic"],
                     help="which style of a persona file to run")
    run.add_argument("--agent", choices=["browser-use", "autogen"], default="browser-use",
                     help="the agent framework (default browser-use); ignored when a command follows --")
    run.add_argument("--model", help=MODEL_HELP + f"; default {DEFAULT_MODEL}, a scripted policy that overshares on "
                                              "purpose (said at start)")
    run.add_argument("--base-url", help="endpoint for openai:/ollama: models")
    run.add_argument("--max-steps", type=positive, default=50, help="the agent's step limit (default 50, as in the paper)")
    run.add_argument("--timeout", type=seconds, default=300,
                     help="seconds before the agent is stopped (default 300)")
    run.add_argument("--seed", type=int, default=0, help="seed of the sites' generated catalog (default 0)")
    run.add_argument("--prompt", choices=["original", "sanitized"], default="original",
                     help="the persona-rich prompt (default) or the scenario's sanitized_prompt (paper §5.4)")
    run.add_argument("--system-note", default="", metavar="TEXT", type=utf8_text,
                     help="text added to the agent's system prompt, a prompt-level mitigation (paper §5.4)")
    run.add_argument("--guard", choices=GUARD_MODES, default="off",
                     help="stop what would reveal the scenario's irrelevant attributes on the wire: monitor records "
                          "what it would do, redact takes it out, block refuses it (docs/GUARD.md; default off)")
    run.add_argument("--guard-policy", type=Path, metavar="FILE", help="the guard's rules and attributes (docs/GUARD.md)")
    run.add_argument("--no-preflight", action="store_true",
                     help="do not check the model endpoint before starting (it must answer within seconds)")
    run.add_argument("--model-endpoint", type=host_port, metavar="HOST:PORT",
                     help="for a command agent: its model endpoint, which it then reaches from its sandbox "
                          "(directly, or through the proxy with --model-via-proxy)")
    run.add_argument("--model-via-proxy", action="store_true",
                     help="send the agent's model calls through the proxy too: captured, and the model "
                          "provider shows as an observer of its own (default: direct, not captured)")
    run.add_argument("--live", action="append", metavar="HOST[,HOST...]", help=LIVE_HELP)
    run.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS, help="where the session folder goes (default runs)")
    run.add_argument("--session-name", help="name of the session folder (default: time, scenario, agent, and the "
                                            "condition when not the default: guard-MODE, sanitized, note-HASH)")
    run.add_argument("--audit", action="store_true", help="write audit.json and print its summary when done")
    run.add_argument("--agent-user", metavar="USER",
                     help="run the agent as this unprivileged user (root only), in the sandbox or without one "
                          "(docs/EVIDENCE.md)")
    run.add_argument("--isolation", choices=ISOLATION, default="sandbox",
                     help="sandbox (default): the agent runs in a bubblewrap sandbox that cannot reach the "
                          "evidence, the keys or the proxy's process; none: as a plain child, where it can "
                          "(said at start, in meta.json and by verify)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS: run this as the agent")
    run.set_defaults(func=cmd_run)

    batch = sub.add_parser("batch", help="run a matrix of scenarios × frameworks × models × conditions × repeats",
                           description="Run every cell of a matrix file (docs/BATCH.md) as its own session, "
                                       "audit it, and record the outcome; running it again resumes.")
    batch.add_argument("matrix", type=Path, help="the matrix YAML (see matrices/)")
    batch.add_argument("--runs-dir", type=Path, help="the batch folder (default runs/<matrix name>)")
    batch.add_argument("--jobs", type=positive,
                       help="sessions at a time here (default 1), each with its own proxy; not with --scheduler")
    batch.add_argument("--retry-failed", action="store_true", help="run again the cells that failed or timed out")
    batch.add_argument("--no-audit", action="store_true", help="do not audit each session when it ends")
    batch.add_argument("--dry-run", action="store_true", help="list the runs (their session names) and stop")
    batch.add_argument("--quiet", action="store_true",
                       help="no progress (default: a bar on a terminal, else one line per finished run with the ETA)")
    batch.add_argument("--no-preflight", action="store_true",
                       help="do not check the matrix's model endpoints before starting")
    batch.add_argument("--scheduler", metavar="tcp://HOST:PORT", type=scheduler_address,
                       help="run the cells on the workers of this Dask scheduler (tcp://HOST:PORT), each in its own "
                            "spillage home, as many at once as a worker's browser resource; docs/CLUSTER.md")
    batch.add_argument("--keys", type=Path, metavar="FILE",
                       help="with --scheduler: the keys the workers may sign with, one a line (as `spillage key` "
                            "prints them); a session signed by any other fails")
    batch.set_defaults(func=cmd_batch)

    proxy = sub.add_parser("proxy", help="the capturing proxy").add_subparsers(dest="proxy_cmd", required=True)
    start = proxy.add_parser("start", help="run origins and the proxy in the foreground, capturing into a new session")
    start.add_argument("--port", type=port_number, default=8080, help="the proxy's port on 127.0.0.1 (default 8080)")
    start.add_argument("--scenario", help="the scenario (file or id) the agent works on: the session keeps its "
                                          "copy, so audit, report and inspect take it as it is")
    start.add_argument("--style", choices=["chat", "email", "generic"], help="which style of a persona file")
    start.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS, help="where the session folder goes (default runs)")
    start.add_argument("--guard", choices=GUARD_MODES, default="off",
                       help="the leak guard (docs/GUARD.md; default off): it guards the --scenario's irrelevant "
                            "attributes, or those of --guard-policy")
    start.add_argument("--guard-policy", type=Path, metavar="FILE", help="the guard's rules and attributes")
    start.add_argument("--live", action="append", metavar="HOST[,HOST...]", help=LIVE_HELP)
    start.set_defaults(func=cmd_proxy_start)

    origins = sub.add_parser("origins", help="our local sites").add_subparsers(dest="origins_cmd", required=True)
    serve = origins.add_parser("serve", help="serve shop.test, bazaar.test and metrics.test on loopback")
    serve.add_argument("--host", default="127.0.0.1", help="a loopback address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=8000, help="the port (default 8000; 0: any free one)")
    serve.add_argument("--catalog", type=Path, help="write the SQLite catalog here (default: a temporary file)")
    serve.add_argument("--seed", type=int, default=0, help="catalog seed (default 0)")
    serve.set_defaults(func=cmd_origins_serve)
    cat = origins.add_parser("catalog", help="build the sites' catalog and export what the auditor knows of them",
                             description="Build the catalog of shop.test and bazaar.test and write the site "
                                         "knowledge the auditor uses as JSON (docs/KNOWLEDGE.md); with neither "
                                         "--out nor --export, the JSON goes to stdout.")
    cat.add_argument("--seed", type=int, default=0, help="catalog seed (default 0)")
    cat.add_argument("--scenarios", nargs="+", type=Path, default=[], metavar="PATH",
                     help="scenario files or folders to build from (default: the benchmark)")
    cat.add_argument("--out", type=Path, help="keep the SQLite catalog in this file")
    cat.add_argument("--export", metavar="FILE", help="write the site knowledge JSON here ('-' for stdout)")
    cat.set_defaults(func=cmd_origins_catalog)

    scen = sub.add_parser("scenarios", help="the scenario benchmark").add_subparsers(dest="scenarios_cmd", required=True)
    check = scen.add_parser("check", help="validate scenario files: errors, then the warnings that change an audit, "
                            "then the others grouped by kind; exit 2 on errors")
    check.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the benchmark)")
    check.add_argument("--all", action="store_true", dest="every",
                       help="list every warning, not one line per kind of those that change no audit (default: grouped)")
    check.set_defaults(func=cmd_scenarios_check)
    listing = scen.add_parser("list", help="a table of scenarios")
    listing.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the benchmark)")
    listing.set_defaults(func=cmd_scenarios_list)
    stats = scen.add_parser("stats", help="the benchmark's numbers as Markdown")
    stats.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the benchmark)")
    stats.add_argument("--write", type=Path, help="write to this file (docs/SCENARIOS.md) instead of stdout")
    stats.set_defaults(func=cmd_scenarios_stats)
    imp = scen.add_parser("import", help="convert published task data into scenario files")
    imp.add_argument("--format", required=True, choices=["spillage-json"], help="the data's format")
    imp.add_argument("file", type=Path, help="the data file")
    imp.add_argument("--site", required=True, choices=["shop.test", "bazaar.test"])
    imp.add_argument("--out", required=True, type=Path, help="folder for the scenario files")
    imp.add_argument("--style", choices=["chat", "email", "generic"],
                     help="the prompts' style (default: from the file's name, else from each prompt)")
    imp.set_defaults(func=cmd_scenarios_import)

    from spillage.runner.evidence_commands import KEY_HELP
    ver = sub.add_parser("verify", help="check a session's capture log: chain, signed checkpoints, seal",
                         description="Check a session's capture log (docs/CAPTURE_FORMAT.md) and what its "
                                     "signatures prove (docs/EVIDENCE.md). Exit 0 when clean, 1 when damaged, "
                                     "tampered or sealed after a crash, 2 for bad input.")
    ver.add_argument("session", type=Path, help="session folder or capture.jsonl")
    ver.add_argument("--key", metavar="KEY", help=KEY_HELP)
    ver.set_defaults(func=cmd_verify)

    from spillage.runner.evidence_commands import add_commands as add_evidence_commands
    add_evidence_commands(sub)  # seal, prove, verify-proof, key

    aud = sub.add_parser("audit", help="actions, leaks, choices and recoveries of sessions (writes audit.json)")
    aud.add_argument("runs", type=Path, nargs="*", metavar="RUNS",
                     help="session folders, or folders holding sessions (searched recursively)")
    aud.add_argument("--judge", default=DEFAULT_JUDGE,
                     help=f"embedding, lexical or llm (default {DEFAULT_JUDGE}); with --evaluate several side by side: lexical,embedding")
    aud.add_argument("--judge-url", help="llm judge: base URL of an OpenAI-compatible API (…/v1)")
    aud.add_argument("--judge-model", help="llm judge: the model name")
    aud.add_argument("--judge-threshold", type=float, help="embedding judge: similarity threshold")
    aud.add_argument("--judge-timeout", type=float, help="llm judge: seconds to wait for each answer (default 120)")
    aud.add_argument("--jobs", type=positive, default=1, help="worker processes for many sessions (default 1)")
    aud.add_argument("--scheduler", metavar="tcp://HOST:PORT", type=scheduler_address,
                     help="audit on the workers of this Dask scheduler instead (docs/CLUSTER.md)")
    aud.add_argument("--scenario", help="scenario file or id (default: each session's copy)")
    aud.add_argument("--profiles", type=Path, action="append", default=[], metavar="DIR",
                     help="a folder of site profiles (*.yaml, docs/SITE_PROFILES.md) added to the shipped ones; repeatable")
    aud.add_argument("--style", choices=["chat", "email", "generic"], help="style of a persona file")
    aud.add_argument("--catalog", type=Path, metavar="FILE",
                     help="the catalog the sessions' sites served, for a session that neither holds its "
                          "catalog.sqlite nor names it in meta.json (the audit never guesses it)")
    aud.add_argument("--format", choices=["json", "text"],
                     help="one session: the report as json (default) or text; --evaluate: text (default) or json")
    aud.add_argument("--no-write", action="store_true", help="one session: do not write its audit.json")
    aud.add_argument("--quiet", action="store_true", help="many sessions: no progress (default: a bar on a "
                                                          "terminal, else one line per audited session)")
    aud.add_argument("--allow-unverified", action="store_true",
                     help="audit the records before the first damage instead of refusing (the report says so)")
    aud.add_argument("--evaluate", type=Path, metavar="CORPUS",
                     help="audit a labelled corpus and print precision and recall per category")
    aud.set_defaults(func=cmd_audit)

    from spillage.runner.report_commands import add_commands as add_report_commands
    from spillage.runner.file_commands import add_commands as add_file_commands
    from spillage.runner.replay_commands import add_commands as add_replay_commands
    add_report_commands(sub)  # report, inspect
    add_file_commands(sub)  # import, export
    add_replay_commands(sub)  # replay, diff
    return parser


def input_errors() -> tuple[type[Exception], ...]:
    """The errors that are one line for the user: bad input, or a child (origins, proxy) that failed."""
    from spillage.origins.grammar import ProfileError
    from spillage.proxy.capturelog import CaptureError
    from spillage.addons.mitm.ca import CertAuthorityError
    from spillage.proxy.documents import DocumentError
    from spillage.proxy.signing import SigningKeyError
    from spillage.runner.children import ChildError
    from spillage.scenarios.loader import ScenarioError

    return ScenarioError, CaptureError, ProfileError, ChildError, CertAuthorityError, SigningKeyError, DocumentError


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error ends as one line on stderr and a status of runner/console.py."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except input_errors() as e:  # evaluated only when an error comes: a command imports what it uses, no more
        from spillage.runner.children import ChildError

        progress(str(e))
        return AGENT_FAILED if isinstance(e, ChildError) else BAD_INPUT
    except (RecursionError, MemoryError) as e:
        progress(f"the input is nested too deeply or too large to read ({type(e).__name__})")
        return BAD_INPUT
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:  # `spillage diff A B | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the one boundary: a bug of ours, said once, kept whole
        return internal_error(e)


def internal_error(error: BaseException) -> int:
    """One line naming the error and the file its traceback was saved to; status 70."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="spillage-crash-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"spillage {version_text()}\n{' '.join(sys.argv)}\n\n")
        traceback.print_exception(error, file=f)
    progress(f"internal error: {type(error).__name__}: {error} (a bug; the traceback is in {path})")
    return INTERNAL


class VersionAction(argparse.Action):
    """`--version`: the versions are looked up only when asked for (importlib.metadata is slow to import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the versions of spillage, mitmproxy and Python, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"spillage {version_text()}")
        parser.exit()


def version_text() -> str:
    """`spillage --version`: ours and mitmproxy's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version

    from spillage.proxy.version import SPILLAGE_VERSION

    try:
        mitmproxy = version("mitmproxy")
    except PackageNotFoundError:
        mitmproxy = "not installed"
    return f"{SPILLAGE_VERSION} (mitmproxy {mitmproxy}, Python {sys.version.split()[0]})"


if __name__ == "__main__":
    sys.exit(main())
