"""Run fuzz cases through `spillage`'s entry point in one process, under a memory cap.

    python tests/fuzz_driver.py CASES.json  →  one JSON line per case on stdout

Each case is {"id", "argv", "cwd"}; its line says the status `main` returned (or the SystemExit
code of argparse), the ends of what it wrote to stdout and stderr, and how long it took. The address space is capped
(MEMORY_CAP), so an input that would be read whole into gigabytes shows up as a MemoryError
instead of swapping the machine; each case has a deadline (CASE_SECONDS). Used by
tests/test_fuzz_commands.py.
"""

import contextlib
import io
import json
import os
import resource
import signal
import sys
import time

MEMORY_CAP = 6 << 30
CASE_SECONDS = 60


class Deadline(Exception):
    """A case ran past CASE_SECONDS."""


def on_alarm(signum, frame):
    raise Deadline(f"no answer within {CASE_SECONDS} s")


def run_case(main, case: dict) -> dict:
    """Run one case; its status, stderr and seconds."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    began = time.monotonic()
    os.chdir(case["cwd"])
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(case["argv"])
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 2
    except Deadline as e:
        status = f"deadline: {e}"
    except BaseException as e:  # noqa: BLE001 - the driver reports what escaped the boundary
        status = f"escaped: {type(e).__name__}: {e}"[:500]
    finally:
        signal.alarm(0)
    out.flush()
    err.flush()
    return {"id": case["id"], "status": status, "seconds": round(time.monotonic() - began, 3),
            "stdout": out.buffer.getvalue().decode("utf-8", "replace")[-4000:],
            "stderr": err.buffer.getvalue().decode("utf-8", "replace")[-4000:]}


def main(cases_file: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    signal.signal(signal.SIGALRM, on_alarm)
    from spillage.runner.cli import main as spillage_main

    with open(cases_file, encoding="utf-8") as f:
        cases = json.load(f)
    for case in cases:
        print(json.dumps(run_case(spillage_main, case)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
