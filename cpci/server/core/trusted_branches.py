"""Which branches' runs may judge a pull request: the trusted branches.

A branch run is evidence for everyone who compares with it: a PR's baseline, its timings, its
configs' flakiness and the same-commit evidence all come from runs of the branch the PR merges
into. A repository that runs CI on every pushed branch must not feed work in progress into
everyone's verdicts, so only *trusted* branches count: those matching `CPCI_TRUSTED_BRANCHES`
(globs such as `release/*`: `*` stays within one `/`-separated part, as in GitHub's branch
protection rules), by default the repository's default branch alone (GitHub reports it in every
webhook; `main` until it has). Other branches' runs are stored and shown, and count for nobody
but themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from cpci.github.rules import Glob, glob_pattern

#: The default branch assumed until GitHub reports the repository's own.
FALLBACK_DEFAULT = "main"
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class TrustedBranches:
    """The trusted-branch rule of one service: `patterns` (empty: the default branch only)."""

    patterns: tuple[str, ...] = ()

    @cached_property
    def _globs(self) -> tuple[Glob, ...]:
        return tuple(glob_pattern(p) for p in self.patterns)

    def trusts(self, branch: str | None, default_branch: str | None) -> bool:
        """Whether runs of `branch` may judge PRs, in a repository whose default branch GitHub
        reports as `default_branch` (None: not reported yet)."""
        if branch is None:
            return False
        if not self.patterns:
            return branch == (default_branch or FALLBACK_DEFAULT)
        return any(glob.fullmatch(branch) for glob in self._globs)

    def default_branch(self, default_branch: str | None) -> str:
        """The branch a PR run that names no base branch (an older uploader) is compared with,
        and the one pages show first: the repository's default branch when it is trusted, else
        the first trusted branch named without a wildcard."""
        chosen = default_branch or FALLBACK_DEFAULT
        if self.trusts(chosen, default_branch):
            return chosen
        literal = next((p for p in self.patterns if not _GLOB_CHARS & set(p)), None)
        return literal or chosen

    def describe(self) -> str:
        """The rule in words, for a reason that says why a branch does not count."""
        if not self.patterns:
            return "only the repository's default branch (CPCI_TRUSTED_BRANCHES is not set)"
        return f"CPCI_TRUSTED_BRANCHES: {', '.join(self.patterns)}"
