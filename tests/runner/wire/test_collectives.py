"""Which collective a rank was in: from a failure's traceback (seen end to end in
`test_rank_errors`), and from a hung rank's stack dump."""

from __future__ import annotations

from cpci.runner.wire.collectives import waiting_in

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"

#: faulthandler's dump of a rank hung in a barrier (most recent call first), cut down.
HUNG = f"""Thread 0x00007f05689ff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/usr/lib/python3.11/threading.py", line 982 in _bootstrap

Current thread 0x00007f058aa2fb80 (most recent call first):
  File "{C10D}", line 5356 in barrier
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/suite/test_te.py", line 9 in test_x
  File "/venv/lib/python3.11/site-packages/_pytest/python.py", line 166 in pytest_pyfunc_call
"""


def test_a_hung_rank_is_in_the_collective_its_test_called() -> None:
    assert waiting_in(HUNG) == "barrier"


def test_the_outermost_public_collective_is_the_one_named() -> None:
    nested = HUNG.replace(
        f'  File "{C10D}", line 5356 in barrier\n',
        f'  File "{C10D}", line 3300 in all_gather\n'
        f'  File "{C10D}", line 3100 in _object_to_tensor\n'
        f'  File "{C10D}", line 3200 in all_gather_object\n',
    )
    assert waiting_in(nested) == "all_gather_object"


def test_a_rank_outside_torch_distributed_is_in_none() -> None:
    assert waiting_in(HUNG.replace(C10D, "/suite/helpers.py")) is None
    assert waiting_in("") is None
