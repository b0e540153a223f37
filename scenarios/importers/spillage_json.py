"""Import the SPILLage paper's released personas (arXiv 2602.13516) as single-scenario files.

The data is `{"personas": [{id, name, website, task, prompt, relevant_attributes,
irrelevant_attributes}]}`. Each persona becomes `<out>/<site prefix>-<dataset>-<persona id>.yaml`
(`shop-amazon-chat-1.yaml`): the dataset name is the file's stem slugified, without a leading
`shopping-` (both our sites are shops).

What is taken as given and what is derived:

- `prompt`: the paper's prompt with its website (amazon.com, ebay.com, the persona's `website`)
  replaced by our site, since agents must shop there. `task` is the paper's task, lower-cased.
- `request`: the last sentence outside the dialogue that asks for something ("Based on this
  conversation, could you help me search shop.test for ...?"), else "Find <task> on <site>.".
- `attributes`: one per relevant and irrelevant string, `text` verbatim. `class` is guessed from
  keywords (`classes.py` explains the table); every class is a guess, so every attribute is
  `guessed: true`. `match` holds the text, the prompt's own wording of it when the text is a
  paraphrase, key phrases, the words of it rare enough to say it alone ("spirulina" of
  "superfood ingredients like spirulina": wordfreq), money/percent/unit/age spellings and
  inflections of sensitive words (`derive.py`); forms an irrelevant attribute shares with the
  task, the request or a relevant attribute are left out. `cues` from the keyword table;
  `concepts`: for an irrelevant attribute the `about-<match>` concept the catalog generator gives
  it (so what carries it can be judged), for a relevant one none, except `price-ceiling` on the
  budget that sets `success.max_price`. An irrelevant attribute that means what a benchmark
  attribute means takes that one's concepts, cues and match forms too (`meaning.py`: "divorce"
  takes `newly-single`, "officially single", "divorced").
- `sanitized_prompt`: the prompt without the sentences that state an irrelevant attribute; where
  dropping one would also drop the last statement of a relevant attribute, only the clause (or
  the words) stating the irrelevant one is cut.
- `success`: a category only when the task obviously names one in the vocabulary, no features,
  `max_price` from a relevant budget or ceiling ("under $150").

`derived` lists match, concepts, success and sanitized_prompt, so `spillage scenarios check`
reports problems in them as warnings for a person to review.
"""

import argparse
import json
import re
import sys
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from spillage.scenarios.importers import classes
from spillage.scenarios.importers import derive
from spillage.scenarios.importers import meaning
from spillage.scenarios.dump import Folded
from spillage.scenarios.dump import dump_yaml
from spillage.scenarios.matching import find_form
from spillage.scenarios.model import DERIVABLE
from spillage.scenarios.model import PRICE_CEILING
from spillage.scenarios.model import STYLES
from spillage.scenarios.model import Attribute
from spillage.scenarios.model import attribute_concepts
from spillage.scenarios.vocabulary import VOCABULARY_DIR
from spillage.scenarios.vocabulary import load_vocabulary

MAX_PERSONA_BYTES = 64 << 20   # the paper's released files are under 1 MiB each

FORMAT = "spillage-json"
SITE_PREFIX = {"shop.test": "shop", "bazaar.test": "bazaar"}
DERIVED = list(DERIVABLE)
FIELDS = ("id", "task", "prompt", "relevant_attributes", "irrelevant_attributes")

_CEILING = re.compile(
    r"\b(under|below|less than|no more than|not more than|max(imum)?|up to|at most|can'?t (go|spend) over|"
    r"cannot (go over|exceed)|within|budget|to spend|spend|ceiling|or less|tops)\b", re.IGNORECASE)


class SpillageImportError(ValueError):
    """Data that cannot be imported; str() is one line naming the file (and persona, field)."""


@dataclass
class Imported:
    """One converted persona: its file name, YAML text and what the heuristics left behind."""

    name: str
    document: dict
    text: str
    kept_irrelevant: list[str] = field(default_factory=list)   # still stated in sanitized_prompt
    lost_relevant: list[str] = field(default_factory=list)     # no longer stated there
    unstated: list[str] = field(default_factory=list)          # neither text nor form in the prompt
    cut_sentences: int = 0
    class_reasons: dict[str, str] = field(default_factory=dict)
    borrowed: dict[str, str] = field(default_factory=dict)        # attribute id → the benchmark attribute it took from


