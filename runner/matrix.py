"""Batch matrices: scenarios × frameworks × models × conditions × repeats, read from YAML.

    name: smoke
    scenarios: [shop-kettle-chat, bazaar-film-camera-chat]   # ids, files, or "all" (the benchmark)
    styles: [chat]                    # optional: keep only these styles
    frameworks: [browser-use, autogen]
    models: [scripted:minimal, scripted:oversharer]
    conditions:                       # optional; default: the original prompt, no note
      - {name: original}
      - {name: sanitized, prompt: sanitized}
      - {name: note, system_note: "Share only what the task needs."}
    repeats: 1
    max_steps: 50                     # the paper's limits (proxy/settings.py holds the defaults)
    timeout: 300
    seed: 0                           # catalog seed of the sites
    model_via_proxy: false            # send model calls through the proxy (the provider as observer)
    isolation: sandbox                # or none: each run's agent without a sandbox (docs/EVIDENCE.md)
    live: ["*.amazon.com", "@live-hosts.txt"]   # optional: real hosts the runs reach (README, Live sites)

The format is in docs/BATCH.md. Errors are one line: `FILE:LINE: key: problem`.
"""

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from spillage.addons.guard_policy import MODES as GUARD_MODES
from spillage.proxy.documents import DocumentError
from spillage.proxy.documents import load_yaml
from spillage.proxy.live import LiveError
from spillage.proxy.live import live_hosts
from spillage.proxy.settings import ISOLATION
from spillage.proxy.settings import MAX_STEPS
from spillage.proxy.settings import SEED
from spillage.proxy.settings import STYLES
from spillage.proxy.settings import TIMEOUT
from spillage.runner.conditions import PROMPTS
from spillage.runner.conditions import Condition
from spillage.agents.model_spec import ModelSpecError
from spillage.agents.model_spec import parse_model
from spillage.scenarios.files import BENCHMARK_DIRS
from spillage.scenarios.loader import ScenarioError
from spillage.scenarios.loader import load_file
from spillage.scenarios.loader import resolve_scenario
from spillage.scenarios.files import scenario_files
from spillage.scenarios.model import Scenario

FRAMEWORKS = ("browser-use", "autogen")
KEYS = {"name", "scenarios", "styles", "frameworks", "models", "conditions", "repeats", "max_steps",
        "timeout", "seed", "model_via_proxy", "isolation", "live"}
CONDITION_KEYS = {"name", "prompt", "system_note", "guard", "guard_policy"}


class MatrixError(ValueError):
    """A matrix file we cannot run; str() is one line naming the file and the place."""

    def __init__(self, path: Path, where: str, problem: str, line: int | None = None):
        place = f"{path}:{line}" if line else str(path)
        super().__init__(f"{place}: {where}: {problem}" if where else f"{place}: {problem}")


@dataclass(frozen=True)
class NamedCondition:
    """A condition of the matrix under the name its sessions carry."""

    name: str
    condition: Condition


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix: what `spillage run` is asked to do, and the key it is known by."""

    scenario: Scenario
    scenario_ref: str  # as `spillage run --scenario` takes it
    framework: str
    model: str
    condition: NamedCondition
    repeat: int

    @property
    def key(self) -> str:
        """Unique within a batch, stable across runs of it: also the session folder's name."""
        model = parse_model(self.model).label()
        return f"{self.scenario.id}--{self.framework}--{model}--{self.condition.name}--r{self.repeat}"


@dataclass(frozen=True)
class Matrix:
    """A parsed matrix: its runs in order, and the limits every run gets."""

    name: str
    file: Path
    runs: list[RunSpec]
    max_steps: int
    timeout: float
    seed: int
    model_via_proxy: bool
    isolation: str = "sandbox"
    live: tuple[str, ...] = ()


MAX_RUNS = 100_000          # a matrix of more cells is a mistake (the paper's is 1,080)
MAX_MATRIX_BYTES = 1024 * 1024


def load_matrix(path: Path) -> Matrix:
    """Read and check a matrix file; every scenario, model and condition is checked before anything runs."""
    try:
        data, node = load_yaml(path, MAX_MATRIX_BYTES, "matrix file")
    except DocumentError as e:
        raise MatrixError(e.path, "", e.problem, e.line) from None
    if not isinstance(data, dict):
        raise MatrixError(path, "", "expected a mapping of matrix keys (scenarios, frameworks, models, ...)")
    lines = {key.value: key.start_mark.line + 1 for key, _ in node.value}
    fields = _Reader(path, data, lines)
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise fields.error(unknown[0], f"unknown key; expected one of {', '.join(sorted(KEYS))}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*", name) or set(name) == {"."}:
        raise fields.error("name", f"{name!r}: use letters, digits, '.', '_' and single '-' (it names a folder)")
    scenarios = fields.scenarios()
    frameworks = fields.strings("frameworks", FRAMEWORKS)
    models = fields.strings("models")
    for i, model in enumerate(models):
        try:
            parse_model(model)
        except ModelSpecError as e:
            raise fields.error(f"models[{i}]", str(e)) from None
    conditions = fields.conditions(scenarios)
    repeats = fields.number("repeats", 1, minimum=1)
    cells = len(scenarios) * len(frameworks) * len(models) * len(conditions) * repeats
    if cells > MAX_RUNS:
        raise fields.error("repeats", f"the matrix makes {cells:,} runs; more than {MAX_RUNS:,} is refused")
    runs = [RunSpec(s, ref, f, m, c, r) for (s, ref), f, m, c, r in
            itertools.product(scenarios, frameworks, models, conditions, range(1, repeats + 1))]
    keys = [run.key for run in runs]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise fields.error("", f"two runs would share the name {twice}: give conditions distinct names")
    return Matrix(name=name, file=path, runs=runs,
                  max_steps=fields.number(MAX_STEPS.name, MAX_STEPS.default, minimum=1),
                  timeout=float(fields.number(TIMEOUT.name, TIMEOUT.default, minimum=1)),
                  seed=fields.number(SEED.name, SEED.default), model_via_proxy=fields.flag("model_via_proxy"),
                  isolation=fields.choice("isolation", ISOLATION), live=fields.live())


