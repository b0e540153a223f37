"""BERT's uncased WordPiece tokenizer, as all-MiniLM-L6-v2's tokenizer.json configures it.

Normalise (drop control characters, whitespace to spaces, spaces around CJK ideographs, lower
case, strip accents), split at whitespace and around every punctuation character, then cut each
word greedily into the longest pieces found in vocab.txt, continuations prefixed with `##`; a
word that cannot be cut (or is over 100 characters) is `[UNK]`. A special token written in the
text ("[SEP]") is that token, as in tokenizers. Ids are wrapped in [CLS] … [SEP] and truncated to
`max_length` in all.

    tok = WordPiece.from_file(model_dir / "vocab.txt")
    tok.tokenize("Héllo, world!")   # ['hello', ',', 'world', '!']
    tok.encode("Héllo, world!")     # [101, 7592, 1010, 2088, 999, 102]
"""

import re
import unicodedata
from pathlib import Path

MAX_WORD_CHARS = 100  # tokenizer.json: model.max_input_chars_per_word
CONTROL = ("Cc", "Cf", "Co", "Cs")  # dropped; unassigned code points (Cn) are kept, as tokenizers does
SPECIAL = re.compile(r"(\[(?:PAD|UNK|CLS|SEP|MASK)\])")  # tokenizer.json's added tokens, taken verbatim


def _is_punctuation(ch: str) -> bool:
    """BERT's rule: ASCII symbols count as punctuation ($, ^, `, ...), as does any Unicode P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def normalize(text: str) -> str:
    """BertNormalizer, in its order: drop control characters, whitespace to spaces, pad CJK
    ideographs, strip accents (NFD, then no nonspacing marks), lower case."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or (ch not in "\t\n\r" and unicodedata.category(ch) in CONTROL):
            continue
        if ch.isspace():
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFD", "".join(out))
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn").lower()


def pre_tokenize(text: str) -> list[str]:
    """BertPreTokenizer: words split at whitespace, each punctuation character a word of its own."""
    words = []
    for chunk in text.split():
        word = ""
        for ch in chunk:
            if _is_punctuation(ch):
                if word:
                    words.append(word)
                words.append(ch)
                word = ""
            else:
                word += ch
        if word:
            words.append(word)
    return words


class WordPiece:
    """The tokenizer over one vocabulary (token → id, in vocab.txt's line order)."""

    def __init__(self, vocab: dict[str, int], max_length: int = 256):
        self.vocab = vocab
        self.max_length = max_length
        self.unk, self.cls, self.sep = vocab["[UNK]"], vocab["[CLS]"], vocab["[SEP]"]

    @classmethod
    def from_file(cls, path: Path, max_length: int = 256) -> "WordPiece":
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls({token: i for i, token in enumerate(lines)}, max_length)

    def word_pieces(self, word: str) -> list[str]:
        """Greedy longest-match-first pieces of one word, or ["[UNK]"]."""
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of `text` (a special token written in it stays one), untruncated."""
        pieces = []
        for i, part in enumerate(SPECIAL.split(text)):
            pieces += [part] if i % 2 else [p for w in pre_tokenize(normalize(part)) for p in self.word_pieces(w)]
        return pieces

    def encode(self, text: str) -> list[int]:
        """[CLS] + the ids of `text`'s pieces, truncated so that all fit in max_length, + [SEP]."""
        ids = [self.vocab.get(p, self.unk) for p in self.tokenize(text)]
        return [self.cls, *ids[:self.max_length - 2], self.sep]
