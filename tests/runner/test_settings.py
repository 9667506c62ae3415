"""Settings come from CLI > env > ini > default, and a bad value names its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner.settings import OPTIONS, resolve

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


@pytest.fixture
def ini(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ncpci_batch_size = 4\ncpci_timeout = 30\n")
    return pytester


def test_by_default_a_world_runs_as_many_configs_as_its_queue_holds(
    pytester: pytest.Pytester,
) -> None:
    settings = resolve(pytester.parseconfig(), environ={})
    assert settings.world_cap is None  # no cap
    assert settings.timeout == 300
    assert settings.backend == "auto"


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ((), {}, 4),  # ini
        ((), {"CP_TEST_BATCH_SIZE": "8"}, 8),  # env beats ini
        (("--cpci-batch-size=2",), {"CP_TEST_BATCH_SIZE": "8"}, 2),  # CLI beats env
        (("--cpci-batch-size=1",), {}, 1),  # a fresh world per config
        ((), {"CP_TEST_BATCH_SIZE": ""}, 4),  # an empty variable is not set
    ],
)
def test_precedence_cli_env_ini(
    ini: pytest.Pytester, args: tuple[str, ...], env: dict[str, str], expected: int
) -> None:
    assert resolve(ini.parseconfig(*args), environ=env).world_cap == expected


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ("--cpci-batch-size=0",),
            {},
            "--cpci-batch-size must be >= 1, got '0' (from --cpci-batch-size)",
        ),
        (
            (),
            {"CP_TEST_BATCH_SIZE": "many"},
            "--cpci-batch-size must be an integer >= 1, got 'many' "
            "(from environment variable CP_TEST_BATCH_SIZE)",
        ),
        (("--cpci-timeout=-1",), {}, "--cpci-timeout must be > 0, got '-1'"),
        (
            ("--cpci-shard=2/2",),
            {},
            "--cpci-shard needs 0 <= INDEX < TOTAL in INDEX/TOTAL, got '2/2' (from --cpci-shard)",
        ),
        (("--cpci-backend=mpi",), {}, "--cpci-backend must be one of auto, gloo, nccl"),
        (("--cpci-launcher=forkx",), {}, "--cpci-launcher must be one of fork, torchrun"),
        (("--cpci-launcher=torchrunx",), {}, "--cpci-launcher must be one of fork, torchrun"),
        (("--cpci-reruns=-1",), {}, "--cpci-reruns must be >= 0, got '-1' (from --cpci-reruns)"),
        (
            (),
            {"CPCI_RERUNS": "twice"},
            "--cpci-reruns must be an integer >= 0, got 'twice' "
            "(from environment variable CPCI_RERUNS)",
        ),
        (
            ("--cpci-reruns-policy=always",),
            {},
            "--cpci-reruns-policy must be one of adaptive, fixed, got 'always'",
        ),
        (
            (),
            {"CPCI_NEW_CONFIG_SHARE": "1.5"},
            "--cpci-new-config-share must be > 0 and <= 1, got '1.5' "
            "(from environment variable CPCI_NEW_CONFIG_SHARE)",
        ),
        (
            ("--cpci-durations=ftp://x/durations",),
            {},
            "--cpci-durations must be a file path or an http:// or https:// URL, got "
            "'ftp://x/durations' (from --cpci-durations)",
        ),
        (("--cpci-evidence=ftp://x/evidence",), {}, "--cpci-evidence must be a file path or"),
    ],
)
def test_bad_values_name_their_source(
    pytester: pytest.Pytester, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    with pytest.raises(pytest.UsageError) as excinfo:
        resolve(pytester.parseconfig(*args), environ=env)
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    ("args", "env", "ini", "expected"),
    [
        ((), {}, "", 0),  # plain pytest: no reruns
        ((), {}, "cpci_reruns = 1\n", 1),
        ((), {"CPCI_RERUNS": "2"}, "cpci_reruns = 1\n", 2),  # env beats ini
        (("--cpci-reruns=3",), {"CPCI_RERUNS": "2"}, "", 3),  # CLI beats env
    ],
)
def test_reruns_precedence(
    pytester: pytest.Pytester, args: tuple[str, ...], env: dict[str, str], ini: str, expected: int
) -> None:
    pytester.makeini("[pytest]\n" + ini)
    assert resolve(pytester.parseconfig(*args), environ=env).reruns == expected


def test_plain_pytest_reruns_adaptively_with_no_extra_runs(pytester: pytest.Pytester) -> None:
    """Adaptive by default: without evidence it reruns to the cap as fixed does, so only naming
    the evidence changes anything; new configs get no extra runs unless asked."""
    settings = resolve(pytester.parseconfig(), environ={})
    assert (settings.reruns_policy, settings.evidence, settings.new_config_runs) == (
        "adaptive",
        None,
        0,
    )
    assert (settings.new_config_share, settings.bisect_time) == (0.25, 600.0)
    chosen = resolve(
        pytester.parseconfig("--cpci-reruns-policy=fixed", "--cpci-evidence=e.json"),
        environ={"CPCI_NEW_CONFIG_RUNS": "2", "CPCI_CHANGED_FILES": "changed.txt"},
    )
    assert chosen.reruns_policy == "fixed"
    assert chosen.evidence is not None
    assert chosen.evidence.path == Path("e.json")
    assert (chosen.new_config_runs, chosen.changed_files) == (2, Path("changed.txt"))


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, False), ({"CPCI_KEEP_WORLDS": ""}, False), ({"CPCI_KEEP_WORLDS": "1"}, True)],
)
def test_keep_worlds_comes_from_its_environment_variable(
    pytester: pytest.Pytester, env: dict[str, str], expected: bool
) -> None:
    assert resolve(pytester.parseconfig(), environ=env).keep_worlds is expected


def test_bad_ini_value_names_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ncpci_batch_size = -3\n")
    with pytest.raises(pytest.UsageError, match=r"from ini key cpci_batch_size in .*tox.ini"):
        resolve(pytester.parseconfig(), environ={})


def test_a_bad_value_is_a_usage_error_of_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--cpci-batch-size=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cpci-batch-size must be >= 1, got '0'*"])


def test_help_states_the_precedence(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    text = " ".join(result.stdout.str().split())  # undo the help's line wrapping
    assert (
        "(default: no cap); 1 gives a fresh world per config, for bisecting and full isolation "
        "(precedence: --cpci-batch-size > env CP_TEST_BATCH_SIZE > ini cpci_batch_size)" in text
    )


def test_readme_documents_every_setting() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for option in OPTIONS:
        row = next(
            (line for line in readme.splitlines() if line.startswith(f"| `{option.flag}")), ""
        )
        assert row, f"README.md has no settings row for {option.flag}"
        for source in (option.env, option.ini):
            assert source is None or f"`{source}`" in row, f"{option.flag}: {source} not in README"