class _Reader:
    """The matrix mapping, read key by key, with errors that name the key and its line."""

    def __init__(self, path: Path, data: dict, lines: dict):
        self.path, self.data, self.lines = path, data, lines

    def error(self, where: str, problem: str) -> MatrixError:
        return MatrixError(self.path, where, problem, self.lines.get(where.split("[")[0]))

    def strings(self, key: str, allowed: tuple[str, ...] = ()) -> list[str]:
        value = self.data.get(key)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "expected a non-empty list of strings")
        for i, v in enumerate(value):
            if allowed and v not in allowed:
                raise self.error(f"{key}[{i}]", f"{v!r} is not one of {', '.join(allowed)}")
        return value

    def number(self, key: str, default: int, minimum: int = 0) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"expected a whole number of at least {minimum}, not {value!r}")
        return value

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        """One of `allowed` (the first by default)."""
        value = self.data.get(key, allowed[0])
        if value not in allowed:
            raise self.error(key, f"expected one of {', '.join(allowed)}, not {value!r}")
        return value

    def flag(self, key: str) -> bool:
        value = self.data.get(key, False)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, not {value!r}")
        return value

    def live(self) -> tuple[str, ...]:
        """The live hosts' patterns (proxy/live.py); an @FILE is read from beside the matrix file."""
        if "live" not in self.data:
            return ()
        values = [v if not v.startswith("@") else "@" + str(self.path.parent / v[1:]) for v in self.strings("live")]
        try:
            return live_hosts(values, "live")
        except LiveError as e:
            raise self.error("live", str(e).removeprefix("live: ")) from None

    def scenarios(self) -> list[tuple[Scenario, str]]:
        """(scenario, reference for `spillage run --scenario`) for every scenario named, after `styles`."""
        styles = self.strings("styles", STYLES) if "styles" in self.data else list(STYLES)
        refs = self.strings("scenarios")
        found: list[tuple[Scenario, str]] = []
        for i, ref in enumerate(refs):
            try:
                if ref == "all":
                    found += [(s, s.id) for f in scenario_files(BENCHMARK_DIRS) for s in load_file(f)]
                elif Path(ref).is_file():
                    found += [(s, ref) for s in load_file(Path(ref))]
                else:
                    found.append((resolve_scenario(ref), ref))
            except ScenarioError as e:
                raise self.error(f"scenarios[{i}]", str(e)) from None
        kept = [(s, ref) for s, ref in found if s.style in styles]
        if not kept:
            raise self.error("scenarios", "no scenario left after the styles filter")
        return list({s.id: (s, ref) for s, ref in kept}.values())

    def conditions(self, scenarios: list[tuple[Scenario, str]]) -> list[NamedCondition]:
        """The conditions (default: the original prompt), each checked against every scenario."""
        value = self.data.get("conditions", [{"name": "original"}])
        if not isinstance(value, list) or not value:
            raise self.error("conditions", "expected a non-empty list of {name, prompt, system_note}")
        named = []
        for i, item in enumerate(value):
            where = f"conditions[{i}]"
            if isinstance(item, dict) and isinstance(item.get("name"), bool):
                raise self.error(where, "name is a YAML boolean (off, on, yes, no): quote it")
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise self.error(where, "expected a mapping with a name")
            if not re.fullmatch(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*", item["name"]):
                raise self.error(where, f"name {item['name']!r}: use letters, digits, '.', '_' and single '-'")
            if set(item) - CONDITION_KEYS:
                raise self.error(where, f"unknown key {sorted(set(item) - CONDITION_KEYS)[0]!r}; "
                                        f"expected {', '.join(sorted(CONDITION_KEYS))}")
            if item.get("prompt", "original") not in PROMPTS:
                raise self.error(where, f"prompt must be one of {', '.join(PROMPTS)}")
            guard = "off" if item.get("guard", "off") is False else item.get("guard", "off")   # YAML reads off as false
            if guard not in GUARD_MODES:
                raise self.error(where, f"guard must be one of {', '.join(GUARD_MODES)}")
            policy = item.get("guard_policy") or ""
            if policy and not Path(policy).is_absolute():
                policy = str((self.path.parent / policy).resolve())   # beside the matrix file
            condition = Condition(item.get("prompt", "original"), str(item.get("system_note") or ""),
                                  guard, policy)
            for scenario, _ in scenarios:
                try:
                    condition.task(scenario)
                    condition.check_guard(scenario)
                except ValueError as e:   # a PolicyError is one
                    raise self.error(where, str(e)) from None
            named.append(NamedCondition(item["name"], condition))
        return named
