"""Reading the documents users hand us (YAML and JSON files) without trusting them.

A file is measured before it is read (`limit` bytes, so no input can take gigabytes), must be
UTF-8 (a BOM is allowed), and may not nest deeper than the parsers can follow or hold numbers
Python refuses to convert. Every refusal is a DocumentError that names the file and, where the
parser knows it, the line:

    spec = load_json(path, limit=1 << 20)        # DocumentError: meta.json:3: not valid JSON: ...
    node = compose_yaml(path, limit=1 << 20)     # the YAML node tree, for line numbers

And what we write for users appears whole or not at all (`atomic_file`).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:  # PyYAML is imported by the functions that read YAML: the capture log and verify read none
    import yaml

MiB = 1 << 20


class DocumentError(ValueError):
    """A document that cannot be read: `path`, the 1-based `line` when known, and the `problem`."""

    def __init__(self, path: Path, line: int | None, problem: str):
        self.path, self.line, self.problem = Path(path), line, problem
        super().__init__(f"{path}{f':{line}' if line else ''}: {problem}")


def read_text(path: Path, limit: int, what: str = "document") -> str:
    """The text of `path`: at most `limit` bytes of UTF-8, else DocumentError."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except IsADirectoryError:
        raise DocumentError(path, None, f"is a folder, not a {what}") from None
    except FileNotFoundError:
        raise DocumentError(path, None, "no such file") from None
    except OSError as e:
        raise DocumentError(path, None, f"cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise DocumentError(path, None, f"larger than {size_text(limit)}: not a {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DocumentError(path, line, f"not UTF-8 text (byte {e.start})") from None


def load_json(path: Path, limit: int, what: str = "JSON document") -> Any:
    """The JSON value in `path` (see read_text): no NaN or Infinity, no numbers too large to be
    finite, no duplicate keys, no nesting deeper than the parser follows."""
    text = read_text(path, limit, what)
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=refuse_constant,
                          parse_float=finite_float)
    except json.JSONDecodeError as e:
        raise DocumentError(path, e.lineno, f"not valid JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise DocumentError(path, None, "not valid JSON: nested too deeply") from None
    except ValueError as e:  # a number too long or not finite, a key given twice
        raise DocumentError(path, None, f"not valid JSON: {e}") from None


def compose_yaml(path: Path, limit: int, what: str = "YAML document") -> yaml.Node:
    """The YAML node tree of `path` (see read_text); DocumentError for an empty file."""
    import yaml

    text = read_text(path, limit, what)
    try:
        root = yaml.compose(text, Loader=yaml.CSafeLoader)  # libyaml: ten times faster, line numbers kept,
                                                             # nesting refused past 1000 levels
    except RecursionError:
        raise DocumentError(path, None, "not valid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    if root is None:
        raise DocumentError(path, None, "file is empty")
    return root


def load_yaml(path: Path, limit: int, what: str = "YAML document") -> tuple[Any, yaml.Node]:
    """(value, node tree) of `path`: the plain data and the nodes that carry its line numbers."""
    root = compose_yaml(path, limit, what)
    return construct(path, root), root


def construct(path: Path, node: yaml.Node) -> Any:
    """Plain data of a node tree read from `path`, with safe types only."""
    import yaml

    loader = yaml.CSafeLoader("")
    try:
        return loader.construct_document(node)
    except RecursionError:
        raise DocumentError(path, None, "not valid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    except ValueError as e:  # an integer of more digits than Python converts, a date out of range
        problem = "a number too long to read" if "digits" in str(e) else str(e)
        raise DocumentError(path, None, f"not valid YAML: {problem}") from None
    finally:
        loader.dispose()


@contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file that appears at `path` whole or not at all: written beside it (with an ordinary new
    file's permissions), then renamed over it; removed if the block raises."""
    path = Path(path)
    if path.is_dir():
        raise DocumentError(path, None, "is a folder; give a file name")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)   # as open() would make it, not mkstemp's 0600
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def size_text(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n // 1024} KiB"


def _yaml_error(path: Path, error: yaml.YAMLError) -> DocumentError:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return DocumentError(path, mark.line + 1 if mark else None, f"not valid YAML: {problem}")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {twice!r} given twice")
    return obj


def refuse_constant(name: str) -> Any:
    """json's parse_constant: NaN and Infinity are no JSON."""
    raise ValueError(f"{name} is not a JSON number")


def finite_float(text: str) -> float:
    """json's parse_float: a number too large to be finite is refused, not read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]}… is too large")
    return value
