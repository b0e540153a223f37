"""The mitmdump script: `mitmdump -s addons/bundle.py`.

Order matters: the egress policy refuses first, capture records what the client sent
(before any rewrite), the resolver then routes `*.test` to the origin server.
"""

from spillage.addons.capture import Capture
from spillage.addons.egress import EgressPolicy
from spillage.addons.ready import Ready
from spillage.addons.resolver import LoopbackResolver

addons = [EgressPolicy(), Capture(), LoopbackResolver(), Ready()]
