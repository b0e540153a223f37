"""`spillage proxy start`: origins and the capturing proxy in the foreground, for an agent one starts
oneself; a session folder with a signed, sealed log and meta.json when it stops."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from spillage.proxy.capturelog import utc_timestamp
from spillage.origins.catalog_store import stored_catalog
from spillage.proxy.layout import PROXY_LOG
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import create_session
from spillage.runner.conditions import Condition
from spillage.proxy.layout import seal_permissions
from spillage.proxy.layout import write_meta
from spillage.proxy.live import live_meta
from spillage.addons.mitm.ca import ensure_ca
from spillage.proxy.signing import load_or_create_key
from spillage.proxy.undumpable import forbid_dumps
from spillage.proxy.version import SPILLAGE_VERSION
from spillage.runner.heads import describe_evidence
from spillage.runner.stack import GuardSetting
from spillage.runner.stack import Stack
from spillage.runner.stack import Interrupts

EXTERNAL = "external"   # the agent is started by whoever uses the proxy: spillage isolates nothing

if TYPE_CHECKING:  # the scenario model (and YAML) is imported only when there is a scenario
    from spillage.scenarios.model import Scenario


def run_proxy(home: Path, runs_dir: Path, port: int, log, scenario: Scenario | None = None,
              guard: GuardSetting = GuardSetting(), live: tuple[str, ...] = ()) -> int:
    """Capture until Ctrl-C or SIGTERM (or until the proxy dies, which is said at once); 0 when the log
    was sealed by the proxy and verifies, 1 otherwise. With a `scenario`, the session keeps its copy
    and the sites carry its surfaces, so `audit`, `report` and `inspect` take the session as it is.
    A Ctrl-C while the stack starts is kept: the stack stops as soon as it is up, and seals. Requests
    to the `live` hosts (proxy/live.py patterns) reach the real sites, captured."""
    with Interrupts() as interrupts:
        return capture(home, runs_dir, port, log, scenario, guard, interrupts, live)


def capture(home: Path, runs_dir: Path, port: int, log, scenario: Scenario | None, guard: GuardSetting,
            interrupts: Interrupts, live: tuple[str, ...]) -> int:
    forbid_dumps()   # this process holds the keys
    signing_key = load_or_create_key(home)   # a broken home is said before a session folder exists
    ca = ensure_ca(home / "ca")
    scenarios, added = None, False
    if scenario is not None:
        from spillage.runner.session_run import catalog_scenarios   # what a session needs: not imported otherwise

        scenarios, added = catalog_scenarios(scenario)
    catalog, catalog_sha256 = stored_catalog(home, scenarios, 0)
    label = "-".join(part for part in ("proxy", scenario.id if scenario else "", Condition(guard=guard.mode).label())
                     if part)
    session_dir = create_session(runs_dir, label)
    if scenario is not None:
        from spillage.scenarios.dump import scenario_yaml

        (session_dir / SCENARIO_COPY).write_text(scenario_yaml(scenario), encoding="utf-8")  # the guard reads it
        guard = GuardSetting(guard.mode, guard.policy, session_dir / SCENARIO_COPY)
    stack = Stack(session_dir, ca, signing_key, catalog, tool="spillage proxy start",
                  proxy_port=port, log=log, guard=guard, isolation=EXTERNAL, live=live)
    stack.launch()   # the servers boot while meta.json is written
    try:
        meta = {"session": session_dir.name, "spillage": SPILLAGE_VERSION,
                "agent": {"label": "proxy start", "framework": "proxy", "argv": [], "model": None},
                "catalog": {"sha256": catalog_sha256, "seed": 0, "adds": scenario.id if added else None},
                "ca": {"cert": str(ca.cert_file), "spki": ca.spki_pin},
                "signing": {"key": stack.key_fingerprint, "session_key": stack.session_key.key},
                "isolation": {"level": EXTERNAL}, **live_meta(live),
                "started": utc_timestamp(), "status": "running",
                **({"guard": {"mode": guard.mode, "policy": guard.policy or None}} if guard.mode != "off" else {})}
        if scenario is not None:
            meta["scenario"] = {"id": scenario.id, "file": scenario.file, "copy": SCENARIO_COPY,
                                "file_sha256": hashlib.sha256(Path(scenario.file).read_bytes()).hexdigest()}
        write_meta(session_dir, meta)
    except BaseException:
        stack.stop()
        raise
    died = None
    with stack:
        print(f"proxy    {stack.proxy_url}")
        print(f"ca       {ca.cert_file}")
        print(f"spki     {ca.spki_pin}")
        print(f"session  {session_dir}")
        if live:
            print(f"live     {', '.join(live)} (reached on the real web, captured; every other host is refused)")
        print(f"chromium --proxy-server={stack.proxy_url} --proxy-bypass-list='<-loopback>' "
              f"--ignore-certificate-errors-spki-list={ca.spki_pin} "
              '--user-data-dir="$(mktemp -d)"', flush=True)  # Chromium ignores the pin without it
        log("Ctrl-C stops the proxy and seals the capture log")
        died = interrupts.wait(stack.proxy)
        if died is not None:
            log(f"the proxy (mitmdump) exited with {died}: capture has stopped; its output is in "
                f"{session_dir / PROXY_LOG}: {stack.proxy.tail()}")
    settlement = stack.settlement
    meta.update({"ended": utc_timestamp(), "status": "proxy died" if died is not None else "stopped",
                 "proxy": {"url": stack.proxy_url, "exit": stack.exits.get("proxy")},
                 "origins": {"url": stack.origin_url, "exit": stack.exits.get("origins")}})
    describe_evidence(meta, settlement)
    write_meta(session_dir, meta)
    seal_permissions(session_dir)
    result = settlement.result
    log(f"capture: {result.count} records, head {result.head}; evidence {settlement.status}"
        + ("" if settlement.ok else f": {settlement.detail or result.summary()}"))
    return 0 if settlement.ok and died is None else 1
