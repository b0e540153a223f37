"""The mitmdump script: `mitmdump -s addons/bundle.py`.

Order matters: the egress policy refuses first, capture records what the client sent (before any
rewrite), the resolver then routes `*.test` to the origin server, and the connection guard refuses
any server connection that is not to the origin or a model endpoint, whatever asked for it.
"""

from spillage.addons.capture import Capture
from spillage.addons.egress import EgressPolicy
from spillage.addons.guard import ConnectionGuard
from spillage.addons.ready import Ready
from spillage.addons.resolver import LoopbackResolver

addons = [EgressPolicy(), Capture(), LoopbackResolver(), ConnectionGuard(), Ready()]
