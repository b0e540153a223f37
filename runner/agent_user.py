"""Run the agent under another uid (`--agent-user`), so that it cannot touch the evidence at all.

The session folder, the keys and the CA are the runner's (0700 folders, 0600 files). An agent running
as another, unprivileged user can read and write only its work folder, which is handed to it, and
cannot signal or trace the proxy. Only root can start a process as another user.
"""

import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path


class AgentUserError(ValueError):
    """The agent cannot run as the user asked for; the message says why."""


@dataclass(frozen=True)
class AgentUser:
    """The user an agent runs as."""

    name: str
    uid: int
    gid: int

    @classmethod
    def named(cls, name: str) -> "AgentUser":
        """The account `name` (or a numeric uid); AgentUserError unless we are root and it is not."""
        if os.geteuid() != 0:
            raise AgentUserError(f"--agent-user {name}: only root can run the agent as another user")
        try:
            entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        except (KeyError, ValueError):
            raise AgentUserError(f"--agent-user {name}: no such user") from None
        if entry.pw_uid == 0:
            raise AgentUserError(f"--agent-user {name}: the agent must not run as root")
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)

    @property
    def owner(self) -> tuple[int, int]:
        """(uid, gid) for chown."""
        return self.uid, self.gid

    def popen_args(self) -> dict:
        """subprocess.Popen arguments that start the child as this user, with no other groups."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def describe(self) -> dict:
        """What meta.json records of the isolation."""
        return {"level": "user", "user": self.name, "uid": self.uid}

    def check_can_run(self, program: str) -> None:
        """AgentUserError naming the folder that keeps this user from running `program`."""
        found = shutil.which(program) or program
        path = Path(os.path.realpath(found))
        for folder in reversed(path.parents):
            if not self._may(folder, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
                raise AgentUserError(f"--agent-user {self.name} cannot run {found}: it may not enter "
                                     f"{folder} (install the agent's interpreter where that user can "
                                     "read it; docs/EVIDENCE.md)")
        if not path.exists() or not self._may(path, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
            raise AgentUserError(f"--agent-user {self.name} cannot run {found}: not executable by it")

    def check_can_enter(self, folder: Path) -> None:
        """AgentUserError naming the first folder on the way to `folder` this user may not enter."""
        folder = Path(os.path.realpath(folder))
        for step in [*reversed(folder.parents), folder]:
            if not self._may(step, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
                raise AgentUserError(f"--agent-user {self.name} cannot reach its work folder: it may "
                                     f"not enter {step} (choose a --runs-dir it can reach)")

    def _may(self, path: Path, owner_bit: int, group_bit: int, other_bit: int) -> bool:
        st = path.stat()
        if st.st_uid == self.uid:
            return bool(st.st_mode & owner_bit)
        if st.st_gid == self.gid:
            return bool(st.st_mode & group_bit)
        return bool(st.st_mode & other_bit)
