"""The batched distributed test runner (a pytest plugin); see `cpci.runner.plugin`."""

from cpci.runner.dist import DistContext

__all__ = ["DistContext"]