# --- reading ----------------------------------------------------------------------------------

def read_personas(path: Path) -> list[dict]:
    """The validated persona objects of a SPILLage JSON file; errors name file, persona, field."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_PERSONA_BYTES + 1)
    except FileNotFoundError:
        raise SpillageImportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpillageImportError(f"{path}: is a folder, not a data file") from None
    except OSError as e:
        raise SpillageImportError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(raw) > MAX_PERSONA_BYTES:
        raise SpillageImportError(f"{path}: larger than {MAX_PERSONA_BYTES >> 20} MiB: not a persona file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpillageImportError(f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpillageImportError(f"{path}: not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SpillageImportError(f"{path}: not JSON: nested too deeply") from None
    except ValueError as e:   # a number of more digits than Python converts
        raise SpillageImportError(f"{path}: not JSON: {e}") from None
    personas = data.get("personas") if isinstance(data, dict) else data
    if not isinstance(personas, list):
        got = "an object without a \"personas\" list" if isinstance(data, dict) else type(data).__name__
        raise SpillageImportError(f"{path}: expected {{\"personas\": [...]}}, got {got}")
    if not personas:
        raise SpillageImportError(f"{path}: \"personas\" is empty")
    seen: dict[str, int] = {}
    for i, persona in enumerate(personas):
        _validate(path, i, persona)
        key = derive.slugify(str(persona["id"]))
        if key in seen:
            raise SpillageImportError(f"{path}: personas[{i}]: id {persona['id']!r} repeats personas[{seen[key]}]'s")
        seen[key] = i
    return personas


def _kind(value) -> str:
    return "null" if value is None else {str: "text", bool: "true/false", int: "a number", float: "a number",
                                         list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _validate(path: Path, i: int, persona) -> None:
    where = f"{path}: personas[{i}]"
    if not isinstance(persona, dict):
        raise SpillageImportError(f"{where}: expected an object, got {_kind(persona)}")
    if "id" in persona:
        where += f" (id {persona['id']!r})" if isinstance(persona["id"], (str, int)) else ""
    for name in FIELDS:
        if name not in persona:
            raise SpillageImportError(f"{where}: field {name!r} is missing")
    ident = persona["id"]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or not derive.slugify(str(ident)):
        raise SpillageImportError(f"{where}: field 'id': expected a number or a name with letters or digits, "
                                  f"got {_kind(ident)}")
    for name in ("task", "prompt"):
        if not isinstance(persona[name], str) or not persona[name].strip():
            raise SpillageImportError(f"{where}: field {name!r}: expected non-empty text, got {_kind(persona[name])}"
                                      + (" (empty)" if isinstance(persona[name], str) else ""))
    if "website" in persona and not isinstance(persona["website"], str):
        raise SpillageImportError(f"{where}: field 'website': expected text, got {_kind(persona['website'])}")
    for name in ("relevant_attributes", "irrelevant_attributes"):
        values = persona[name]
        if not isinstance(values, list):
            raise SpillageImportError(f"{where}: field {name!r}: expected a list of texts, got {_kind(values)}")
        for k, value in enumerate(values):
            if not isinstance(value, str) or not value.strip():
                raise SpillageImportError(f"{where}: field {name!r}[{k}]: expected non-empty text, got {_kind(value)}"
                                          + (" (empty)" if isinstance(value, str) else ""))
    if not persona["relevant_attributes"] and not persona["irrelevant_attributes"]:
        raise SpillageImportError(f"{where}: no attributes (both attribute lists are empty)")


def read_vocabulary(folder: Path | None = None) -> tuple[dict[str, str], set[str]]:
    """({category slug: label}, concept slugs) from the vocabulary files (`scenarios check`
    reports problems in them)."""
    vocabulary = load_vocabulary(folder or VOCABULARY_DIR)
    return {slug: term.label for slug, term in vocabulary.categories.items()}, set(vocabulary.concepts)


def dataset_stem(path: Path) -> str:
    """`shopping_Amazon_chat.json` → `amazon-chat`."""
    stem = derive.slugify(path.stem, limit=60) or "data"
    if stem.startswith("shopping-") and len(stem) > len("shopping-"):
        stem = stem[len("shopping-"):]
    return stem


# --- converting -------------------------------------------------------------------------------

def _unique(base: str, used: set[str]) -> str:
    ident, n = base, 2
    while ident in used:
        ident, n = f"{base}-{n}", n + 1
    used.add(ident)
    return ident


def _ceiling(text: str) -> float | None:
    amounts = derive.money_amounts(text)
    if amounts and _CEILING.search(text):
        return max(amounts)
    return None


def convert_persona(persona: dict, *, site: str, style: str, scenario_id: str, file_name: str,
                    categories: dict[str, str], concepts: set[str]) -> Imported:
    """One persona as a single-scenario document (plain data in the documented field order)."""
    website = persona.get("website") or ""
    prompt = derive.clean_text(derive.neutralise_sites(persona["prompt"], site, website))
    task = " ".join(persona["task"].split()).lower()
    lines = derive.parse_lines(prompt)
    sentences = [s for line in lines for s in line.sentences if s]
    request_at = derive.find_request(lines)
    if request_at:
        request = " ".join(lines[request_at[0]].sentences[request_at[1]].split())
    else:
        request = f"Find {task} on {site}."

    entries = [(" ".join(t.split()), True) for t in persona["relevant_attributes"]]
    entries += [(" ".join(t.split()), False) for t in persona["irrelevant_attributes"]]
    material = [task, request] + [t for t, relevant in entries if relevant]
    joined = " | ".join(material)  # " | " keeps a form from spanning two pieces

    used: set[str] = set()
    attributes, reasons = [], {}
    lent = dict(zip([t for t, relevant in entries if not relevant],
                    meaning.borrow([t for t, relevant in entries if not relevant])))
    borrowed = {}
    max_price, budget_ids = None, []
    for text, relevant in entries:
        ident = _unique(derive.slugify(text, limit=40) or "attribute", used)
        cls, reason = classes.guess_class(text, relevant, prompt, "" if relevant else joined)
        if not relevant and cls == classes.FALLBACK_RELEVANT:
            cls = classes.FALLBACK_IRRELEVANT
        reasons[ident] = reason
        age = re.fullmatch(r"\d{1,3}", text) if cls == "age" else None
        # A bare age ("72") is stated as "I'm 72", "72 years old", "72-year-old".
        match = derive.derive_match(f"{text} years old" if age else text, relevant, sentences, material,
                                    keywords=classes.keyword_forms(text, cls, reason))
        cues = classes.guess_cues(text, "" if relevant else joined)
        attribute = {"id": ident, "text": text, "relevant": relevant, "class": cls, "guessed": True,
                     "match": match, "cues": cues, "concepts": []}
        if not relevant:  # the concept the catalog generator gives it, so what names it can be judged
            attribute["concepts"] = list(attribute_concepts(Attribute(ident, text, relevant, cls, tuple(match))))
            if loan := lent.get(text):   # and what the benchmark attribute meaning the same lends it
                taken = lambda forms: [f for f in forms if not find_form(joined, (f,))]   # noqa: E731
                attribute["match"] = list(dict.fromkeys([*match, *taken(loan.match)]))
                attribute["cues"] = list(dict.fromkeys([*cues, *taken(loan.cues)]))
                attribute["concepts"] += [c for c in loan.concepts if c in concepts and c not in attribute["concepts"]]
                borrowed[ident] = loan.reason()
        if relevant and (ceiling := _ceiling(text)) is not None:
            max_price = ceiling if max_price is None else min(max_price, ceiling)
            budget_ids.append(ident)
        attributes.append(attribute)
    if max_price is not None and PRICE_CEILING in concepts:
        for attribute in attributes:
            if attribute["id"] in budget_ids:
                attribute["concepts"] = [PRICE_CEILING]

    forms = {a["id"]: tuple(dict.fromkeys([a["text"], *a["match"]])) for a in attributes}
    result = derive.sanitize(
        lines, request_at,
        relevant={a["id"]: forms[a["id"]] for a in attributes if a["relevant"]},
        irrelevant={a["id"]: forms[a["id"]] for a in attributes if not a["relevant"]},
    )
    sanitized = result.text.strip() or request

    success = {"category": classes.guess_category(task, categories), "features": []}
    if max_price is not None:
        success["max_price"] = int(max_price) if float(max_price).is_integer() else round(max_price, 2)

    document = {
        "id": scenario_id, "site": site, "style": style, "task": task, "request": Folded(request),
        "prompt": prompt, "sanitized_prompt": sanitized, "attributes": attributes, "success": success,
        "derived": list(DERIVED),
        "source": {"format": FORMAT, "file": file_name, "persona": persona["id"]},
    }
    header = (f"# Imported from {file_name}, persona {persona['id']}"
              + (f" ({' '.join(str(persona['name']).split())})" if isinstance(persona.get("name"), str)
                 and persona["name"].strip() else "")
              + ", by `spillage scenarios import`.\n"
              "# Classes are guessed and match, concepts, success and sanitized_prompt derived: review them.\n")
    return Imported(
        name=f"{scenario_id}.yaml", document=document, text=header + dump_yaml(document),
        kept_irrelevant=result.kept_irrelevant, lost_relevant=result.lost_relevant,
        unstated=[a["id"] for a in attributes if not find_form(prompt, forms[a["id"]])],
        cut_sentences=result.cut_sentences, class_reasons=reasons, borrowed=borrowed,
    )


def style_of(file_name: str, prompt: str) -> str:
    """The style a persona's prompt is written in: named in the file's name (the paper's files are
    `<domain>_<Site>_<style>.json`), else read from the prompt: a forwarded email (From:, Subject:,
    "Forwarded message"), a chat (two or more lines `Name: "..."`), else generic."""
    named = [s for s in STYLES if re.search(rf"(?<![a-z]){s}(?![a-z])", file_name.lower())]
    if len(named) == 1:
        return named[0]
    if re.search(r"(?im)^\s*(from|subject|to|date):\s|forwarded message", prompt):
        return "email"
    if len(re.findall(r"(?m)^\s*[A-Z][\w .'-]{0,30}:\s*\S", prompt)) >= 2:
        return "chat"
    return "generic"


def convert_file(path: Path, site: str, style: str | None = None,
                 vocabulary_dir: Path | None = None) -> list[Imported]:
    """Every persona of `path` converted, nothing written; raises SpillageImportError. The style is
    each persona's own (`style_of`) unless one is given."""
    if site not in SITE_PREFIX:
        raise SpillageImportError(f"unknown site {site!r}: use {' or '.join(SITE_PREFIX)}")
    if style is not None and style not in STYLES:
        raise SpillageImportError(f"unknown style {style!r}: use {', '.join(STYLES)}")
    personas = read_personas(path)
    categories, concepts = read_vocabulary(vocabulary_dir)
    stem = dataset_stem(path)
    return [
        convert_persona(p, site=site, style=style or style_of(path.name, p["prompt"]), file_name=path.name,
                        categories=categories,
                        concepts=concepts,
                        scenario_id=f"{SITE_PREFIX[site]}-{stem}-{derive.slugify(str(p['id']))}")
        for p in personas
    ]


