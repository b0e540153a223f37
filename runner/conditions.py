"""The experimental conditions of a run (paper §5.4): which prompt the agent gets, and a system note."""

from dataclasses import dataclass

from spillage.scenarios.model import Scenario

PROMPTS = ("original", "sanitized")


@dataclass(frozen=True)
class Condition:
    """`prompt`: the scenario's persona-rich prompt or its `sanitized_prompt` (irrelevant details
    removed); `system_note`: text added to the agent's system prompt (a prompt-level mitigation)."""

    prompt: str = "original"
    system_note: str = ""

    def task(self, scenario: Scenario) -> str:
        """The prompt the agent is given under this condition."""
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {', '.join(PROMPTS)}, not {self.prompt!r}")
        if self.prompt == "sanitized":
            if not scenario.sanitized_prompt.strip():
                raise ValueError(f"{scenario.file or scenario.id}: scenario {scenario.id} has no sanitized_prompt")
            return scenario.sanitized_prompt
        return scenario.prompt

    def as_json(self) -> dict:
        return {"prompt": self.prompt, "system_note": self.system_note}
