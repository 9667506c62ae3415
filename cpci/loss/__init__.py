"""Training losses of two runs, read from their logs and compared step by step.

`logs` reads torchtitan's and plain logs (and JSON lines), `comparison` makes the step table,
`trainings` runs the two trainings first when asked to. `cpci loss-compare` is the command.
"""

from cpci.loss.comparison import Comparison, as_json, compare_losses, format_table
from cpci.loss.logs import LossFileError, LossLine, parse_line, read_losses
from cpci.loss.trainings import Training, TrainingError, run_training

__all__ = [
    "Comparison",
    "LossFileError",
    "LossLine",
    "Training",
    "TrainingError",
    "as_json",
    "compare_losses",
    "format_table",
    "parse_line",
    "read_losses",
    "run_training",
]
