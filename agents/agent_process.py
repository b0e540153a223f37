"""What both framework adapters (browser_agent, autogen_agent) do alike inside the agent process.

This module imports no framework: each adapter runs in its own virtual environment.
"""

import argparse
import atexit
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from spillage.proxy.layout import AGENT_OUTCOME
from spillage.proxy.settings import MAX_STEPS
from spillage.agents.model_spec import MODEL_HELP

#: Why an agent stopped. Only `finished` and `step limit` are results; the others are failures.
STOPPED = ("finished", "step limit", "model error", "browser error", "error")
MODEL_ERRORS = ("APIConnectionError", "APITimeoutError", "AuthenticationError", "PermissionDeniedError",
                "NotFoundError", "RateLimitError", "APIStatusError", "InternalServerError", "BadRequestError",
                "ModelError", "ModelProviderError", "ModelRateLimitError", "ConnectError", "ConnectTimeout",
                "ReadTimeout", "ResponseError")

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
    parser.add_argument(MAX_STEPS.flag, type=int, default=MAX_STEPS.default)
    args = parser.parse_args(argv)
    strip_network_variables()
    return args


def report_outcome(stopped: str, detail: str = "", steps: int | None = None) -> int:
    """Say why the agent stopped: one line on stdout, and `outcome.json` in the work folder for the
    runner (docs/AGENTS.md); the adapter's exit code, 0 when it finished, 3 otherwise."""
    if stopped not in STOPPED:
        raise ValueError(f"unknown outcome {stopped!r}")
    outcome = {"stopped": stopped, "detail": " ".join(str(detail).split())[:500], "steps": steps}
    work = os.environ.get("SPILLAGE_WORK")
    if work:
        (Path(work) / AGENT_OUTCOME).write_text(json.dumps(outcome) + "\n", encoding="utf-8")
    print(f"spillage agent: {stopped}" + (f": {outcome['detail']}" if outcome["detail"] else ""), flush=True)
    return 0 if stopped == "finished" else 3


def exit_at_once(code: int) -> None:
    """End the adapter's process with `code` once it has finished: exit handlers run and output is
    flushed, but the interpreter is not torn down object by object, which after a framework's run
    takes about half a second of the agent's time and does nothing anyone sees."""
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def caused_by(error: BaseException | None, kind: type) -> bool:
    """Whether `error` or any of its causes is a `kind` (Playwright's Error: the browser failed)."""
    while error is not None:
        if isinstance(error, kind):
            return True
        error = error.__cause__ or error.__context__
    return False


def is_model_error(error: BaseException) -> bool:
    """Whether `error` came from the model endpoint (a client library's connection, status or
    provider error), by its class or any of its causes' classes."""
    while error is not None:
        if {c.__name__ for c in type(error).__mro__} & set(MODEL_ERRORS):
            return True
        error = error.__cause__ or error.__context__
    return False
