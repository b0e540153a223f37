"""Run no more of mitmproxy than a capture proxy uses.

mitmdump loads some 35 built-in addons, and mitmproxy asks every one of them about every event of every
flow: that asking was a quarter of the proxy's CPU. Most of them serve features this proxy never turns
on: replay, rewriting requests and responses (map_local, map_remote, modify_body, modify_headers),
sticky cookies and auth, upstream auth, saving flows and HAR files, printing flows (flow_detail is 0),
commands for the console. Each does nothing unless its option is set, and none of those options is set
here; taken out of the chain, they cost nothing and no option or config.yaml can turn them on to change
what passes between the agent and the sites. What the proxy relies on stays: the proxy server, its
layers and TLS, client blocking, proxy auth, h2c and DNS handling, the onboarding app, logging, scripts.
"""

import logging

from mitmproxy import ctx

#: Built-in addons (by name, as mitmproxy registers them) that act only when an option this proxy never
#: sets is set. A name this mitmproxy does not have is skipped.
UNUSED = ("browser", "blocklist", "anticache", "anticomp", "commandhistory", "comment", "cut", "export",
          "serverplayback", "mapremote", "maplocal", "modifybody", "modifyheaders", "stickyauth", "stickycookie",
          "save", "savehar", "upstreamauth", "dumper", "keepserving", "readfilestdin")

logger = logging.getLogger(__name__)


class LeanChain:
    """At `running`, take the UNUSED built-ins out of mitmproxy's addon chain (their `done` runs then)."""

    def running(self):
        addons = ctx.master.addons
        for name in UNUSED:
            addon = addons.get(name)
            if addon is not None:
                addons.remove(addon)
        logger.debug(f"spillage: {len(addons.chain)} addons in the chain")
