"""The experimental conditions of a run (paper §5.4): which prompt the agent gets, a system note, and
the guard on the wire (docs/GUARD.md)."""

import hashlib
from dataclasses import dataclass

from spillage.scenarios.model import Scenario

PROMPTS = ("original", "sanitized")


@dataclass(frozen=True)
class Condition:
    """`prompt`: the scenario's persona-rich prompt or its `sanitized_prompt` (irrelevant details
    removed); `system_note`: text added to the agent's system prompt (a prompt-level mitigation);
    `guard`: what the proxy does with what would reveal an irrelevant attribute (off, monitor,
    redact, block), by the rules of `guard_policy` (a file) or the mode's defaults."""

    prompt: str = "original"
    system_note: str = ""
    guard: str = "off"
    guard_policy: str = ""

    def task(self, scenario: Scenario) -> str:
        """The prompt the agent is given under this condition."""
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {', '.join(PROMPTS)}, not {self.prompt!r}")
        if self.prompt == "sanitized":
            if not scenario.sanitized_prompt.strip():
                raise ValueError(f"{scenario.file or scenario.id}: scenario {scenario.id} has no sanitized_prompt")
            return scenario.sanitized_prompt
        return scenario.prompt

    def check_guard(self, scenario: Scenario) -> None:
        """PolicyError (one line) when the guard's mode or policy file cannot guard `scenario`."""
        if self.guard != "off" or self.guard_policy:
            from spillage.addons.guard_policy import policy_for

            policy_for(self.guard, self.guard_policy, scenario.irrelevant)

    def label(self) -> str:
        """What sets this condition apart in a session folder's name, '' for the default one:
        `guard-redact`, `sanitized`, `note-1a2b3c` (the note's SHA-256, so two notes differ)."""
        parts = [f"guard-{self.guard}"] if self.guard != "off" else []
        if self.prompt != "original":
            parts.append(self.prompt)
        if self.system_note:
            parts.append("note-" + hashlib.sha256(self.system_note.encode("utf-8")).hexdigest()[:6])
        return "-".join(parts)

    def as_json(self) -> dict:
        return {"prompt": self.prompt, "system_note": self.system_note,
                **({"guard": self.guard, "guard_policy": self.guard_policy or None} if self.guard != "off" else {})}
