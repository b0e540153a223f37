"""`spillage run`, `spillage batch` and `spillage proxy start`: sessions behind the capturing proxy."""

import argparse
import sys
from pathlib import Path

from spillage.addons.guard_policy import MODES as GUARD_MODES
from spillage.agents.model_spec import DEFAULT_MODEL
from spillage.agents.model_spec import MODEL_HELP
from spillage.proxy.settings import AGENT_FAILED
from spillage.proxy.settings import DAMAGED
from spillage.proxy.settings import DEFAULT_RUNS
from spillage.proxy.settings import INTERRUPTED
from spillage.proxy.settings import ISOLATION
from spillage.proxy.settings import MAX_STEPS
from spillage.proxy.settings import SEED
from spillage.proxy.settings import TIMEOUT
from spillage.runner.cli.console import progress
from spillage.runner.cli.console import spillage_home
from spillage.runner.cli.types import host_port
from spillage.runner.cli.types import port_number
from spillage.runner.cli.types import positive
from spillage.runner.cli.types import scheduler_address
from spillage.runner.cli.types import seconds
from spillage.runner.cli.types import utf8_text
from spillage.runner.cli.verbs import LIVE
from spillage.runner.cli.verbs import RUNS_DIR
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import setting
from spillage.runner.cli.verbs import style
from spillage.runner.cli.verbs import verb

GUARD_POLICY_HELP = "the guard's rules and attributes"
NO_PREFLIGHT = arg("--no-preflight", action="store_true",
                   help="do not check the model endpoint before starting (it must answer within seconds)")


@verb("run", help="run an agent on a scenario behind the capturing proxy",
      args=[
          arg("--scenario", required=True,
              help="a scenario file, or a scenario id from the benchmark (e.g. shop-kettle-chat)"),
          style("which style of a persona file to run"),
          arg("--agent", choices=["browser-use", "autogen"], default="browser-use",
              help="the agent framework (default browser-use); ignored when a command follows --"),
          arg("--model", help=MODEL_HELP + f"; default {DEFAULT_MODEL}, a scripted policy that overshares on "
                                           "purpose (said at start)"),
          arg("--base-url", help="endpoint for openai:/ollama: models"),
          setting(MAX_STEPS, type=positive),
          setting(TIMEOUT, type=seconds),
          setting(SEED, type=int),
          arg("--prompt", choices=["original", "sanitized"], default="original",
              help="the persona-rich prompt (default) or the scenario's sanitized_prompt (paper §5.4)"),
          arg("--system-note", default="", metavar="TEXT", type=utf8_text,
              help="text added to the agent's system prompt, a prompt-level mitigation (paper §5.4)"),
          arg("--guard", choices=GUARD_MODES, default="off",
              help="stop what would reveal the scenario's irrelevant attributes on the wire: monitor records "
                   "what it would do, redact takes it out, block refuses it (docs/GUARD.md; default off)"),
          arg("--guard-policy", type=Path, metavar="FILE", help=f"{GUARD_POLICY_HELP} (docs/GUARD.md)"),
          NO_PREFLIGHT,
          arg("--model-endpoint", type=host_port, metavar="HOST:PORT",
              help="for a command agent: its model endpoint, which it then reaches from its sandbox "
                   "(directly, or through the proxy with --model-via-proxy)"),
          arg("--model-via-proxy", action="store_true",
              help="send the agent's model calls through the proxy too: captured, and the model "
                   "provider shows as an observer of its own (default: direct, not captured)"),
          LIVE,
          RUNS_DIR,
          arg("--session-name", help="name of the session folder (default: time, scenario, agent, and the "
                                     "condition when not the default: guard-MODE, sanitized, note-HASH)"),
          arg("--audit", action="store_true", help="write audit.json and print its summary when done"),
          arg("--agent-user", metavar="USER",
              help="run the agent as this unprivileged user (root only), in the sandbox or without one "
                   "(docs/EVIDENCE.md)"),
          arg("--isolation", choices=ISOLATION, default="sandbox",
              help="sandbox (default): the agent runs in a bubblewrap sandbox that cannot reach the "
                   "evidence, the keys or the proxy's process; none: as a plain child, where it can "
                   "(said at start, in meta.json and by verify)"),
          arg("command", nargs=argparse.REMAINDER, help="-- CMD ARGS: run this as the agent"),
      ])
