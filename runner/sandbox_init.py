"""The sandbox's first process (runner/sandbox.py): it relays the agent's network, starts the agent and
stops it when the runner says so.

    python -m spillage.runner.sandbox_init --control FD [--relay HOST:PORT=SOCKET ...] [--user UID:GID] -- ARGV

It listens on each relayed HOST:PORT before the agent starts, then runs ARGV in a session of its own
(as UID:GID when given) and exits with its status, which ends the sandbox: every process the agent
left behind dies with it. On FD, a socket to the runner, it writes `started` or `failed WHY`, and
`exited N` when the agent has ended (the runner then ends the sandbox's pid namespace, whatever the
agent's children did to its first process); when the runner closes its end, the agent's process group
gets SIGTERM, and SIGKILL after STOP_SECONDS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

from spillage.proxy.undumpable import forbid_dumps
from spillage.runner.relay import relay
from spillage.runner.relay import to_unix

STOP_SECONDS = 10


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sandbox_init")
    parser.add_argument("--control", type=int, required=True)
    parser.add_argument("--relay", action="append", default=[], metavar="HOST:PORT=SOCKET")
    parser.add_argument("--user", metavar="UID:GID")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return args


async def supervise(args: argparse.Namespace, control: socket.socket) -> int:
    """Relay, run the agent, stop it when the runner closes `control`; the agent's exit status."""
    for spec in args.relay:
        address, _, path = spec.partition("=")
        host, _, port = address.rpartition(":")
        await asyncio.start_server(lambda r, w, p=Path(path): relay(r, w, to_unix(p)), host, int(port))
    user = {}
    if args.user:
        uid, gid = map(int, args.user.split(":"))
        user = {"user": uid, "group": gid, "extra_groups": []}
    try:
        agent = await asyncio.create_subprocess_exec(*args.argv, start_new_session=True, **user)
    except OSError as e:
        control.sendall(f"failed {args.argv[0]}: {e.strerror or e}\n".encode())
        return 127
    control.sendall(b"started\n")
    loop = asyncio.get_running_loop()
    loop.add_reader(control.fileno(), stop_when_closed, control, agent.pid, loop)
    status = await agent.wait()
    status = status if status >= 0 else 128 - status
    try:
        control.sendall(f"exited {status}\n".encode())
    except OSError:   # the runner is gone: the sandbox dies with it
        pass
    return status


def stop_when_closed(control: socket.socket, pid: int, loop: asyncio.AbstractEventLoop) -> None:
    """The runner closed its end: SIGTERM the agent's group now, SIGKILL it after STOP_SECONDS."""
    if control.recv(64):
        return
    loop.remove_reader(control.fileno())
    signal_group(pid, signal.SIGTERM)
    loop.call_later(STOP_SECONDS, signal_group, pid, signal.SIGKILL)


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    forbid_dumps()   # the agent shares our uid: it may not open our /proc/PID/fd
    args = parse(sys.argv[1:] if argv is None else argv)
    control = socket.socket(fileno=args.control)
    control.set_inheritable(False)
    return asyncio.run(supervise(args, control))


if __name__ == "__main__":
    sys.exit(main())
