"""What the agent tried to send, next to what the sites received (docs/GUARD.md).

The capture log holds what was sent: a request the guard redacted is logged as sent, one it blocked
or dropped not at all, and each `guard` record keeps the request as the agent made it. Replaying the
log with those originals put back gives the records of the agent's attempts, from which the audit
builds its actions a second time: attempted events against delivered ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.beacons import endpoints
from spillage.proxy.reading.records import write_derived
from spillage.proxy.reading.request import Reading
from spillage.proxy.reading.request import WireRequest

DERIVED = ("beacon", "form")   # records the proxy derives from a request record


def is_intervention(record: dict) -> bool:
    """A guard record of a request that was changed or not sent (not one only monitored)."""
    return record["kind"] == "guard" and record["enforced"]


class Attempts:
    """Collects the session's guard records, then replays records with the originals put back."""

    def __init__(self, session_dir):
        self.session_dir = session_dir
        self.guards: list[dict] = []
        self.beacon_urls = DEFAULT_BEACON_URLS

    def see(self, record: dict) -> None:
        """Take note of a record streaming past in the audit's first pass."""
        if record["kind"] == "session_start":
            self.beacon_urls = tuple((record.get("options") or {}).get("beacon_urls") or DEFAULT_BEACON_URLS)
        elif record["kind"] == "guard":
            self.guards.append(record)

    @property
    def changed_anything(self) -> bool:
        return any(is_intervention(g) for g in self.guards)

    def replay(self, records: Iterable[dict]) -> Iterator[dict]:
        """`records` with each request the guard changed as the agent sent it, and each it kept back
        where its guard record stands (both with the derived beacon and form records)."""
        replaced = {g["request"]: g for g in self.guards if is_intervention(g) and g["request"] is not None}
        for record in records:
            kind = record["kind"]
            if kind == "request" and record["seq"] in replaced:
                yield from self.original(replaced[record["seq"]])
            elif kind in DERIVED and record.get("request") in replaced:
                continue
            elif kind == "guard" and is_intervention(record) and record["request"] is None:
                yield from self.original(record)
            else:
                yield record

    def original(self, guard: dict) -> list[dict]:
        """The records the request of `guard` would have made had it been sent as it was, numbered
        with the guard record's seq (the record that proves the attempt)."""
        sent = guard["original"]
        made: list[dict] = []

        def write(kind: str, **fields) -> dict:
            made.append({"seq": guard["seq"], "ts": guard["ts"], "kind": kind, **fields})
            return made[-1]

        record = write("request", flow=guard["flow"], method=sent["method"], url=sent["url"],
                       http_version=sent["http_version"], headers=sent["headers"], body=sent["body"])
        reading = Reading(WireRequest.of_record(record, self.session_dir))
        write_derived(write, guard["flow"], guard["seq"], reading, sent["url"], endpoints(self.beacon_urls))
        return made

    def summary(self) -> dict:
        """What the guard did: interventions by action and observer, and what it only monitored."""
        done = [g for g in self.guards if is_intervention(g)]
        return {"interventions": len(done), "monitored": len(self.guards) - len(done),
                "by_action": dict(sorted(Counter(g["action"] for g in done).items())),
                "by_observer": dict(sorted(Counter(g["observer"] for g in done).items()))}
