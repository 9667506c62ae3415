"""The parent's side: the pytest process that plans, schedules worlds and reports each config.

Nothing here runs in a rank. It plans at collection (`session_plan`, `planning`), feeds worlds from
one queue per group (`scheduler`), watches them through the files their ranks write
(`launched_world`, `world_watch`), turns what they agree or how they ended into attempt records
(`attempt_records`, `attempts`) and hands each to pytest (`pytest_reports`) and the results file.
"""
