"""File-consistency rules: parsing with line-numbered errors, evaluation, acks, renames, git."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpci.cli import main
from cpci.github.consistency import Acknowledgements, acknowledgements, evaluate
from cpci.github.gitdiff import parse_name_status
from cpci.github.models import ChangedFile, Review
from cpci.github.rules import RulesError, Steps, glob_pattern, parse_rules
from tests.github import pairs
from tests.github.pairs import EMPTY_BATCH, RULES, WORKER_V1, WORKER_V2, DictReader, edit, pair

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpci.yml"
V1 = "nemo_rl/models/policy/workers/dtensor_policy_worker.py"
V2 = "nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py"


def changed(*names: str) -> list[ChangedFile]:
    return [ChangedFile(filename=n, status="modified") for n in names]


def test_example_rules_flag_v2_changed_without_v1() -> None:
    rules = parse_rules(EXAMPLE.read_text(), str(EXAMPLE))
    result = evaluate(rules, changed(V2, "README.md"))
    [finding] = result.findings
    assert (finding.rule, finding.level) == ("dtensor-policy-worker", "warn")
    assert finding.files == [V2]
    assert finding.unchanged == [V1]
    assert "cpci-ack: dtensor-policy-worker" in finding.message
    assert evaluate(rules, changed(V1, V2)).findings == []
    assert evaluate(rules, changed("README.md")).findings == []


def test_globs_stay_within_directories_unless_double_star() -> None:
    assert glob_pattern("src/*.py").fullmatch("src/a.py")
    assert not glob_pattern("src/*.py").fullmatch("src/sub/a.py")
    assert glob_pattern("src/**/*.py").fullmatch("src/a.py")
    assert glob_pattern("src/**/*.py").fullmatch("src/x/y/a.py")
    assert not glob_pattern("src/a?.py").fullmatch("src/a/.py")


def test_double_star_segments_and_gitignore_style_inner_stars() -> None:
    assert glob_pattern("docs/**").fullmatch("docs/a/b.md")
    assert glob_pattern("**/x.py").fullmatch("x.py")
    assert glob_pattern("**/x.py").fullmatch("a/b/x.py")
    assert glob_pattern("a/**/b/**/c").fullmatch("a/b/c")
    assert glob_pattern("a/**/b/**/c").fullmatch("a/1/2/b/3/c")
    assert not glob_pattern("a/**/b/**/c").fullmatch("a/1/2/c")
    assert glob_pattern("src/a**b.py").fullmatch("src/axxb.py")  # inside a segment: a plain *
    assert not glob_pattern("src/a**b.py").fullmatch("src/a/x/b.py")


def test_the_pathological_glob_takes_linear_steps() -> None:
    """`**a**a**a**a**b` on 200 characters backtracked for seconds as a regex; segment-wise it
    takes at most len(pattern) x len(path) steps."""
    glob, path, steps = glob_pattern("**a**a**a**a**b"), "a" * 200, Steps()
    assert not glob.fullmatch(path, steps)
    assert steps.count <= len(glob.source) * len(path)
    deep, steps = glob_pattern("**/" * 20 + "b"), Steps()
    assert not deep.fullmatch("/".join(["a"] * 200), steps)
    assert steps.count <= 21 * 200


@given(
    glob=st.text(alphabet="ab*?/", min_size=1, max_size=8).filter(lambda g: "**" not in g),
    path=st.text(alphabet="ab/", max_size=10),
)
def test_single_stars_match_as_the_regular_expression_would(glob: str, path: str) -> None:
    regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in glob)
    assert glob_pattern(glob).fullmatch(path) == bool(re.fullmatch(regex, path))


def test_a_rename_counts_under_both_names() -> None:
    rules = parse_rules("consistency:\n  - {name: pair, paths: [a/old.py, b/twin.py]}\n")
    moved = [ChangedFile(filename="a/new.py", status="renamed", previous_filename="a/old.py")]
    [finding] = evaluate(rules, moved).findings
    assert finding.files == ["a/old.py"]


def test_a_label_acknowledges_any_rule_a_body_line_only_warn_rules() -> None:
    rules = parse_rules(
        "consistency:\n  - {name: pair, paths: [a, b], severity: fail}\n"
        "  - {name: soft, paths: [a, c]}\n"
    )
    assert evaluate(rules, changed("a")).failed
    labelled = evaluate(
        rules, changed("a"), acknowledgements(["cpci-ack:pair", "cpci-ack:soft"], "")
    )
    assert [f.level for f in labelled.findings] == ["note", "note"]
    assert not labelled.failed
    body = "Fixes things.\n\ncpci-ack: pair\ncpci-ack: soft\n"
    by_author = evaluate(rules, changed("a"), acknowledgements((), body))
    assert [(f.rule, f.level, f.acknowledged) for f in by_author.findings] == [
        ("pair", "fail", False),
        ("soft", "note", True),
    ]
    assert by_author.failed
    assert "a maintainer adds the label `cpci-ack:pair`" in by_author.findings[0].message
    assert acknowledgements((), "we do not cpci-ack: pair inline") == Acknowledgements()


def test_a_maintainers_approving_review_acknowledges_a_fail_rule() -> None:
    rules = parse_rules("consistency:\n  - {name: pair, paths: [a, b], severity: fail}\n")
    acked = acknowledgements((), "", approvals=["Looks right.\ncpci-ack: pair\n"])
    assert [f.level for f in evaluate(rules, changed("a"), acked).findings] == ["note"]

    def review(login: str, state: str = "APPROVED") -> Review:
        return Review(id=1, state=state, body="cpci-ack: pair", user_login=login)

    assert review("maintainer").approves("author")  # whether they may write: tests/github/...
    assert not review("author").approves("author")  # self-approval
    assert not review("maintainer", "COMMENTED").approves("author")


def test_an_ack_that_did_not_count_says_why_in_its_finding() -> None:
    rules = parse_rules("consistency:\n  - {name: pair, paths: [a, b], severity: fail}\n")
    why = {"pair": "the label `cpci-ack:pair` does not count: drive-by has read permission"}
    [finding] = evaluate(rules, changed("a"), acknowledgements((), "", (), why)).findings
    assert finding.level == "fail"
    assert finding.message.endswith(f"({why['pair']})")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("consistency:\n  - name: a\n    paths: [x, y]\n   bad: [", r"cpci\.yml:4: not valid YAML"),
        ("consistency:\n  - name: a\n    path: [x, y]\n", r":3: unknown key 'path' in a rule"),
        ("consistency:\n  - name: a\n    paths: [x]\n", r":3: rule 'a' needs two or more"),
        ("consistency:\n  - name: a b\n    paths: [x, y]\n", r":2: rule name 'a b' may only"),
        ("consistency:\n  - paths: [x, y]\n", r":2: the rule has no 'name'"),
        (
            "consistency:\n  - {name: a, paths: [x, y]}\n  - {name: a, paths: [x, z]}\n",
            r":3: rule name 'a' is used twice \(first on line 2\)",
        ),
        ("consistency:\n  - {name: a, paths: [x, y], severity: error}\n", r":2: severity must"),
        ("consistancy: []\n", r":1: unknown key 'consistancy'"),
        ("consistency: {name: a}\n", r":1: 'consistency' must be a list"),
    ],
)
def test_bad_rule_files_name_the_line_and_the_problem(source: str, expected: str) -> None:
    with pytest.raises(RulesError, match=expected):
        parse_rules(source, ".github/cpci.yml")


def test_git_name_status_with_renames() -> None:
    out = "M\0a.py\0R087\0old dir/x.py\0new dir/x.py\0D\0gone.py\0"
    files = parse_name_status(out)
    assert [(f.status, f.filename, f.previous_filename) for f in files] == [
        ("modified", "a.py", None),
        ("renamed", "new dir/x.py", "old dir/x.py"),
        ("removed", "gone.py", None),
    ]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "PATH": "/usr/bin:/bin",
            "HOME": str(repo),
        },
    )
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".github").mkdir()
    (repo / ".github" / "cpci.yml").write_text(EXAMPLE.read_text())
    workers = repo / "nemo_rl/models/policy/workers"
    workers.mkdir(parents=True)
    (repo / V1).write_text("v1\n")
    (repo / V2).write_text("v2\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / V2).write_text("v2 changed\n")
    _git(repo, "commit", "-q", "-am", "change v2 only")
    return repo


def test_cli_on_a_real_checkout(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["consistency", "--base", "main", "--head", "feature", "--repo", str(checkout)])
    out = capsys.readouterr().out
    assert code == 0  # a warning does not fail
    assert f"warn: rule dtensor-policy-worker: changed {V2} but not {V1}" in out
    assert (
        main(
            [
                "consistency",
                "--base",
                "main",
                "--repo",
                str(checkout),
                "--json",
                "--ack",
                "dtensor-policy-worker",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [f["level"] for f in report["findings"]] == ["note"]


def test_cli_fail_rule_exits_1_and_bad_ref_exits_2(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = checkout / "strict.yml"
    rules.write_text(STRICT)
    args = ["consistency", "--base", "main", "--head", "feature", "--repo", str(checkout)]
    assert main([*args, "--rules-file", str(rules)]) == 1
    assert main(["consistency", "--base", "nope", "--repo", str(checkout)]) == 2
    assert "fetch-depth: 0" in capsys.readouterr().err


STRICT = f"consistency:\n  - {{name: w, paths: [{V1}, {V2}], severity: fail}}\n"


def test_cli_reads_the_rules_at_base_so_a_pr_cannot_delete_its_own_rule(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (checkout / ".github" / "cpci.yml").write_text(STRICT)
    _git(checkout, "checkout", "-q", "main")
    _git(checkout, "commit", "-q", "-am", "a fail rule on main")
    _git(checkout, "checkout", "-q", "-b", "sneaky")
    (checkout / V2).write_text("v2 changed\n")
    (checkout / ".github" / "cpci.yml").write_text("consistency: []\n")  # the PR drops the rule
    _git(checkout, "commit", "-q", "-am", "change v2 and delete the rule")
    args = ["consistency", "--base", "main", "--head", "sneaky", "--repo", str(checkout)]
    assert main(args) == 1
    assert "fail: rule w: changed" in capsys.readouterr().out
    body = checkout.parent / "body.md"
    body.write_text("cpci-ack: w\n")
    assert main([*args, "--body-file", str(body)]) == 1  # the author cannot waive it
    assert "a maintainer adds the label `cpci-ack:w`" in capsys.readouterr().out
    assert main([*args, "--ack", "w"]) == 0  # the workflow (a maintainer's) can
    assert main([*args, "--rules", "missing.yml"]) == 2
    assert "no missing.yml at main" in capsys.readouterr().err


# -- function level ------------------------------------------------------------------------------

FIXED_V2 = edit(WORKER_V2, *EMPTY_BATCH)
#: Two drifts at once: `train` (v2's fix) and the shard-plan helper (v1's change).
TWO_DRIFTS = pair(
    v1_head=edit(WORKER_V1, '"shard"', '"replicate"'), v2_head=edit(WORKER_V2, *EMPTY_BATCH)
)


def test_a_pair_of_python_files_is_checked_by_function_unless_told_otherwise() -> None:
    [by_function, globs, by_file] = parse_rules(
        "consistency:\n"
        "  - {name: a, paths: [x/a.py, x/b.py]}\n"
        "  - {name: b, paths: [x/*.py, y.py]}\n"
        "  - {name: c, paths: [x/a.py, x/b.py], granularity: file}\n"
    ).rules
    assert by_function.by_function
    assert not globs.by_function
    assert not by_file.by_function


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "consistency:\n  - {name: a, paths: [x.py, y.md], granularity: function}\n",
            r":2: rule 'a': granularity 'function' needs exactly two \.py paths",
        ),
        ("consistency:\n  - {name: a, paths: [x, y], granularity: line}\n", r":2: granularity"),
        ("consistency:\n  - {name: a, paths: [x, y], similarity: 1.5}\n", r":2: similarity must"),
        ("consistency:\n  - {name: a, paths: [x, y], similarity: high}\n", r"got 'high'"),
        ("fixes: {prefixes: [fix]}\n", r":1: unknown key 'prefixes' in 'fixes'"),
        ("fixes: {labels: bug}\n", r":1: 'labels' must be a list"),
    ],
)
def test_bad_function_level_options_name_the_line(source: str, expected: str) -> None:
    with pytest.raises(RulesError, match=expected):
        parse_rules(source, ".github/cpci.yml")


def test_a_function_changed_on_one_side_warns_at_function_level() -> None:
    result = evaluate(parse_rules(RULES), changed(pairs.V2), reader=pair(v2_head=FIXED_V2))
    [finding] = result.findings
    assert (finding.granularity, finding.level, finding.file_level_because) == (
        "function",
        "warn",
        "",
    )
    assert [d.function.qualname for d in finding.drifts] == ["DTensorPolicyWorkerV2.train"]
    assert finding.tally() == ["1 function(s) to port"]


def test_edits_with_no_twin_to_port_to_are_a_note_that_counts_them() -> None:
    v2_head = edit(WORKER_V2, 'format="safetensors"', 'format="torch_save"')
    v2_head = edit(v2_head, 'return self.cfg["v2"]', "return True")
    [finding] = evaluate(
        parse_rules(RULES), changed(pairs.V2), reader=pair(v2_head=v2_head)
    ).findings
    assert (finding.level, finding.drifts) == ("note", [])
    assert finding.diverged == ["DTensorPolicyWorkerV2.save_checkpoint"]
    assert finding.one_sided == ["DTensorPolicyWorkerV2.only_in_v2"]
    assert finding.tally() == [
        "no function to port",
        "changed functions not warned about: 1 on one side only, 1 whose twin had diverged",
    ]


def test_both_files_changed_alike_is_no_finding() -> None:
    both = pair(v1_head=edit(WORKER_V1, *EMPTY_BATCH), v2_head=FIXED_V2)
    assert evaluate(parse_rules(RULES), changed(pairs.V1, pairs.V2), reader=both).findings == []


def test_a_fix_raises_the_severity_one_step() -> None:
    rules = parse_rules(RULES)
    reader = pair(v2_head=FIXED_V2)
    [fix] = evaluate(rules, changed(pairs.V2), reader=reader, title="Fix: empty batches").findings
    assert (fix.level, fix.severity, fix.drifts[0].level) == ("fail", "warn", "fail")
    assert fix.raised_by == "its title starts with `fix:`"
    assert "raised to fail: this PR is a fix (its title starts with `fix:`)" in fix.tally()
    [feature] = evaluate(
        rules, changed(pairs.V2), reader=reader, title="feat: fixes later"
    ).findings
    assert (feature.level, feature.raised_by) == ("warn", "")
    labelled = parse_rules("fixes: {title-prefixes: [], labels: [bug]}\n" + RULES)
    [by_label] = evaluate(labelled, changed(pairs.V2), reader=reader, labels=["bug"]).findings
    assert (by_label.level, by_label.raised_by) == ("fail", "it has the label `bug`")
    [no_prefix] = evaluate(labelled, changed(pairs.V2), reader=reader, title="fix: x").findings
    assert no_prefix.level == "warn"
    # Nothing to port: a fix raises nothing.
    diverged = pair(v2_head=edit(WORKER_V2, 'format="safetensors"', 'format="x"'))
    [quiet] = evaluate(rules, changed(pairs.V2), reader=diverged, title="fix: x").findings
    assert (quiet.level, quiet.raised_by) == ("note", "")


def test_an_ack_of_one_function_leaves_the_others_warning() -> None:
    rules = parse_rules(RULES)
    body = "cpci-ack: workers:DTensorPolicyWorkerV2.train\n"
    result = evaluate(
        rules, changed(pairs.V1, pairs.V2), acknowledgements((), body), reader=TWO_DRIFTS
    )
    [finding] = result.findings
    assert [(d.twin.qualname, d.level) for d in finding.drifts] == [
        ("build_shard_plan", "warn"),
        ("DTensorPolicyWorker.train", "note"),
    ]
    assert (finding.level, finding.acknowledged) == ("warn", False)
    assert finding.tally()[:2] == ["1 function(s) to port", "1 acknowledged"]
    # The plain name, or the twin's, names it too; both acked: the finding is a note.
    body = "cpci-ack: workers:shard_plan\ncpci-ack: workers:train\n"
    both = evaluate(
        rules, changed(pairs.V1, pairs.V2), acknowledgements((), body), reader=TWO_DRIFTS
    )
    assert [(f.level, f.acknowledged) for f in both.findings] == [("note", True)]
    # The whole rule, as before.
    whole = evaluate(
        rules,
        changed(pairs.V1, pairs.V2),
        acknowledgements((), "cpci-ack: workers"),
        reader=TWO_DRIFTS,
    )
    assert [d.level for d in whole.findings[0].drifts] == ["note", "note"]


def test_the_author_cannot_waive_a_drift_a_fix_raised_a_maintainer_can() -> None:
    rules = parse_rules(RULES)
    reader = pair(v2_head=FIXED_V2)
    author = acknowledgements((), "cpci-ack: workers:DTensorPolicyWorkerV2.train")
    [refused] = evaluate(rules, changed(pairs.V2), author, reader=reader, title="fix: x").findings
    assert refused.level == "fail"
    assert refused.drifts[0].note.startswith(
        "(a `cpci-ack: workers:DTensorPolicyWorkerV2.train` line in the PR description cannot "
        "waive a `fail` warning: a maintainer adds the label"
    )
    label = acknowledgements(["cpci-ack:workers:train"], "")
    [waived] = evaluate(rules, changed(pairs.V2), label, reader=reader, title="fix: x").findings
    assert (waived.level, waived.drifts[0].acknowledged) == ("note", True)
    why = {"workers:train": "the label `cpci-ack:workers:train` does not count: x has read"}
    unvouched = acknowledgements((), "", (), why)
    [said] = evaluate(rules, changed(pairs.V2), unvouched, reader=reader).findings
    assert said.drifts[0].note == f"({why['workers:train']})"


def test_a_pair_that_cannot_be_read_or_parsed_is_checked_by_file_and_says_why() -> None:
    rules = parse_rules(RULES)
    absent = DictReader({("head", pairs.V2): FIXED_V2, ("base", pairs.V2): WORKER_V2})
    [missing] = evaluate(rules, changed(pairs.V2), reader=absent).findings
    assert (missing.granularity, missing.level) == ("file", "warn")
    assert missing.file_level_because == f"`{pairs.V1}` does not exist at head"
    [broken] = evaluate(rules, changed(pairs.V2), reader=pair(v2_head="def (:\n")).findings
    assert broken.file_level_because.startswith(f"`{pairs.V2}` at head is not Python (line 1")
    added = [ChangedFile(filename=pairs.V2, status="added")]
    [new] = evaluate(rules, added, reader=pair()).findings
    assert new.file_level_because == f"`{pairs.V2}` was added by this change"
    [plain] = evaluate(rules, changed(pairs.V2)).findings  # no reader: file level, nothing to say
    assert (plain.granularity, plain.file_level_because) == ("file", "")


def test_a_renamed_file_of_the_pair_is_read_under_both_names() -> None:
    moved = "workers/v2/dtensor_policy_worker_v2.py"
    reader = DictReader(
        {("base", pairs.V1): WORKER_V1, ("base", pairs.V2): WORKER_V2, ("head", moved): FIXED_V2}
    )
    reader.texts[("head", pairs.V1)] = WORKER_V1
    files = [ChangedFile(filename=moved, status="renamed", previous_filename=pairs.V2)]
    [finding] = evaluate(parse_rules(RULES), files, reader=reader).findings
    [drift] = finding.drifts
    assert (drift.function.path, drift.twin.path) == (moved, pairs.V1)
