"""Where scenario files are: the benchmark's folders, and the .yaml files a list of paths names.

Nothing here reads a scenario, so what only needs the files (finding a stored catalog by the hash of
the benchmark's files, at every run's start) does without the YAML reader and the scenario model.
"""

from pathlib import Path

SCENARIO_DIR = Path(__file__).parent
BENCHMARK_DIRS = [SCENARIO_DIR / "shop", SCENARIO_DIR / "bazaar"]


def scenario_files(paths: list[Path]) -> list[Path]:
    """The .yaml files named by `paths` (files as given, folders searched recursively), sorted."""
    files = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.yaml") if "vocabulary" not in p.parts))
        else:
            files.append(path)
    return files
