"""The environment every agent runs in: where the proxy is, which CA to trust, what to do."""

import tempfile
from pathlib import Path

from spillage.proxy.ca import CertAuthority
from spillage.scenarios.model import Scenario

PROMPT_FILE = "prompt.txt"


def agent_environment(base: dict, proxy_url: str, ca: CertAuthority, scenario: Scenario,
                      session_dir: Path, scenario_file: Path, prompt: str | None = None,
                      system_note: str = "") -> dict:
    """`base` plus the proxy, the CA and the task (`prompt`, default the scenario's), under the names
    common tools look for; SPILLAGE_SYSTEM_NOTE only when a system note is given."""
    prompt = scenario.prompt if prompt is None else prompt
    prompt_file = session_dir / PROMPT_FILE
    prompt_file.write_text(prompt, encoding="utf-8")
    env = dict(base)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env[name] = proxy_url
    env.update({
        "SSL_CERT_FILE": str(ca.cert_file),
        "REQUESTS_CA_BUNDLE": str(ca.cert_file),
        "CURL_CA_BUNDLE": str(ca.cert_file),
        "NODE_EXTRA_CA_CERTS": str(ca.cert_file),
        "SPILLAGE_PROXY": proxy_url,
        "SPILLAGE_CA_FILE": str(ca.cert_file),
        "SPILLAGE_CA_SPKI": ca.spki_pin,
        "SPILLAGE_PROMPT": prompt,
        "SPILLAGE_PROMPT_FILE": str(prompt_file),
        "SPILLAGE_START_URL": scenario.start_url,
        "SPILLAGE_SCENARIO_FILE": str(scenario_file),
    })
    env.pop("SPILLAGE_SYSTEM_NOTE", None)
    env.pop("SPILLAGE_MODEL_PROXY", None)  # set by the runner only when the model goes through the proxy
    if system_note:
        env["SPILLAGE_SYSTEM_NOTE"] = system_note
    return env


class AgentHome:
    """HOME, TMPDIR and browser-use's config folder inside the session folder.

    Chromium puts a Unix socket in TMPDIR, and socket paths are limited to 108 bytes: a
    session folder nested deeply enough breaks it. TMPDIR is therefore a short symlink in
    the system temp folder pointing into the session; the files land in the session, and
    the link is removed when the agent is done, as are the Unix sockets Chromium leaves
    behind (they would break copying the session folder).
    """

    def __init__(self, session_dir: Path):
        self.home = session_dir / "agent-home"
        self.link: Path | None = None

    def __enter__(self) -> dict:
        tmp = self.home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        self.link = Path(tempfile.mkdtemp(prefix="spl-"))
        self.link.rmdir()
        self.link.symlink_to(tmp, target_is_directory=True)
        return {
            "HOME": str(self.home),
            "TMPDIR": str(self.link),
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
        for path in self.home.rglob("*"):  # Chromium's singleton sockets outlive it
            if path.is_socket():
                path.unlink()
