"""Context-parallel attention checked against single-process SDPA, config by config.

Run it on your own runners: `cpci test --pyargs cpci.suites.cp`.
"""
