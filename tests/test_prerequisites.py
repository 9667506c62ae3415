"""A missing prerequisite skips saying so, whether a test or a whole module asks for it (a module
asks at import: `import_or_skip("torch", ...)` before its tests), and fails where it is promised."""

from __future__ import annotations

import pytest

from tests.prerequisites import PREREQUISITES, required

MODULE = """
from tests.prerequisites import import_or_skip

import_or_skip("cpci_no_such_module", "torch", "this module runs on torch")


def test_needs_the_module() -> None:
    pass
"""
CONFTEST = "from tests.conftest import pytest_terminal_summary\n"


def test_a_module_without_its_prerequisite_is_skipped_and_counted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CPCI_TEST_REQUIRE", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_torch_module=MODULE)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*1 skipped: no torch*", "*[[]needs torch[]] this module runs on torch*"]
    )


def test_a_promised_prerequisite_that_is_missing_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CPCI_TEST_REQUIRE", "torch")
    pytester.makepyfile(test_torch_module=MODULE)
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*CPCI_TEST_REQUIRE promises torch*"])


def test_a_prerequisite_taken_back_skips_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make test-pythons` promises all but torch: its Pythons have none."""
    monkeypatch.setenv("CPCI_TEST_REQUIRE", "all,-torch,-expecttest")
    assert required() == set(PREREQUISITES) - {"torch", "expecttest"}
    pytester.makepyfile(test_torch_module=MODULE)
    pytester.runpytest().assert_outcomes(skipped=1)


def test_an_unknown_name_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_TEST_REQUIRE", "all,-tourch")
    with pytest.raises(pytest.UsageError, match="names tourch: it takes `all`"):
        required()
