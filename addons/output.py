"""The proxy's output outlives its reader.

The proxy's stdout is a pipe only the runner reads: the signed checkpoints it reports, and mitmproxy's
log. When the runner dies the pipe breaks, and mitmproxy's terminal log exits the process at the first
line it cannot print (`sys.exit(1)` in mitmproxy/addons/termlog.py), from wherever that line is logged:
often before the capture addon has sealed the log on the SIGTERM the kernel sends at the same moment
(runner/children.py). Here the terminal log drops what it cannot write instead, so the proxy shuts down
on that SIGTERM as it always does, and seals (tests/test_crash.py kills the runner under load).
"""

from typing import IO

from mitmproxy import ctx


class DroppingWrites:
    """A text stream that drops what cannot be written (its reader is gone) instead of raising."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class SurvivingOutput:
    """At `load`, before any connection: mitmproxy's terminal log writes through DroppingWrites."""

    def load(self, loader):
        termlog = ctx.master.addons.get("termlog")
        if termlog is not None:
            termlog.logger.file = DroppingWrites(termlog.logger.file)
