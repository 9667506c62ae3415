"""Uploading shards: stored once, conflicts named, bad input refused with nothing written."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from cpci.schema import ENVIRONMENT_LENGTHS, Environment, OrderDependence
from cpci.server.models import Config, EnvironmentFingerprint, Result, Run, Shard
from tests.builders import REPO, as_json, envelope, nodeid, record, send, upload
from tests.server.databases import ClientFactory
from tests.server.stored import stored_results


def altered(result: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The body of a one-result upload with `fields` (and its result's `result`) changed by
    hand, as no uploader would send it."""
    sent_body = as_json(envelope([record("p2p")]))
    sent_body.update(fields)
    sent_body["results"][0].update(result or {})
    return sent_body


def counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            model.__name__: session.exec(select(func.count()).select_from(model)).one()
            for model in (Run, Shard, Config, Result)
        }


def test_upload_stores_every_result_with_its_details(client: TestClient, engine: Engine) -> None:
    body = envelope(
        [
            record("p2p", metrics={"max_abs_err": 1e-3}, params={"comm": "p2p"}),
            record("a2a", "crashed", message="rank 1 died", duration_s=3.5, attempt=2),
        ],
        shard_total=2,
    )
    receipt = upload(client, body)
    assert receipt.status == "stored"
    assert receipt.results == 2
    assert receipt.shards.text == "1/2 shards reported"
    assert receipt.shards.missing == [1]
    with Session(engine) as session:
        rows = stored_results(session)
        assert [(r.outcome, r.attempt, r.duration_s) for r in rows] == [
            ("passed", 1, 1.0),
            ("crashed", 2, 3.5),
        ]
        assert rows[0].metrics == {"max_abs_err": 1e-3}
        assert rows[1].rank_errors is not None
        assert rows[1].rank_errors[0]["message"] == "rank 1 died"
        config = session.exec(select(Config).where(Config.id == rows[0].config_id)).one()
        assert config.params == {"comm": "p2p"}


def test_same_shard_twice_stores_nothing_twice(client: TestClient, engine: Engine) -> None:
    body = envelope([record("p2p"), record("a2a")])
    upload(client, body)
    before = counts(engine)
    # Key order and whitespace do not matter: the content does.
    again = client.post(
        "/api/v1/uploads",
        content=json.dumps(dict(reversed(list(as_json(body).items())))),
        headers={"content-type": "application/json"},
    )
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "duplicate"
    assert counts(engine) == before


def test_different_body_for_same_shard_is_a_conflict(client: TestClient, engine: Engine) -> None:
    upload(client, envelope([record("p2p")]))
    before = counts(engine)
    response = send(client, envelope([record("p2p", "failed")]))
    assert response.status_code == 409
    assert "shard 0 of run 100 attempt 1" in response.json()["detail"]
    assert "new ci_attempt" in response.json()["detail"]
    assert counts(engine) == before


def test_shards_disagreeing_on_run_fields_conflict(client: TestClient) -> None:
    upload(client, envelope([record("p2p")], shard_total=2))
    response = send(client, envelope([record("a2a")], shard_index=1, shard_total=3))
    assert response.status_code == 409
    assert "shard_total: stored 2, sent 3" in response.json()["detail"]


def test_oversized_upload_is_413_and_writes_nothing(
    make_client: ClientFactory, token: str, engine: Engine
) -> None:
    client = make_client(max_upload_bytes=2048)
    client.headers["Authorization"] = f"Bearer {token}"
    response = send(client, envelope([record(f"c{i}") for i in range(50)]))
    assert response.status_code == 413
    assert "CPCI_MAX_UPLOAD_BYTES" in response.json()["detail"]
    assert counts(engine)["Result"] == 0


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (altered(result={"outcome": "exploded"}), "results[0].outcome"),
        (altered(result={"duration_s": -1}), "results[0].duration_s"),
        (altered(commit="not-a-sha"), "commit"),
        (altered(shard_index=2, shard_total=2), "shard_index"),
        (altered(result={"surprise": 1}), "results[0].surprise"),
        # Longer than its column: PostgreSQL would refuse the row after the upload was accepted.
        (altered(environment={"gpu": "G" * 201}), "environment.gpu"),
    ],
)
def test_schema_errors_are_422_with_the_field_path(
    client: TestClient, engine: Engine, body: dict[str, Any], path: str
) -> None:
    response = send(client, body)
    assert response.status_code == 422, response.text
    assert path in [e["path"] for e in response.json()["errors"]]
    assert response.json()["detail"].startswith(path)
    assert counts(engine)["Run"] == 0


def test_the_environment_table_holds_exactly_what_the_wire_type_allows() -> None:
    columns = {c.name: c for c in EnvironmentFingerprint.__table__.columns}  # type: ignore[attr-defined]
    assert set(Environment.model_fields) == set(ENVIRONMENT_LENGTHS)
    assert set(columns) - {"id", "fingerprint"} == set(ENVIRONMENT_LENGTHS)
    assert {name: columns[name].type.length for name in ENVIRONMENT_LENGTHS} == ENVIRONMENT_LENGTHS


def test_not_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/api/v1/uploads", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_payload"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (altered(schema="cpci.run/2"), "cpci.run/1"),
        (altered(result={"schema": "cpci.result/9"}), "cpci.result/1"),
    ],
)
def test_unknown_schema_version_is_400_naming_the_supported(
    client: TestClient, body: dict[str, Any], named: str
) -> None:
    response = send(client, body)
    assert response.status_code == 400
    assert response.json()["code"] == "unsupported_schema"
    assert named in response.json()["detail"]


