"""cpci: CI for distributed GPU test suites."""

__version__ = "0.1.0"
