"""GitHub side of cpci: the REST client, the PR comment, the check run, file-consistency rules
(file by file, or function by function for a pair of Python files).

The service's webhook route drives these through `cpci.github.bot.refresh`; the Action and other
tools can use the client and the renderers directly.
"""

from cpci.github.auth import AppAuth, TokenAuth
from cpci.github.client import GitHubClient
from cpci.github.comment import CommentOptions, render
from cpci.github.consistency import (
    Acknowledgements,
    ConsistencyResult,
    Finding,
    acknowledgements,
    evaluate,
)
from cpci.github.drift import FunctionDrift, FunctionRef
from cpci.github.errors import GitHubError
from cpci.github.gate import FailOn, gate
from cpci.github.pair_files import GitHubPairReader, GitPairReader, PairReader
from cpci.github.publish import CommentMode, check_run_fields, publish_check, upsert_comment
from cpci.github.rules import FixMarkers, Rule, RulesError, RuleSet, parse_rules

__all__ = [
    "Acknowledgements",
    "AppAuth",
    "CommentMode",
    "CommentOptions",
    "ConsistencyResult",
    "FailOn",
    "Finding",
    "FixMarkers",
    "FunctionDrift",
    "FunctionRef",
    "GitHubClient",
    "GitHubError",
    "GitHubPairReader",
    "GitPairReader",
    "PairReader",
    "Rule",
    "RuleSet",
    "RulesError",
    "TokenAuth",
    "acknowledgements",
    "check_run_fields",
    "evaluate",
    "gate",
    "parse_rules",
    "publish_check",
    "render",
    "upsert_comment",
]
