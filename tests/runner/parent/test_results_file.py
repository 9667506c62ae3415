"""The results file: one run's `cpci.result/1` lines, each whole, readable by the uploader."""

from __future__ import annotations

import threading
from pathlib import Path

from cpci.runner.parent.results_file import ResultsFile
from cpci.schema import ResultRecord, read_results

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def _record(n: int) -> ResultRecord:
    return ResultRecord(nodeid=f"t.py::test_{n}", world_size=2, outcome="passed", duration_s=0.1)


def test_a_run_starts_its_results_file_afresh(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.jsonl"  # its folder is made too
    first = ResultsFile(path)
    first.append(_record(0))
    first.close()
    second = ResultsFile(path)
    second.append(_record(1))
    second.close()
    assert path.read_text() == _record(1).to_json_line()


def test_records_from_the_scheduler_threads_come_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    results = ResultsFile(path)

    def append(start: int) -> None:
        for n in range(start, start + 50):
            results.append(_record(n))

    threads = [threading.Thread(target=append, args=(start,)) for start in (0, 50, 100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.close()
    records = read_results(str(path))
    assert sorted(r.nodeid for r in records) == sorted(f"t.py::test_{n}" for n in range(150))
