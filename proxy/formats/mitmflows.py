"""mitmproxy flow files in and out, through mitmproxy's own FlowReader and FlowWriter.

HTTP flows become exchanges (a body mitmproxy did not keep, `raw_content` None, is unknown);
TCP, UDP and DNS flows are noted as traffic that is not HTTP. Written files open in
`mitmproxy -r`, `mitmweb -r` and `mitmdump -nr`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from mitmproxy import connection
from mitmproxy import exceptions
from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy import io

from spillage.proxy.refusal import EGRESS_KEY
from spillage.proxy.formats.exchange import REQUEST
from spillage.proxy.formats.exchange import RESPONSE
from spillage.proxy.formats.exchange import Exchange
from spillage.proxy.formats.exchange import FormatError
from spillage.proxy.formats.exchange import Opaque
from spillage.proxy.formats.exchange import Overclaim
from spillage.proxy.formats.exchange import SizedReader


def read_flows(path: Path) -> Iterator[Exchange | Opaque]:
    """The flows of a mitmproxy file, in file order; FormatError names the flow and byte at fault."""
    with open(path, "rb") as f:
        n = 0
        try:
            for flow in io.FlowReader(SizedReader(f, os.fstat(f.fileno()).st_size)).stream():
                n += 1
                yield flow_item(flow)
        except exceptions.FlowReadException as e:
            raise FormatError(f"flow {n + 1} (byte {f.tell()})",
                              f"a mitmproxy flow ({' '.join(str(e).split())})") from None
        except Overclaim as e:
            raise FormatError(f"flow {n + 1} (byte {f.tell()})", f"a length the file holds; it claims {e}") from None
        except RecursionError:
            raise FormatError(f"flow {n + 1}", "a mitmproxy flow nested no deeper than Python reads") from None


def flow_item(flow: mflow.Flow) -> Exchange | Opaque:
    """An HTTP flow as an Exchange; any other flow as a note of traffic that is not HTTP."""
    if not isinstance(flow, http.HTTPFlow):
        return Opaque(flow.id, f"{flow.type} flow in the mitmproxy file: not HTTP, not decoded")
    unknown = tuple(which for which, message in ((REQUEST, flow.request), (RESPONSE, flow.response))
                    if message is not None and message.raw_content is None)
    return Exchange(flow.id, flow.request, flow.response, flow.error.msg if flow.error else None, unknown)


def write_flows(exchanges: Iterable[Exchange], out: BinaryIO) -> int:
    """Write `exchanges` as mitmproxy HTTP flows to `out`; the number of flows."""
    writer = io.FlowWriter(out)
    n = 0
    for x in exchanges:
        writer.add(exchange_flow(x))
        n += 1
    return n


def exchange_flow(x: Exchange) -> http.HTTPFlow:
    """The HTTPFlow of an exchange; a refusal carries the egress mark the live proxy set."""
    start = x.request.timestamp_start
    client = connection.Client(peername=("127.0.0.1", 0), sockname=("127.0.0.1", 0), timestamp_start=start)
    server = connection.Server(address=(x.request.host, x.request.port))
    flow = http.HTTPFlow(client, server)
    flow.id = x.flow
    flow.request = x.request
    if REQUEST in x.unknown_bodies:
        flow.request.raw_content = None
    flow.response = x.response
    if x.response is not None and RESPONSE in x.unknown_bodies:
        flow.response.raw_content = None
    if x.error:
        flow.error = mflow.Error(x.error, timestamp=start)
    if refusal := x.refusal():
        flow.metadata[EGRESS_KEY] = refusal
    return flow
