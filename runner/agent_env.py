"""The agent's work folder and environment: where the proxy is, which CA to trust, what to do.

The agent works in a folder of its own outside the session folder (proxy/layout.py). Everything it is
handed (the prompt, its copy of the scenario, the CA certificate) is copied there, so an agent running
under another uid needs nothing of the evidence side, not even to read it.
"""

import os
import shutil
import stat
import tempfile
from pathlib import Path

from spillage.proxy.layout import AGENT_CA
from spillage.proxy.layout import AGENT_HOME
from spillage.proxy.layout import AGENT_SCENARIO
from spillage.proxy.layout import PROMPT_FILE
from spillage.addons.mitm.ca import CertAuthority
from spillage.scenarios.model import Scenario


def agent_environment(base: dict, proxy_url: str, ca: CertAuthority, scenario: Scenario, work: Path,
                      scenario_text: str, prompt: str | None = None, system_note: str = "") -> dict:
    """`base` plus the proxy, the CA and the task (`prompt`, default the scenario's), under the names
    common tools look for, with the files it names written into the work folder `work`;
    SPILLAGE_SYSTEM_NOTE only when a system note is given."""
    prompt = scenario.prompt if prompt is None else prompt
    prompt_file, scenario_file, ca_file = work / PROMPT_FILE, work / AGENT_SCENARIO, work / AGENT_CA
    prompt_file.write_text(prompt, encoding="utf-8")
    scenario_file.write_text(scenario_text, encoding="utf-8")
    shutil.copyfile(ca.cert_file, ca_file)
    env = dict(base)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env[name] = proxy_url
    env.update({
        "SSL_CERT_FILE": str(ca_file),
        "REQUESTS_CA_BUNDLE": str(ca_file),
        "CURL_CA_BUNDLE": str(ca_file),
        "NODE_EXTRA_CA_CERTS": str(ca_file),
        "SPILLAGE_PROXY": proxy_url,
        "SPILLAGE_CA_FILE": str(ca_file),
        "SPILLAGE_CA_SPKI": ca.spki_pin,
        "SPILLAGE_PROMPT": prompt,
        "SPILLAGE_PROMPT_FILE": str(prompt_file),
        "SPILLAGE_START_URL": scenario.start_url,
        "SPILLAGE_SCENARIO_FILE": str(scenario_file),
        "SPILLAGE_WORK": str(work),
    })
    env.pop("SPILLAGE_SYSTEM_NOTE", None)
    env.pop("SPILLAGE_MODEL_PROXY", None)  # set by the runner only when the model goes through the proxy
    if system_note:
        env["SPILLAGE_SYSTEM_NOTE"] = system_note
    return env


def hand_over(work: Path, owner: tuple[int, int] | None) -> None:
    """Give the work folder and everything in it to the agent's uid and gid (when it runs as another)."""
    if owner is None:
        return
    for root, dirs, files in os.walk(work):
        for name in (root, *(os.path.join(root, n) for n in dirs + files)):
            os.lchown(name, *owner)


class AgentHome:
    """HOME, TMPDIR and browser-use's config folder inside the agent's work folder.

    Chromium puts a Unix socket in TMPDIR, and socket paths are limited to 108 bytes: a
    work folder nested deeply enough breaks it. With `short_tmp`, TMPDIR is therefore a short
    symlink in the system temp folder pointing into the work folder; the files land there, and
    the link is removed when the agent is done. In a sandbox, whose /tmp is its own, TMPDIR is
    /tmp. The Unix sockets Chromium leaves behind in the work folder are removed when the agent is
    done (they would break copying the folder); a link the agent left there is not followed.
    """

    def __init__(self, work: Path, short_tmp: bool = True):
        self.home = work / AGENT_HOME
        self.short_tmp = short_tmp
        self.link: Path | None = None

    def __enter__(self) -> dict:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.short_tmp:
            tmp = self.home / "tmp"
            tmp.mkdir(exist_ok=True)
            self.link = Path(tempfile.mkdtemp(prefix="spl-"))
            self.link.rmdir()
            self.link.symlink_to(tmp, target_is_directory=True)
        return {
            "HOME": str(self.home),
            "TMPDIR": str(self.link) if self.link else "/tmp",
            "BROWSER_USE_CONFIG_DIR": str(self.home / "browseruse"),
            "ANONYMIZED_TELEMETRY": "false",
            "BROWSER_USE_CLOUD_SYNC": "false",
            "BROWSER_USE_VERSION_CHECK": "false",
            "BROWSER_USE_DISABLE_EXTENSIONS": "1",
            "SKIP_LLM_API_KEY_VERIFICATION": "true",
        }

    def __exit__(self, *exc) -> None:
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        # Chromium's singleton sockets outlive it; walked without following a link the agent left
        for _, _, names, folder in os.fwalk(self.home, follow_symlinks=False):
            for name in names:
                if stat.S_ISSOCK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=folder)