def test_failure_mid_upload_writes_nothing(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpci.server.crud.ingest as ingest

    real = ingest._ensure_configs

    def configs_then_outage(**kwargs: Any) -> dict[str, int]:
        real(**kwargs)  # the run, shard and configs are written by now...
        raise OperationalError("INSERT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(ingest, "_ensure_configs", configs_then_outage)
    response = send(client, envelope([record("p2p")]))
    assert response.status_code == 503
    assert "retry" in response.json()["detail"]
    assert counts(engine) == {"Run": 0, "Shard": 0, "Config": 0, "Result": 0}


def test_concurrent_shards_of_a_new_run_are_all_stored(client: TestClient, engine: Engine) -> None:
    total = 6
    statuses: list[int] = []
    barrier = threading.Barrier(total)

    def send_shard(index: int) -> None:
        body = envelope(
            [record("shared"), record(f"own{index}")], shard_index=index, shard_total=total
        )
        barrier.wait()
        statuses.append(send(client, body).status_code)

    threads = [threading.Thread(target=send_shard, args=(i,)) for i in range(total)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [201] * total
    assert counts(engine) == {"Run": 1, "Shard": total, "Config": total + 1, "Result": 2 * total}
    runs = client.get(f"/api/v1/repos/{REPO}/runs/100").json()
    assert runs["run"]["shards"]["text"] == f"{total}/{total} shards reported"


def test_awkward_text_survives_the_bulk_paths(client: TestClient, engine: Engine) -> None:
    """Tabs, newlines, backslashes, quotes and non-ASCII go through COPY and executemany."""
    detail = 'Traceback:\n\tFile "a\\b.py", line 1\r\n  ✗ max |Δ| = 3e-2\x7f \\N \\.'
    errors = [{"rank": 1, "phase": "call", "message": "boom\tbad", "detail": detail}]
    body = envelope(
        [
            record(
                "odd",
                "failed",
                rank_errors=errors,
                params={"name": "a'b\"c\\d\n"},
                metrics={"ε": 1.5},
                batch={"index": 0, "world": 1, "size": 2},
            ),
            record("plain"),
        ]
    )
    upload(client, body)
    with Session(engine) as session:
        rows = stored_results(session)
        assert rows[0].rank_errors == errors
        assert rows[0].metrics == {"ε": 1.5}
        assert rows[0].batch is not None
        assert rows[0].batch.items() >= {"index": 0, "world": 1, "size": 2}.items()
        assert (rows[1].rank_errors, rows[1].metrics, rows[1].batch) == (None, None, None)
        config = session.exec(select(Config).where(Config.id == rows[0].config_id)).one()
        assert config.params == {"name": "a'b\"c\\d\n"}
    assert upload(client, body, expect=200).status == "duplicate"


def test_a_shard_without_results_is_stored(client: TestClient, engine: Engine) -> None:
    receipt = upload(client, envelope([], shard_total=2))
    assert (receipt.status, receipt.results) == ("stored", 0)
    assert counts(engine) == {"Run": 1, "Shard": 1, "Config": 0, "Result": 0}


def test_a_shard_stored_before_the_schema_grew_is_a_duplicate_when_sent_again(
    client: TestClient, engine: Engine
) -> None:
    """The previous release hashed every field its schema had; a spooled upload it stored and
    this one receives again (no base_branch, merge_commit) must not be a conflict."""
    body = envelope([record("p2p")])
    upload(client, body)
    then_sent = as_json(body)
    for added in ("base_branch", "merge_commit"):
        del then_sent[added]
    then = hashlib.sha256(json.dumps(then_sent, separators=(",", ":")).encode()).hexdigest()
    with Session(engine) as session:
        shard = session.exec(select(Shard)).one()
        shard.body_sha256 = then
        session.add(shard)
        session.commit()
    assert upload(client, body, expect=200).status == "duplicate"
    changed = send(client, envelope([record("p2p", "failed")]))
    assert changed.status_code == 409


def test_why_reruns_happened_and_what_bisection_found_are_stored(
    client: TestClient, engine: Engine
) -> None:
    """The runner's rerun and bisection fields reach their columns on both bulk paths; a record
    without them stores none, and hashes as it did before they existed."""
    found = OrderDependence(polluters=[nodeid("cache-writer")], replays=7, searched=64)
    failed = record("p2p", "failed", message="AssertionError: boom", rerun_reason=None)
    rerun = record(
        "p2p",
        "failed",
        message="AssertionError: boom",
        attempt=2,
        rerun_reason="chance 45% >= 20%: rerun 1 of at most 2",
        stop_reason="decided after 2 attempt(s)",
        arrival=True,
        order_dependence=found,
    )
    body = envelope([failed, rerun, record("plain")])
    for added in ("rerun_reason", "stop_reason", "arrival", "order_dependence"):
        assert added not in as_json(envelope([failed]))["results"][0]
    upload(client, body)
    with Session(engine) as session:
        rows = stored_results(session)
    assert [(r.rerun_reason, r.stop_reason, r.arrival, r.order_dependence) for r in rows] == [
        (None, None, False, None),
        (rerun.rerun_reason, rerun.stop_reason, True, found.model_dump()),
        (None, None, False, None),
    ]
    assert upload(client, body, expect=200).status == "duplicate"
