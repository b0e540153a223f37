"""How our sites read the numbers in their paths and forms (their routes' `{name:id}` converter is these rules).

The guard and the audit read ids with these same functions (through the site profiles' `ids: int`,
origins/grammar.py), so every spelling a site serves as product 10249 — `/p/%31%30%32%34%39`,
`/p/１０２４９`, `/p/+10249`, `/p/1_0249`, a form's ` 10249` — is product 10249 to them too.
"""

from __future__ import annotations


def path_int(value: str, digits: int | None = None) -> int | None:
    """A path segment (already percent-decoded) as falcon's `int` converter reads it: no surrounding
    whitespace, then Python's `int()` (a sign, `_` between digits, and any script's digits pass)."""
    if (digits is not None and len(value) != digits) or value.strip() != value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def form_int(value) -> int | None:
    """A form or query value as `whole_number` reads it: stripped, then ASCII digits only."""
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.isascii() and text.isdigit() else None
