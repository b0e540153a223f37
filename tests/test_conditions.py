"""The run conditions of the paper's §5.4: which prompt an agent gets, and a system note."""

from dataclasses import replace

import pytest
from audit_helpers import KETTLE

from spillage.runner.conditions import Condition


def test_the_original_prompt_is_the_default():
    assert Condition().task(KETTLE) == KETTLE.prompt


def test_the_sanitized_prompt_leaves_out_what_the_task_does_not_need():
    task = Condition("sanitized").task(KETTLE)
    assert task == KETTLE.sanitized_prompt and "pregnant" in KETTLE.prompt and "pregnant" not in task


def test_a_scenario_without_a_sanitized_prompt_cannot_run_sanitized():
    with pytest.raises(ValueError, match="no sanitized_prompt"):
        Condition("sanitized").task(replace(KETTLE, sanitized_prompt=" "))


def test_an_unknown_prompt_condition_is_refused():
    with pytest.raises(ValueError, match="original, sanitized"):
        Condition("redacted").task(KETTLE)
