"""The options our addons add to mitmproxy's, declared once: each addon's `load` adds its own from here
(`declare`), and the mitmdump command line sets them by these names (addons/mitm/launcher.py,
runner/stack.py's guard options). tests/test_settings.py loads the addons and checks the two agree.

Imports no mitmproxy: the runner reads the names without loading the proxy.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from spillage.addons.guard_policy import MODES
from spillage.proxy.beacons import DEFAULT_BEACON_URLS
from spillage.proxy.capturelog import DEFAULT_CHECKPOINT_EVERY
from spillage.proxy.capturelog import DEFAULT_INLINE_LIMIT


@dataclass(frozen=True)
class Option:
    """One mitmproxy option: what `loader.add_option` takes."""

    name: str
    typespec: object
    default: object
    help: str

    def set(self, value) -> list[str]:
        """mitmdump's arguments that set this option to `value`."""
        return ["--set", f"{self.name}={value}"]


def declare(loader, *options: Option) -> None:
    """Add `options` to mitmproxy's, in an addon's `load`."""
    for option in options:
        loader.add_option(option.name, option.typespec, option.default, option.help)


# The resolver (addons/resolver.py)
ORIGIN = Option("spillage_origin", str, "",
                "HOST:PORT of the loopback origin server that serves every *.test host.")
# Capture (addons/capture.py)
SESSION = Option("spillage_session", str, "",
                 "Session folder to write the capture log into (capture.jsonl, blobs/).")
INLINE_LIMIT = Option("spillage_inline_limit", int, DEFAULT_INLINE_LIMIT,
                      "Bodies up to this many bytes are stored inline; larger ones go to blobs/.")
BEACON_URLS = Option("spillage_beacon_urls", Sequence[str], list(DEFAULT_BEACON_URLS),
                     "host/path of event endpoints whose requests are also recorded as beacons: the "
                     "third-party tracker's and the shops' own first-party event logs.")
SIGNER_FD = Option("spillage_signer_fd", int, -1,
                   "File descriptor of a pipe holding the session key and its certificate; the log is signed "
                   "with it (-1: an unsigned log).")
CHECKPOINT_EVERY = Option("spillage_checkpoint_every", int, DEFAULT_CHECKPOINT_EVERY,
                          "Records between signed checkpoints (one is also written each second records arrive).")
# The egress policy (addons/egress.py)
MODEL_HOSTS = Option("spillage_model_hosts", Sequence[str], [],
                     "HOST:PORT of model endpoints the agent reaches through this proxy; they are let through "
                     "(and captured) so the model provider shows as an observer of its own.")
LIVE = Option("spillage_live", Sequence[str], [],
              "Live hosts (NAME, *.NAME, with :PORT or on 443 and 80) whose requests reach the real site, "
              "captured; every other outside host stays refused (docs/EVIDENCE.md, Live sites).")
# The name guard (addons/names.py)
LIVE_MAP = Option("spillage_live_map", str, "",
                  "Tests only (refused outside pytest): a JSON file of the fake internet, names to loopback "
                  "addresses in place of DNS and the CA of its servers (proxy/live.py: FakeInternet).")
# The leak guard (addons/leakguard.py)
GUARD = Option("spillage_guard", str, "off", f"what the guard does: {', '.join(MODES)}")
GUARD_POLICY = Option("spillage_guard_policy", str, "", "a guard policy file (docs/GUARD.md)")
GUARD_SCENARIO = Option("spillage_guard_scenario", str, "",
                        "scenario file whose irrelevant attributes are guarded (when the policy names none)")
GUARD_CATALOG = Option("spillage_guard_catalog", str, "", "catalog file of the sites the agent uses")

GUARD_OPTIONS = (GUARD, GUARD_POLICY, GUARD_SCENARIO, GUARD_CATALOG)

OPTIONS = (ORIGIN, SESSION, INLINE_LIMIT, BEACON_URLS, SIGNER_FD, CHECKPOINT_EVERY, MODEL_HOSTS, LIVE, LIVE_MAP,
           *GUARD_OPTIONS)
