"""One log line at a time: what `parse_line` reads from torchtitan's and other trainers' lines."""

from __future__ import annotations

import pytest

from cpci.loss import LossFileError, LossLine, parse_line

WHERE = "train.log:7"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("step: 1 loss: 2.5", LossLine(None, 1, 2.5)),
        ("[rank3]:step=4, loss=1e-3", LossLine(3, 4, 1e-3)),
        ("[default1]: step 12/100 | loss 0.75 | lr 3e-4", LossLine(1, 12, 0.75)),
        (
            "\x1b[1m[rank0]:\x1b[0m\x1b[31mstep:  9  \x1b[32mloss:  8.1309\x1b[39m",
            LossLine(0, 9, 8.1309),
        ),
        ("loss: 2.0 at step 5", LossLine(None, 5, 2.0)),
        ("Step: 2 Loss: -0.5", LossLine(None, 2, -0.5)),
        ("step: 3 loss scaling on, loss: 4.0", LossLine(None, 3, 4.0)),  # first numeric loss
        ("Step 5: loss = 2.0", LossLine(None, 5, 2.0)),
        ("(step 6) loss 2.0;", LossLine(None, 6, 2.0)),
        ("{'step': 7, 'loss': 2.5}", LossLine(None, 7, 2.5)),
        ('metrics {"step": 8, "loss": 1.5, "lr": 0.1}', LossLine(None, 8, 1.5)),
        ("step 9/ 100 | loss: 1.25", LossLine(None, 9, 1.25)),
    ],
)
def test_loss_lines(line: str, expected: LossLine) -> None:
    assert parse_line(line, WHERE) == expected


@pytest.mark.parametrize(
    "line",
    [
        "Training starts at step 1, with local batch size 8",
        "validate step: 1  loss: 9.0",
        "[rank0]:[titan] eval step 2 loss 3.0",
        "avg_loss: 2.0 global_step: 3",  # neither is the `step`/`loss` field
        "steps: 3 losses: 2.0",
        "step: 3 loss scaling on",
    ],
)
def test_other_lines(line: str) -> None:
    assert parse_line(line, WHERE) is None


def test_malformed_values_name_the_line() -> None:
    with pytest.raises(LossFileError, match=r"^train\.log:7: loss '1\.2\.3' is not a number$"):
        parse_line("step: 1 loss: 1.2.3", WHERE)


@pytest.mark.parametrize(
    "coloured",
    [
        "\x1b[38;5;196mstep: 1\x1b[0m loss: 2.5",  # 256-colour
        "\x1b[1;32mstep: 1 \x1b[Kloss: 2.5",  # bold green, erase to end of line
        "\x1bMstep: 1 loss: 2.5\x1b[",  # a two-byte escape, a cut-off one at the end
    ],
)
def test_escape_sequences_are_ignored(coloured: str) -> None:
    assert parse_line(coloured, WHERE) == LossLine(None, 1, 2.5)
