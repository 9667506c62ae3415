"""Pure functions over histories: flakiness, infra signatures, shifts, verdicts, the PR report."""
