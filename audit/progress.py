"""Progress of long work: a rich bar on a terminal, one plain line per finished unit elsewhere."""

import sys
import time


class ProgressBar:
    """Progress of `total` steps of `what`, counted in `unit`, on `stream` (stderr as it is when made).

    On a terminal (when `terminal`): a rich bar redrawn in place, `spillage: audit ━━━━━━ 12/40 sessions
    0:00:03 ETA 0:00:06 note`. On anything else (a log file, CI), when `lines` (asked for with
    --progress): one plain line per step, `spillage: audit [12/40 sessions] note; 3 s, ETA 6 s`.
    Otherwise nothing. Use it in a `with` block, which ends the bar (and gives the cursor back)."""

    def __init__(self, total: int, stream=None, what: str = "audit", unit: str = "sessions",
                 terminal: bool = True, lines: bool = False):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.what, self.unit = what, unit
        self.began = time.monotonic()
        on_terminal = self.stream.isatty()
        self.lines = lines and not on_terminal
        self.bar = rich_bar(self.stream, what, unit) if terminal and on_terminal and total else None
        self.task = self.bar.add_task(what, total=total, note="") if self.bar else None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar:
            self.bar.stop()

    def eta(self) -> float:
        """Seconds left at the pace so far."""
        return (time.monotonic() - self.began) / max(self.done, 1) * (self.total - self.done)

    def step(self, note: str = "") -> None:
        self.done += 1
        if self.bar:
            self.bar.update(self.task, advance=1, note=note)
        elif self.lines:
            print(f"spillage: {self.what} [{self.done}/{self.total} {self.unit}]{f' {note}' if note else ''}; "
                  f"{time.monotonic() - self.began:.0f} s, ETA {self.eta():.0f} s", file=self.stream, flush=True)


def rich_bar(stream, what: str, unit: str):
    """A started rich Progress on `stream` with the columns of ProgressBar. It leaves sys.stdout and
    sys.stderr alone: worker processes forked meanwhile must not inherit rich's locks through them."""
    # Imported here: only a terminal needs rich.
    from rich.console import Console
    from rich.progress import BarColumn
    from rich.progress import MofNCompleteColumn
    from rich.progress import Progress
    from rich.progress import TextColumn
    from rich.progress import TimeElapsedColumn
    from rich.progress import TimeRemainingColumn

    bar = Progress(TextColumn(f"spillage: {what}", markup=False), BarColumn(), MofNCompleteColumn(),
                   TextColumn(unit, markup=False), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   TextColumn("{task.fields[note]}", markup=False),  # a note is captured text, never markup
                   console=Console(file=stream), redirect_stdout=False, redirect_stderr=False)
    bar.start()
    return bar
