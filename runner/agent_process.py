"""What both framework adapters (browser_agent, autogen_agent) do alike inside the agent process.

This module imports no framework: each adapter runs in its own virtual environment.
"""

import argparse
import os
import shutil
import sys

from spillage.runner.model_spec import MODEL_HELP

# The browser is given the proxy and the CA pin explicitly; the agent's own HTTP clients (an
# LLM endpoint) must neither go through the proxy nor trust only our CA.
NETWORK_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
                     "all_proxy", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def chromium_path() -> str:
    """Debian's Chromium (or $SPILLAGE_CHROMIUM); never a browser a tool downloads itself."""
    path = os.environ.get("SPILLAGE_CHROMIUM") or shutil.which("chromium")
    if not path:
        sys.exit("spillage: chromium not found; install Debian's package: apt-get install -y chromium")
    return path


def strip_network_variables() -> None:
    """Remove the proxy and CA variables from our environment (see NETWORK_VARIABLES)."""
    for name in NETWORK_VARIABLES:
        os.environ.pop(name, None)


def agent_arguments(prog: str, description: str, argv: list[str] | None) -> argparse.Namespace:
    """The command line every adapter takes (AgentSpec.framework_agent writes it): --model, --base-url,
    --max-steps; and, once parsed, the proxy and CA variables are gone from the environment."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    parser.add_argument("--base-url", help="endpoint for openai:/ollama: models")
    parser.add_argument("--max-steps", type=int, default=50)
    args = parser.parse_args(argv)
    strip_network_variables()
    return args
