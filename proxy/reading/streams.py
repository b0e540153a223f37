"""Short texts sent one after another to the same place, read as one text, as an observer that logs
them would: one character per autocomplete request (`p`, `r`, `e`, …), one letter per click label.

    streams = Streams()
    runs = streams.add(("shop.test", "/suggest", "query:q"), "p")   # []; then ["pr"], ["pre", "re"], ...

A value longer than SHORT ends the run at its place, and a value that extends the last one (typing
`p`, `pr`, `pre`) replaces it: that is one value being typed, not a text sent piecemeal.
"""

from __future__ import annotations

from spillage.proxy.reading.request import Piece
from spillage.proxy.reading.request import Reading

SHORT = 3          # characters of a value that may be one piece of a text sent piecemeal
LONGEST = 24       # values a run keeps (the latest)


class Streams:
    """Runs of short values per place (observer, endpoint, field), across the requests of a session."""

    def __init__(self, runs: dict[tuple, tuple[str, ...]] | None = None) -> None:
        self.runs: dict[tuple, tuple[str, ...]] = dict(runs or {})

    def fork(self) -> "Streams":
        """A copy to read one request with, leaving these runs as they are until it is sent."""
        return Streams(self.runs)

    def feed(self, reading: Reading, value) -> list[Piece]:
        """Take every value of a request (its query and body values that `value(piece)` accepts, each
        once, as its receiver logs it: the first decoding); the runs they continue, as pieces at
        `stream:<place>`."""
        out, seen = [], set()
        host, path = reading.host, reading.path
        for piece in reading.pieces:
            if piece.where in seen or not piece.where.startswith(("query:", "body:")) or not value(piece):
                continue
            seen.add(piece.where)
            out += [Piece(run, f"stream:{piece.where}", ("joined",), run)
                    for run in self.add((host, path, piece.where), piece.text)]
        return out

    def add(self, place: tuple, value: str) -> list[str]:
        """Take the next value sent to `place`; the texts it ends with the short ones before it: the
        run from each of the values it holds (whatever came first, `x` then `k`, `o`, `s`, ... still
        reads `kosher`), none when there was no short value before it."""
        value = value.strip()
        if not value or len(value) > SHORT:
            self.runs.pop(place, None)
            return []
        before = self.runs.get(place, ())
        if before and before[-1] == value and len(value) > 1:
            return []   # the same value again (a retry, an echo)
        if before and len(value) > len(before[-1]) and value.startswith(before[-1]):
            before = before[:-1]   # the last value, growing as it is typed: one value
        run = (*before, value)[-LONGEST:]
        self.runs[place] = run
        return ["".join(run[i:]) for i in range(len(run) - 1)]
