"""The mitmdump script: `mitmdump -s addons/bundle.py` (`addons/guarded.py` with the leak guard).

Order matters: the egress policy refuses first, the leak guard (when on) then redacts or answers
what would reveal a guarded attribute (docs/GUARD.md), capture records what is sent and what the
guard did (before the resolver's rewrite), the resolver then routes `*.test` to the origin server,
and the connection guard refuses any server connection that is not to the origin, a model
endpoint or a live host, whatever asked for it; the name guard lets only a live host's, a model
endpoint's or the origin's name be looked up. Without a guard the leak guard is not loaded at all: mitmproxy
asks every addon about every event, so each one costs on every request; for the same reason the
built-in addons a capture proxy never uses leave the chain once it runs (addons/lean.py), and then
the heap that lives as long as the proxy is frozen out of garbage collection (addons/heap.py).
mitmproxy's log may not end the proxy when the runner reading it is gone (addons/output.py).
The proxy holds the session key and the CA key: it is made undumpable as the script loads, before it
reads the session key, so no process of its uid can read its memory (proxy/undumpable.py).
"""

from spillage.addons.capture import Capture
from spillage.addons.egress import EgressPolicy
from spillage.addons.connection_guard import ConnectionGuard
from spillage.addons.heap import FrozenStartupHeap
from spillage.addons.lean import LeanChain
from spillage.addons.names import NameGuard
from spillage.addons.output import SurvivingOutput
from spillage.addons.ready import Ready
from spillage.addons.resolver import LoopbackResolver
from spillage.proxy.undumpable import forbid_dumps

forbid_dumps()


def chain(guarded: bool) -> list:
    """Our addons in their order; the leak guard between the egress policy and capture when `guarded`."""
    process = [SurvivingOutput(), Ready(), LeanChain(), FrozenStartupHeap()]
    if not guarded:
        return [EgressPolicy(), Capture(), LoopbackResolver(), ConnectionGuard(), NameGuard(), *process]
    from spillage.addons.leakguard import LeakGuard   # the policy, the scenario model, YAML: only when on

    return [EgressPolicy(), LeakGuard(), Capture(), LoopbackResolver(), ConnectionGuard(), NameGuard(), *process]


addons = chain(guarded=False)
