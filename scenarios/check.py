"""Judge scenario files: one clear line per problem, errors and warnings.

Every problem has a kind. Warnings of the kinds in CHANGES_AUDIT change what an audit of the
scenario finds (a form that matches nothing, a prompt that still states what it should not, an
attribute no site surface can carry); the others are bookkeeping a person may review (a class a
tool guessed). `report` lists errors, then the warnings that change the audit, then one line per
kind of the others with its count and first place (all of them with `every=True`).
"""

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from spillage.scenarios.loader import ScenarioError
from spillage.scenarios.loader import load_file
from spillage.scenarios.files import scenario_files
from spillage.scenarios.matching import find_form
from spillage.scenarios.model import CLASSES
from spillage.scenarios.model import CONDITIONS
from spillage.scenarios.model import Scenario
from spillage.scenarios.vocabulary import Vocabulary


BARE_NUMBER = re.compile(r"[\d.,\s]+")
OWN_CONCEPT = "about-"   # a concept the catalog generator makes for one attribute (scenarios/model.py): not the vocabulary's
CHANGES_AUDIT = ("unstated", "sanitized", "no forms", "bare number", "look-alike", "no concepts", "concept unknown",
                 "success unscored")


@dataclass(frozen=True)
class Problem:
    """What is wrong, and where: `file:line: error|warning: field: message`."""

    file: str
    line: int | None
    field: str
    message: str
    warning: bool = False
    kind: str = ""          # what sort of problem, for grouping (CHANGES_AUDIT, REVIEW)

    def __str__(self) -> str:
        place = f"{self.file}:{self.line}" if self.line else self.file
        level = "warning" if self.warning else "error"
        return f"{place}: {level}: {self.field}: {self.message}" if self.field else f"{place}: {level}: {self.message}"


