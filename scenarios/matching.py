"""Find an attribute's surface forms in text the way an observer would read it."""

import re
import unicodedata
from functools import lru_cache


def normalise(text: str) -> str:
    """NFKC, case-folded, curly quotes straightened, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text).strip()


# Word edges where `_` separates words too (kosher_kitchen states "kosher").
_EDGE_BEFORE = r"(?<![^\W_])"
_EDGE_AFTER = r"(?![^\W_])"


@lru_cache(maxsize=4096)
def _pattern(form: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s\-_+]+", normalise(form)) if w]
    return re.compile(_EDGE_BEFORE + r"[\s\-_+]+".join(words) + _EDGE_AFTER)


def find_form(text: str, forms: tuple[str, ...]) -> str | None:
    """The first of `forms` that occurs in `text` as whole words (space, dash, '_', '+' interchangeable)."""
    haystack = normalise(text)
    for form in forms:
        if form.strip() and _pattern(form).search(haystack):
            return form
    return None