def cmd_run(args) -> int:
    """Run an agent behind the proxy: --agent browser-use --model M, or any command after --."""
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
        raise Refusal(str(e)) from None
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.model_endpoint and not command:
        raise Refusal("--model-endpoint is for a command agent (-- CMD); a framework's endpoint is its --model's")
    if command:
        agent = AgentSpec.command(command, args.model_endpoint)
    else:
        if args.model is None:
            args.model = DEFAULT_MODEL
            progress(f"model {DEFAULT_MODEL} (no --model given): a scripted policy that overshares on purpose, no LLM")
        try:
            spec = parse_model(args.model, args.base_url)  # fail here, not inside the child
        except ModelSpecError as e:
            raise Refusal(str(e)) from None
        if not args.no_preflight:
            from spillage.runner.preflight import PreflightError
            from spillage.runner.preflight import preflight

            try:
                preflight(spec)
            except PreflightError as e:
                raise Refusal(f"{e} (checked before starting; --no-preflight skips the check)", AGENT_FAILED) from None
        make = AgentSpec.autogen if args.agent == "autogen" else AgentSpec.browser_use
        agent = make(args.model, args.max_steps, args.base_url)
    try:
        isolation = agent_isolation(args, agent)
    except ValueError as e:
        raise Refusal(str(e)) from None
    try:
        result = run_session(scenario, agent, args.runs_dir, spillage_home(args), args.timeout,
                             progress, args.seed, condition, args.session_name, args.model_via_proxy, isolation,
                             live)
    except FileExistsError as e:
        raise Refusal(f"session folder exists already: {e.filename}") from None
    print(result.session_dir, flush=True)
    if result.evidence == "none" and result.agent.status == "interrupted":
        progress("interrupted before the proxy started: nothing was captured")
        return INTERRUPTED
    if not result.capture_ok:
        progress(f"the evidence is not clean ({result.evidence}): `spillage verify {result.session_dir}` "
                 "says why")
        return DAMAGED
    if args.audit:
        from spillage.audit.session_audit import AuditError   # the audit's modules: once the run is over
        from spillage.audit.session_audit import audit_session
        from spillage.audit.session_audit import summary_text
        from spillage.audit.session_audit import write_report

        try:
            report = audit_session(result.session_dir, home=spillage_home(args))
        except AuditError as e:
            raise Refusal(f"the audit failed: {e}", e.status) from None
        write_report(result.session_dir, report, spillage_home(args))
        print(summary_text(report), file=sys.stderr)
    if result.agent.status == "interrupted":
        return INTERRUPTED
    return 0 if result.agent.status == "completed" and result.agent.exit_code == 0 else AGENT_FAILED


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


def preflight_models(models: list[str]) -> None:
    """Check that every model answers from here (PreflightError when one does not)."""
    from spillage.agents.model_spec import parse_model
    from spillage.runner.preflight import preflight

    for model in models:
        preflight(parse_model(model))


@verb("batch", help="run a matrix of scenarios × frameworks × models × conditions × repeats",
      args=[
          arg("matrix", type=Path, help="the matrix YAML (see matrices/)"),
          arg("--runs-dir", type=Path, help="the batch folder (default runs/<matrix name>)"),
          arg("--jobs", type=positive,
              help="sessions at a time here (default 1), each with its own proxy; not with --scheduler"),
          arg("--retry-failed", action="store_true", help="run again the cells that failed or timed out"),
          arg("--no-audit", action="store_true", help="do not audit each session when it ends"),
          arg("--dry-run", action="store_true", help="list the runs (their session names) and stop"),
          arg("--quiet", action="store_true",
              help="no progress (default: a bar on a terminal, else one line per finished run with the ETA)"),
          arg("--no-preflight", action="store_true", help="do not check the matrix's model endpoints before starting"),
          arg("--scheduler", metavar="tcp://HOST:PORT", type=scheduler_address,
              help="run the cells on the workers of this Dask scheduler (tcp://HOST:PORT), each in its own "
                   "spillage home, as many at once as a worker's browser resource; docs/CLUSTER.md"),
          arg("--keys", type=Path, metavar="FILE",
              help="with --scheduler: the keys the workers may sign with, one a line (as `spillage key` "
                   "prints them); a session signed by any other fails"),
      ])
def cmd_batch(args) -> int:
    """Run every cell of a matrix file (docs/BATCH.md) as its own session, audit it, and record the outcome; running
    it again resumes."""
    from spillage.runner.batch import Batch
    from spillage.runner.batch import BatchLocked
    from spillage.runner.batch import batch_status
    from spillage.runner.matrix import MatrixError
    from spillage.runner.matrix import load_matrix
    from spillage.runner.preflight import PreflightError

    try:
        matrix = load_matrix(args.matrix)
    except MatrixError as e:
        raise Refusal(str(e)) from None
    if args.scheduler and args.jobs:
        raise Refusal("--jobs is for a local batch; on a cluster each worker's browser resource says how many "
                      "runs it holds")
    if args.keys and not args.scheduler:
        raise Refusal("--keys pins the keys of a cluster's workers; a local batch signs with this machine's key")
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
                raise Refusal(str(e)) from None
            if not args.no_preflight:
                preflight_workers(client, models)
            batch = ClusterBatch(client, matrix, runs_dir, spillage_home(args), pins=pins, **options)
        else:
            if not args.no_preflight:
                preflight_models(models)
            batch = Batch(matrix, runs_dir, spillage_home(args), args.jobs or 1, **options)
        batch.run()
    except PreflightError as e:
        raise Refusal(f"{e} (checked before starting the batch; --no-preflight skips the check)",
                      AGENT_FAILED) from None
    except BatchLocked as e:
        raise Refusal(str(e)) from None
    finally:
        if client is not None:
            client.close()
    for line in batch.summary():
        print(line)
    if batch.interrupted:
        return INTERRUPTED
    return batch_status(batch.ledger.states(), matrix.runs)


@verb("proxy start", help="run origins and the proxy in the foreground, capturing into a new session", args=[
    arg("--port", type=port_number, default=8080, help="the proxy's port on 127.0.0.1 (default 8080)"),
    arg("--scenario", help="the scenario (file or id) the agent works on: the session keeps its "
                           "copy, so audit, report and inspect take it as it is"),
    style("which style of a persona file"),
    RUNS_DIR,
    arg("--guard", choices=GUARD_MODES, default="off",
        help="the leak guard (docs/GUARD.md; default off): it guards the --scenario's irrelevant "
             "attributes, or those of --guard-policy"),
    arg("--guard-policy", type=Path, metavar="FILE", help=GUARD_POLICY_HELP),
    LIVE,
])
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
        raise Refusal(str(e)) from None
    return run_proxy(spillage_home(args), args.runs_dir, args.port, progress, scenario, guard, live)
