"""`INDEX/TOTAL` parsed once for the runner and the uploader."""

from __future__ import annotations

import pytest

from cpci.shard_spec import parse_shard
from cpci.upload.envelope import RunFields, build_envelope
from cpci.upload.errors import EnvelopeError


@pytest.mark.parametrize(("text", "shard"), [("0/1", (0, 1)), (" 3/4 ", (3, 4)), ("9/10", (9, 10))])
def test_index_and_total(text: str, shard: tuple[int, int]) -> None:
    assert parse_shard(text) == shard


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("4/4", "needs 0 <= INDEX < TOTAL"),
        ("0/0", "needs 0 <= INDEX < TOTAL"),
        ("1-4", "must look like INDEX/TOTAL"),
        ("-1/4", "must look like INDEX/TOTAL"),
        ("1/4/8", "must look like INDEX/TOTAL"),
    ],
)
def test_a_bad_shard_says_what_a_good_one_looks_like(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_shard(text)


def test_the_uploader_names_its_flag_variable_and_value() -> None:
    env = {"GITHUB_REPOSITORY": "acme/attn", "GITHUB_SHA": "a" * 40, "GITHUB_RUN_ID": "1"}
    assert build_envelope(RunFields(), [], {**env, "CPCI_SHARD": "1/3"}).shard_index == 1
    with pytest.raises(EnvelopeError) as excinfo:
        build_envelope(RunFields(shard="5/3"), [], env)
    assert str(excinfo.value) == (
        "--shard (or CPCI_SHARD) needs 0 <= INDEX < TOTAL in INDEX/TOTAL, got '5/3'"
    )
