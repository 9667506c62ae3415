"""One spelling of each setting's enum: the gating mode and the comment mode are defined by the
GitHub side (`cpci.github`), and the service's settings, the Action's inputs and the bot read
those very types, so a new mode added there is accepted everywhere at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel, ValidationError

from cpci.action.settings import ActionSettings
from cpci.github import CommentMode, FailOn
from cpci.github.gate import FAIL_ON
from cpci.github.publish import COMMENT_MODES
from cpci.server.core.config import Settings

CPCI = Path(__file__).resolve().parents[1] / "cpci"


def _type_of(model: type[BaseModel], field: str) -> object:
    return model.model_fields[field].annotation


def test_each_mode_is_one_type_read_by_every_settings_object() -> None:
    assert _type_of(Settings, "github_fail_on") == FailOn
    assert _type_of(Settings, "github_comment_mode") == CommentMode
    assert _type_of(ActionSettings, "fail_on") == FailOn
    assert _type_of(ActionSettings, "comment") == CommentMode
    assert get_args(FailOn) == FAIL_ON
    assert get_args(CommentMode) == COMMENT_MODES


@pytest.mark.parametrize("first", ['"new-failures"', '"new-on-regression"'])
def test_the_values_are_spelled_in_one_module(first: str) -> None:
    """A second `Literal[...]` of the same values would drift from the first one."""
    spelled = sorted(
        str(path.relative_to(CPCI))
        for path in CPCI.rglob("*.py")
        if re.search(rf"Literal\[[^\]]*{first}", path.read_text(encoding="utf-8"))
    )
    assert len(spelled) == 1, spelled


def test_the_service_refuses_a_mode_the_gate_does_not_know() -> None:
    with pytest.raises(ValidationError, match="github_fail_on"):
        Settings(github_fail_on="sometimes")  # type: ignore[arg-type]
    assert Settings(github_comment_mode="new-on-regression").github_comment_mode in COMMENT_MODES
