"""The mitmdump script: `mitmdump -s addons/bundle.py`.

Order matters: the egress policy refuses first, the leak guard then redacts or answers what would
reveal a guarded attribute (docs/GUARD.md), capture records what is sent and what the guard did
(before the resolver's rewrite), the resolver then routes `*.test` to the origin server, and the
connection guard refuses any server connection that is not to the origin or a model endpoint,
whatever asked for it.
"""

from spillage.addons.capture import Capture
from spillage.addons.egress import EgressPolicy
from spillage.addons.guard import ConnectionGuard
from spillage.addons.leakguard import LeakGuard
from spillage.addons.ready import Ready
from spillage.addons.resolver import LoopbackResolver

addons = [EgressPolicy(), LeakGuard(), Capture(), LoopbackResolver(), ConnectionGuard(), Ready()]