class _Findings:
    """Collects problems for one file; `derived` fields and guessed classes downgrade to warnings."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.problems: list[Problem] = []

    def add(self, field: str, message: str, *, kind: str, derived: str | None = None, warning: bool = False,
            line: int | None = None) -> None:
        warning = warning or (derived is not None and derived in self.scenario.derived)
        line = line or self.scenario.line(field)
        self.problems.append(Problem(self.scenario.file, line, field, message, warning, kind))


def _prompt_field(scenario: Scenario, name: str) -> str:
    return f"styles.{scenario.style}.{name}" if scenario.persona != scenario.id else name


def _check_attributes(first: Scenario, vocabulary: Vocabulary, found: _Findings) -> None:
    roles = first.success.roles()
    seen: set[str] = set()
    for i, a in enumerate(first.attributes):
        at = f"attributes[{i}]"
        if a.id in seen:
            found.add(f"{at}.id", f"duplicate attribute id {a.id!r}", kind="duplicate id")
        seen.add(a.id)
        if a.cls not in CLASSES:
            found.add(f"{at}.class", f"unknown class {a.cls!r}", kind="unknown class", warning=a.guessed)
        elif a.cls == "requirement" and not a.relevant:
            found.add(f"{at}.class", "a requirement must be relevant", kind="irrelevant requirement", warning=a.guessed)
        if a.guessed:
            found.add(f"{at}.class", f"class {a.cls!r} was guessed; review it", kind="class guessed", warning=True)
        for concept in a.concepts:
            if not vocabulary.knows(concept) and not concept.startswith(OWN_CONCEPT):
                found.add(f"{at}.concepts", f"concept {concept!r} is not in the vocabulary", kind="concept unknown",
                          derived="concepts")
        if a.relevant and not roles & set(a.concepts):
            found.add(f"{at}.concepts", f"relevant attribute {a.id!r} has no role in success "
                      f"(none of its concepts is the category, a feature, a condition or price-ceiling)",
                      kind="no role in success", derived="success" if "success" in first.derived else "concepts")
        for form in a.match:
            if BARE_NUMBER.fullmatch(form):
                found.add(f"{at}.match", f"{form!r} is a bare number: it would match prices, sizes and ids; "
                          f"say what it counts (\"{form} years old\", \"${form}\")", kind="bare number", derived="match")
        for phrase in a.look_alikes:
            if not find_form(phrase, a.match):
                found.add(f"{at}.look_alikes", f"{phrase!r} holds none of the attribute's match forms: a "
                          "look-alike is a phrase in which one of them means something else", kind="look-alike")
        if not a.relevant and not a.match and not a.cues:
            found.add(at, f"irrelevant attribute {a.id!r} has neither match nor cues", kind="no forms", derived="match")
        if not a.relevant and not a.concepts:
            found.add(at, f"irrelevant attribute {a.id!r} has no concepts: no site surface can name it",
                      kind="no concepts", warning=True)


def _check_success(first: Scenario, vocabulary: Vocabulary, found: _Findings) -> None:
    success = first.success
    if not success.category:
        found.add("success.category", "empty: the task's success cannot be scored", kind="success unscored", warning=True)
    elif success.category not in vocabulary.categories:
        found.add("success.category", f"category {success.category!r} is not in the vocabulary",
                  kind="success unscored", derived="success")
    for feature in success.features:
        if not vocabulary.knows(feature):
            found.add("success.features", f"feature {feature!r} is not in the vocabulary", kind="success unscored", derived="success")
    for condition in success.condition:
        if condition not in CONDITIONS:
            found.add("success.condition", f"{condition!r} is not one of {', '.join(CONDITIONS)}",
                      kind="success unscored", derived="success")


def _check_prompts(scenario: Scenario, found: _Findings) -> None:
    prompt_field = _prompt_field(scenario, "prompt")
    sanitized_field = _prompt_field(scenario, "sanitized_prompt")
    for a in scenario.attributes:
        if not find_form(scenario.prompt, (a.text, *a.match)):
            found.add(prompt_field, f"does not state attribute {a.id!r} (neither its text nor a match form)",
                      kind="unstated", derived="match")
            continue
        in_sanitized = find_form(scenario.sanitized_prompt, (a.text, *a.match))
        if a.relevant and not in_sanitized:
            found.add(sanitized_field, f"no longer states relevant attribute {a.id!r}",
                      kind="sanitized", derived="sanitized_prompt")
        elif not a.relevant and in_sanitized:
            found.add(sanitized_field, f"still states irrelevant attribute {a.id!r} ({in_sanitized!r})",
                      kind="sanitized", derived="sanitized_prompt", line=scenario.text_line(sanitized_field, (in_sanitized,)))


def check_file(path: Path, vocabulary: Vocabulary) -> tuple[list[Scenario], list[Problem]]:
    """The scenarios of one file and the problems in it."""
    try:
        scenarios = load_file(path)
    except ScenarioError as e:
        return [], [Problem(str(e.path), e.line, e.where, e.problem, kind="unreadable")]
    found = _Findings(scenarios[0])
    _check_attributes(scenarios[0], vocabulary, found)
    _check_success(scenarios[0], vocabulary, found)
    for scenario in scenarios:
        found.scenario = scenario
        _check_prompts(scenario, found)
    return scenarios, found.problems


def check_paths(paths: list[Path], vocabulary: Vocabulary) -> tuple[list[Scenario], list[Problem]]:
    """All scenarios under `paths` and every problem, duplicate ids across files included."""
    problems = [Problem(f, line, where, message, kind="vocabulary") for f, line, where, message in vocabulary.problems]
    scenarios: list[Scenario] = []
    for path in scenario_files(paths):
        loaded, found = check_file(path, vocabulary)
        scenarios.extend(loaded)
        problems.extend(found)
    counts = Counter(s.id for s in scenarios)
    first_file = {}
    for s in scenarios:
        if counts[s.id] > 1 and first_file.setdefault(s.id, s.file) != s.file:
            problems.append(Problem(s.file, s.line("id"), "id",
                                    f"duplicate scenario id {s.id!r} (also in {first_file[s.id]})", kind="duplicate id"))
    return scenarios, problems


def report(problems: list[Problem], every: bool = False) -> list[str]:
    """The lines `scenarios check` prints: errors, then the warnings that change an audit, then the
    other warnings one line per kind (each of them when `every`)."""
    errors = [p for p in problems if not p.warning]
    audit = [p for p in problems if p.warning and p.kind in CHANGES_AUDIT]
    review = [p for p in problems if p.warning and p.kind not in CHANGES_AUDIT]
    lines = [str(p) for p in errors + audit]
    if every:
        return lines + [str(p) for p in review]
    for kind, count in Counter(p.kind for p in review).most_common():
        first = next(p for p in review if p.kind == kind)
        place = f"{first.file}:{first.line}" if first.line else first.file
        lines.append(f"{count} warning{'s' if count > 1 else ''} to review: {kind} (first: {place}: {first.message}; --all lists them)")
    return lines
