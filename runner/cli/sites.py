"""`spillage origins …` (our local sites and their catalog) and `spillage scenarios …` (the benchmark)."""

import json
import sys
from pathlib import Path

from spillage.proxy.settings import BAD_INPUT
from spillage.proxy.settings import DAMAGED
from spillage.proxy.settings import SITES
from spillage.runner.cli.console import progress
from spillage.runner.cli.types import port_number
from spillage.runner.cli.verbs import SCENARIO_PATHS
from spillage.runner.cli.verbs import Refusal
from spillage.runner.cli.verbs import arg
from spillage.runner.cli.verbs import catalog_seed
from spillage.runner.cli.verbs import style
from spillage.runner.cli.verbs import verb


@verb("origins serve", help="serve shop.test, bazaar.test and metrics.test on loopback", args=[
    arg("--host", default="127.0.0.1", help="a loopback address to listen on (default 127.0.0.1)"),
    arg("--port", type=port_number, default=8000, help="the port (default 8000; 0: any free one)"),
    arg("--catalog", type=Path, help="write the SQLite catalog here (default: a temporary file)"),
    catalog_seed("catalog seed (default %(default)s)"),
])
def cmd_origins_serve(args) -> int:
    import ipaddress
    import logging

    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise Refusal(f"origins serve: --host must be a loopback IP address such as 127.0.0.1 or ::1, "
                      f"not {args.host!r}")
    if args.catalog is not None and not args.catalog.parent.is_dir():
        raise Refusal(f"origins serve: --catalog: directory {str(args.catalog.parent)!r} does not exist")
    from spillage.origins.server import serve   # waitress and the sites: only to serve them

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        serve(args.host, args.port, args.catalog, seed=args.seed)
    except OSError as e:   # the port is taken, say
        raise Refusal(f"origins serve: {e}", DAMAGED) from None
    return 0


@verb("origins catalog", help="build the sites' catalog and export what the auditor knows of them",
      args=[
          catalog_seed("catalog seed (default %(default)s)"),
          arg("--scenarios", nargs="+", type=Path, default=[], metavar="PATH",
              help="scenario files or folders to build from (default: the benchmark)"),
          arg("--out", type=Path, help="keep the SQLite catalog in this file"),
          arg("--export", metavar="FILE", help="write the site knowledge JSON here ('-' for stdout)"),
      ])
def cmd_origins_catalog(args) -> int:
    """Build the catalog of shop.test and bazaar.test and write the site knowledge the auditor uses as JSON
    (docs/KNOWLEDGE.md); with neither --out nor --export, the JSON goes to stdout."""
    import tempfile
    import time

    from spillage.origins.catalog import build_catalog
    from spillage.origins.knowledge import knowledge_json

    export = "-" if args.export is None and args.out is None else args.export
    for option, path in (("--out", args.out), ("--export", None if export == "-" else export)):
        if path is not None and not Path(path).resolve().parent.is_dir():
            raise Refusal(f"{option}: no folder {Path(path).resolve().parent}")
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


def load_scenarios(paths: list[Path]) -> list:
    """Every scenario under `paths` (the benchmark by default); bad files stop with their error."""
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.files import scenario_files
    from spillage.scenarios.loader import load_file

    return [s for f in scenario_files(paths or BENCHMARK_DIRS) for s in load_file(f)]


@verb("scenarios check", help="validate scenario files: errors, then the warnings that change an audit, "
                              "then the others grouped by kind; exit 2 on errors", args=[
    SCENARIO_PATHS,
    arg("--all", action="store_true", dest="every",
        help="list every warning, not one line per kind of those that change no audit (default: grouped)"),
])
def cmd_scenarios_check(args) -> int:
    from spillage.scenarios.check import check_paths
    from spillage.scenarios.check import report
    from spillage.scenarios.files import BENCHMARK_DIRS
    from spillage.scenarios.vocabulary import load_vocabulary

    paths = args.paths or BENCHMARK_DIRS
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise Refusal(f"{missing[0]}: no such file or folder")
    scenarios, problems = check_paths(paths, load_vocabulary())
    for line in report(problems, args.every):
        print(line)
    errors = sum(not p.warning for p in problems)
    progress(f"{len(scenarios)} scenarios checked: {errors} errors, {len(problems) - errors} warnings")
    return BAD_INPUT if errors else 0


@verb("scenarios list", help="a table of scenarios", args=[SCENARIO_PATHS])
def cmd_scenarios_list(args) -> int:
    from spillage.scenarios.benchmark import scenario_table

    print(scenario_table(load_scenarios(args.paths)))
    return 0


@verb("scenarios stats", help="the benchmark's numbers as Markdown", args=[
    SCENARIO_PATHS,
    arg("--write", type=Path, help="write to this file (docs/SCENARIOS.md) instead of stdout"),
])
def cmd_scenarios_stats(args) -> int:
    from spillage.scenarios.benchmark import stats_markdown

    text = stats_markdown(load_scenarios(args.paths))
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        progress(f"wrote {args.write}")
    else:
        print(text, end="")
    return 0


@verb("scenarios import", help="convert published task data into scenario files", args=[
    arg("--format", required=True, choices=["spillage-json"], help="the data's format"),
    arg("file", type=Path, help="the data file"),
    arg("--site", required=True, choices=SITES),
    arg("--out", required=True, type=Path, help="folder for the scenario files"),
    style("the prompts' style (default: from the file's name, else from each prompt)"),
])
def cmd_scenarios_import(args) -> int:
    from spillage.scenarios.importers.spillage_json import SpillageImportError
    from spillage.scenarios.importers.spillage_json import import_spillage_json

    try:
        written = import_spillage_json(args.file, args.site, args.out, args.style)
    except SpillageImportError as e:
        raise Refusal(f"scenarios import: {e}") from None
    for path in written:
        print(path)
    print(f"imported {len(written)} personas into {args.out}")
    return 0
