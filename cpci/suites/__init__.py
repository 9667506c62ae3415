"""Test suites shipped with cpci, runnable with `pytest --pyargs cpci.suites.<name>`."""
