"""A session folder opened once: its log verified, its meta.json, scenario and catalog read when first
asked for, and its lines read once when kept. The audit, the timeline and the proofs are handed this
value, so that no stage opens the folder again or verifies its log twice."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from functools import cached_property
from pathlib import Path

from spillage.audit.session_catalog import CatalogError
from spillage.audit.session_catalog import SessionCatalog
from spillage.audit.session_catalog import session_catalog
from spillage.proxy.capturelog import CaptureError
from spillage.proxy.capturelog import Line
from spillage.proxy.capturelog import iter_records
from spillage.proxy.layout import LOG_NAME
from spillage.proxy.layout import SCENARIO_COPY
from spillage.proxy.layout import capture_path
from spillage.proxy.layout import file_sha256
from spillage.proxy.layout import read_meta
from spillage.proxy.verify import VerifyResult
from spillage.proxy.verify import verify
from spillage.scenarios.dump import scenario_yaml
from spillage.scenarios.loader import ScenarioError
from spillage.scenarios.loader import load_scenario
from spillage.scenarios.model import Scenario


class AuditError(RuntimeError):
    """The session cannot be audited (no log, unverified log, no scenario, a malformed record);
    `status` is the command's exit status: 1 when the evidence does not verify, else 2 (bad input)."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


@dataclass
class OpenSession:
    """One session folder and what was read of it: the verification of its log (`check`), and, read on
    first use, its meta.json, its scenario (the one given, else its copy) and the catalog its sites
    served (the file given, else as audit/session_catalog.py finds it in the store of `home`). With
    `keep_lines`, the log's lines are read once and every later `lines()` replays them."""

    folder: Path
    check: VerifyResult
    given_scenario: Scenario | None = None
    given_catalog: Path | None = None
    home: Path | None = None
    keep_lines: bool = False
    _kept: tuple[list[Line], CaptureError | None] | None = field(default=None, init=False, repr=False)

    @cached_property
    def meta(self) -> dict | None:
        """meta.json, None when there is none; ValueError naming the file when it is not a JSON object."""
        return read_meta(self.folder)

    @cached_property
    def scenario(self) -> Scenario:
        """The scenario given, else the session's copy; AuditError when that is missing or broken."""
        return self.given_scenario or session_scenario(self.folder)

    @cached_property
    def scenario_sha256(self) -> str:
        """The SHA-256 of the scenario audited: of the session's copy as it lies in the folder (which the
        certificate binds), or of the YAML of the scenario given."""
        if self.given_scenario is not None:
            return hashlib.sha256(scenario_yaml(self.given_scenario).encode("utf-8")).hexdigest()
        self.scenario   # a missing or broken copy is said first
        return file_sha256(self.folder / SCENARIO_COPY)

    @cached_property
    def catalog(self) -> SessionCatalog:
        """The catalog the session's sites served; AuditError when it cannot be known."""
        try:
            return session_catalog(self.folder, self.scenario, self.given_catalog, self.home, meta_of=lambda _: self.meta)
        except CatalogError as e:
            raise AuditError(str(e)) from None

    def lines(self) -> Iterator[Line]:
        """The log's lines in order, raising CaptureError at the first that holds no record: read as a
        stream, or, with `keep_lines`, read on the first call and replayed on the others."""
        if not self.keep_lines:
            yield from iter_records(self.folder)
            return
        if self._kept is None:
            self._kept = read_lines(self.folder)
        kept, error = self._kept
        yield from kept
        if error is not None:
            raise error


def session_scenario(session_dir: Path) -> Scenario:
    """The scenario copy a session keeps; AuditError when it is missing or broken."""
    copy = session_dir / SCENARIO_COPY
    if not copy.exists():
        raise AuditError(f"{copy}: no scenario; pass --scenario")
    try:
        return load_scenario(copy)
    except ScenarioError as e:
        raise AuditError(str(e)) from e


def read_lines(folder: Path) -> tuple[list[Line], CaptureError | None]:
    """The log's lines up to the first that holds no record, and the CaptureError of that one (None when
    every line is a record)."""
    lines = []
    try:
        for line in iter_records(folder):
            lines.append(line)
    except CaptureError as e:
        return lines, e
    return lines, None


def open_session(folder: Path, scenario: Scenario | None = None, catalog: Path | None = None,
                 home: Path | None = None, keep_lines: bool = False) -> OpenSession:
    """Open the session folder `folder`: verify its log, once. AuditError when it holds no log."""
    folder = Path(folder)
    if not capture_path(folder).is_file():
        raise AuditError(f"{folder}: no {LOG_NAME} here; is this a session folder?")
    return OpenSession(folder, verify(folder), scenario, catalog, home, keep_lines)