def import_spillage_json(path: Path, site: str, out_dir: Path, style: str | None = None, *,
                         vocabulary_dir: Path | None = None) -> list[Path]:
    """Convert every persona of the SPILLage JSON file `path` into one single-scenario YAML file
    in `out_dir` (created if needed; files of the same name are replaced). Nothing is written
    unless the whole file converts. Returns the written paths in persona order."""
    path, out_dir = Path(path), Path(out_dir)
    converted = convert_file(path, site, style, vocabulary_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpillageImportError(f"{out_dir}: exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for item in converted:
            target = out_dir / item.name
            target.write_bytes(item.text.encode("utf-8"))
            written.append(target)
    except OSError as e:
        raise SpillageImportError(f"{out_dir}: cannot write: {e.strerror or e}") from None
    return written


# --- command line -----------------------------------------------------------------------------

class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _UsageError(message)


def main(argv: list[str] | None = None) -> int:
    """`--format spillage-json FILE --site SITE --out DIR [--style STYLE]`; 0 on success, 2 on
    bad arguments or data (one line on stderr)."""
    parser = _Parser(prog="spillage scenarios import", description="Convert SPILLage persona JSON "
                     "into single-scenario files.")
    parser.add_argument("--format", required=True, choices=[FORMAT])
    parser.add_argument("file", type=Path)
    parser.add_argument("--site", required=True, choices=list(SITE_PREFIX))
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--style", choices=list(STYLES),
                        help="the prompts' style (default: from the file's name, else from each prompt)")
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        print(f"spillage: scenarios import: {e}", file=sys.stderr)
        return 2
    try:
        written = import_spillage_json(args.file, args.site, args.out, args.style)
    except SpillageImportError as e:
        print(f"spillage: scenarios import: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(f"imported {len(written)} personas into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
