"""DTensor tests written against torch's own harness (`DTensorTestBase`, `@with_comms`), unchanged.

They spawn their own world per test under plain pytest; with `--cpci-testcases=shared` (this
repo's ini sets it) every rank of a cpci world runs them instead: `cpci test --pyargs
cpci.suites.dtensor --cpci-testcases=shared`. torch's test harness needs `expecttest`.
"""
