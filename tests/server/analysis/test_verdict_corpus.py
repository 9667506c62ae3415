"""Verdicts measured on a seeded CI history with known truth, through the real service.

A small corpus (30 configs, 20 main runs, 8 PRs on 2 shards, reruns on; and again with reruns
off, for the goals that must hold without them) is uploaded once per module over HTTP to a real
`cpci serve` on SQLite, with `branch` and `pr` tokens made by `cpci token create`; each PR's
report is read right after its last shard. Each goal is its own test, so that a regression of
one verdict rule fails one test (a goal the service misses for a while is marked
`xfail(strict=True, raises=AssertionError)`, so that its fix must remove the mark). The first
tests check the instrument itself, without the service.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.server.verdict_corpus import (
    POISON_KINDS,
    REGRESSION_KINDS,
    Corpus,
    CorpusSpec,
    Upload,
    build_corpus,
)
from tests.server.verdict_play import Observed, ReportView, corpus_service, play
from tests.server.verdict_records import ATTEMPTS_WITH_RERUNS, NOT_RUN, SEGFAULT, SURVIVOR
from tests.server.verdict_score import FALSE_ALARM_GOAL, RECALL_GOAL, Score, score

Attempt = tuple[int, str, bool]
SPEC = CorpusSpec(configs=30, main_runs=20, prs=8, shards=2, seed=1, flaky_share=0.3)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build_corpus(SPEC)


def _play_and_score(corpus: Corpus, tmp: Path) -> Score:
    with corpus_service(f"sqlite:///{tmp / 'cpci.db'}", tmp / "serve.log") as access:
        observed = play(corpus, access)
    assert set(observed.reports) == {p.number for p in corpus.pulls}
    return score(corpus, observed)


@pytest.fixture(scope="module")
def scored(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Score:
    return _play_and_score(corpus, tmp_path_factory.mktemp("verdict-corpus"))


@pytest.fixture(scope="module")
def scored_without_reruns(tmp_path_factory: pytest.TempPathFactory) -> Score:
    """The same history with reruns off: flakiness must then be learnt from history alone."""
    corpus = build_corpus(replace(SPEC, reruns=False))
    return _play_and_score(corpus, tmp_path_factory.mktemp("verdict-corpus-no-reruns"))


def _records_by_config(corpus: Corpus) -> list[tuple[int | None, dict[str, list[Attempt]]]]:
    """Per upload of a main run (None) or a PR (its number), not a poisoning one: each config's
    (attempt, outcome, flaky) in upload order."""
    numbers = {p.number for p in corpus.pulls}
    out = []
    for step in corpus.steps:
        if isinstance(step, Upload) and step.envelope.pull_request in {None, *numbers}:
            per: dict[str, list[Attempt]] = {}
            for r in step.envelope.results:
                per.setdefault(r.config_key, []).append((r.attempt, r.outcome, r.flaky))
            out.append((step.envelope.pull_request, per))
    return out


def test_corpus_is_deterministic_in_its_seed(corpus: Corpus) -> None:
    assert build_corpus(SPEC) == corpus
    other = build_corpus(replace(SPEC, seed=2))
    assert [c.key for c in other.configs] != [c.key for c in corpus.configs]


def test_small_corpus_has_every_case(corpus: Corpus) -> None:
    kinds = Counter(r.kind for p in corpus.pulls for r in p.regressions)
    assert set(kinds) == set(REGRESSION_KINDS)
    assert {x.kind for p in corpus.pulls for x in p.poisons} == set(POISON_KINDS)
    truths = Counter(t for p in corpus.pulls for t in p.head.values())
    assert truths["not_run"] >= 2
    assert truths["order_dependent"] >= 2
    assert truths["flaky_failure"] >= 5
    assert sum(p.partial for p in corpus.pulls) == 1
    assert any(c.broken is not None for c in corpus.configs)
    assert any(len(c.signatures) == 2 for c in corpus.configs)
    assert {ws for c in corpus.configs for ws in [c.world_size]} == {2, 4}
    for c in corpus.configs:
        assert c.rate == 0 or 0.05 <= c.rate <= 0.3


@pytest.mark.parametrize("reruns", [True, False])
def test_reruns_stop_at_the_first_pass_in_the_same_upload(reruns: bool) -> None:
    corpus = build_corpus(replace(SPEC, reruns=reruns))
    order_dependent = {
        (p.number, k) for p in corpus.pulls for k, t in p.head.items() if t == "order_dependent"
    }
    most = ATTEMPTS_WITH_RERUNS if reruns else 1
    seen = Counter[int]()
    for number, per in _records_by_config(corpus):
        for key, attempts in per.items():
            if (number, key) in order_dependent:
                assert [(a, o) for a, o, _ in attempts] == [
                    (1, "failed"),
                    (2, "passed"),
                    (3, "failed"),
                ]
                continue
            assert [a for a, _, _ in attempts] == list(range(1, len(attempts) + 1))
            assert len(attempts) <= most
            *failing, (_, last, flaky) = attempts
            assert all(o != "passed" for _, o, _ in failing)
            assert flaky == (last == "passed" and bool(failing))
            seen[len(attempts)] += 1
    assert set(seen) == set(range(1, most + 1))


def test_pr_records_carry_the_cases_as_the_runner_writes_them(corpus: Corpus) -> None:
    heads = {p.head_commit: p for p in corpus.pulls}
    crash_configs = {
        (p.number, r.config) for p in corpus.pulls for r in p.regressions if r.kind == "crash"
    }
    crashes = not_run = isolations = 0
    shards: Counter[int] = Counter()
    for step in corpus.steps:
        if not isinstance(step, Upload) or step.envelope.commit not in heads:
            continue
        pull = heads[step.envelope.commit]
        if step.envelope.pull_request != pull.number:
            continue  # a poisoning upload at the same commit under another PR
        shards[pull.number] += 1
        for r in step.envelope.results:
            if (pull.number, r.config_key) in crash_configs:
                assert r.outcome == "crashed"
                messages = [e.message for e in r.rank_errors]
                assert messages.count(SEGFAULT) == 1
                assert messages.count(SURVIVOR) == r.world_size - 1
                crashes += 1
            if r.outcome == "not_run":
                assert [e.message for e in r.rank_errors] == [NOT_RUN]
                not_run += 1
            isolations += r.isolation == "order-dependent"
    assert crashes >= 2
    assert not_run >= 2
    assert isolations >= 2
    for pull in corpus.pulls:
        assert shards[pull.number] == SPEC.shards - pull.partial


def _oracle(corpus: Corpus) -> Observed:
    """What a perfect service would say: the truth, read back as verdicts."""
    verdict_of = {
        "regression": "new_failure",
        "order_dependent": "new_failure",
        "not_run": "infra",
        "flaky_failure": "flaky",
        "flaky_every_attempt": "flaky",
        "broken_at_base": "broken_at_base",
    }
    reports = {}
    for pull in corpus.pulls:
        if pull.partial:
            reports[pull.number] = ReportView("pending", dict.fromkeys(pull.head, "pending"))
        else:
            verdicts = {k: verdict_of[t] for k, t in pull.head.items() if t in verdict_of}
            reports[pull.number] = ReportView("complete", verdicts)
    flaky = frozenset(c.key for c in corpus.configs if c.rate and c.key in corpus.failed_in_window)
    return Observed(reports, flaky, requests=0, bytes_sent=0)


def test_a_perfect_service_meets_every_goal_and_one_wrong_verdict_shows(corpus: Corpus) -> None:
    perfect = score(corpus, _oracle(corpus))
    assert all(f.met is not False for f in perfect.figures()), perfect.figures()
    assert perfect.misses == ()
    pull = next(p for p in corpus.pulls if p.poisons and not p.partial)
    target = pull.poisons[0].config
    observed = _oracle(corpus)
    report = observed.reports[pull.number]
    wrong = ReportView(report.status, {**report.verdicts, target: "flaky"})
    worse = score(corpus, replace(observed, reports={**observed.reports, pull.number: wrong}))
    assert worse.hidden_by_attempts[ATTEMPTS_WITH_RERUNS].hits == 1
    assert worse.poisoning_hid.hits == 1
    assert worse.hidden_as == {"flaky": 1}
    assert {(m.figure, m.pull, m.config) for m in worse.misses} == {
        ("hidden/3", pull.number, target),
        ("poisoned", pull.number, target),
    }


def test_the_corpus_exercises_every_goal(scored: Score) -> None:
    assert scored.hidden_by_attempts[ATTEMPTS_WITH_RERUNS].total >= 8
    assert scored.caught_in_flaky_by_attempts[ATTEMPTS_WITH_RERUNS].total >= 4
    assert scored.poisoning_hid.total >= 3
    assert scored.recall_failed.total >= 4
    assert scored.false_alarms_all.total >= 150
    assert scored.false_alarms_failing.total >= 5
    assert scored.never_ran_new_failure.total >= 2
    assert scored.order_dependent_flaky.total >= 2
    assert scored.partial_with_verdict.total == 1


def _misses(scored: Score, *figures: str) -> str:
    return "\n".join(str(m) for m in scored.misses if m.figure.startswith(figures))


def test_no_regression_hidden_when_all_attempts_failed(scored: Score) -> None:
    hidden = scored.hidden_by_attempts[ATTEMPTS_WITH_RERUNS]
    assert hidden.hits == 0, _misses(scored, "hidden/")


def test_regressions_in_flaky_configs_are_caught(scored: Score) -> None:
    caught = scored.caught_in_flaky_by_attempts[ATTEMPTS_WITH_RERUNS]
    assert caught.hits == caught.total, _misses(scored, "hidden/")


def test_no_regression_hidden_by_another_pr(scored: Score) -> None:
    assert scored.poisoning_hid.hits == 0, _misses(scored, "poisoned")


def test_flaky_configs_that_failed_are_found_within_the_window(scored: Score) -> None:
    assert scored.recall_failed.share >= RECALL_GOAL, _misses(scored, "recall_failed")


def test_flaky_configs_are_found_from_history_alone_without_reruns(
    scored_without_reruns: Score,
) -> None:
    recall = scored_without_reruns.recall_failed
    assert recall.total >= 5
    assert recall.share >= RECALL_GOAL, _misses(scored_without_reruns, "recall_failed")


def test_no_regression_hidden_by_another_pr_without_reruns(scored_without_reruns: Score) -> None:
    assert scored_without_reruns.poisoning_hid.hits == 0, _misses(scored_without_reruns, "poison")


def test_false_alarms_at_most_one_percent_with_reruns(scored: Score) -> None:
    assert scored.false_alarms_all.share <= FALSE_ALARM_GOAL, _misses(scored, "alarms_all")


def test_partial_shard_prs_get_no_verdict(scored: Score) -> None:
    assert scored.partial_with_verdict.hits == 0, _misses(scored, "partial")


def test_never_ran_is_not_a_new_failure(scored: Score) -> None:
    assert scored.never_ran_new_failure.hits == 0, _misses(scored, "never_ran")


def test_order_dependent_is_not_flaky(scored: Score) -> None:
    assert scored.order_dependent_flaky.hits == 0, _misses(scored, "order_dependent")
