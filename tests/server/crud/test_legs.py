"""Matrix legs over real HTTP: two legs uploading the same shard index are two shards, both
counted in the run's progress; a re-send on one leg is a duplicate, a changed body a 409; a
second environment for a shard without a leg (a hand-written matrix) is a 409 that says to set
the leg, with nothing stored."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from cpci.server import Settings, create_app
from cpci.server.models import Shard
from tests.builders import REPO, as_json, envelope, record, replaced, send
from tests.live_server import serve


@pytest.fixture
def http(engine: Engine, db_url: str, token: str) -> Iterator[httpx.Client]:
    """REPO's token against a real uvicorn serving this test's database."""
    app = create_app(Settings(database_url=db_url), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def test_two_legs_with_the_same_shard_index_are_both_stored(
    http: httpx.Client, engine: Engine
) -> None:
    h100 = envelope([record("p2p")], shard_total=2, leg="gpu,h100")
    a100 = envelope([record("p2p", "failed", message="nan")], shard_total=2, leg="a100,gpu")
    first = send(http, h100)
    assert first.status_code == 201, first.text
    assert first.json()["shards"]["text"] == "1/2 shards reported"
    second = send(http, a100)
    assert second.status_code == 201, second.text
    progress = second.json()["shards"]
    assert progress["text"] == "2/4 shards on 2 legs"
    assert progress["legs"] == ["a100,gpu", "gpu,h100"]
    assert progress["missing_by_leg"] == {"a100,gpu": [1], "gpu,h100": [1]}
    with Session(engine) as session:
        stored = session.exec(select(Shard.leg, Shard.shard_index).order_by(col(Shard.leg))).all()
    assert stored == [("a100,gpu", 0), ("gpu,h100", 0)]
    for leg in ("gpu,h100", "a100,gpu"):
        last = send(http, envelope([], shard_total=2, shard_index=1, leg=leg))
    assert last.json()["shards"] == last.json()["shards"] | {
        "reported": 4,
        "expected": 4,
        "complete": True,
        "text": "4/4 shards on 2 legs",
    }
    summary = http.get(f"/api/v1/repos/{REPO}/runs/100").json()
    assert summary["outcomes"] == {"failed": 1, "passed": 1}
    assert summary["run"]["shards"]["complete"] is True


def test_a_leg_resent_is_a_duplicate_and_a_changed_body_a_conflict(http: httpx.Client) -> None:
    body = envelope([record("p2p")], leg="a100")
    assert send(http, body).status_code == 201
    again = send(http, body)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    changed = send(http, envelope([record("a2a")], leg="a100"))
    assert changed.status_code == 409
    assert "shard 0 on leg 'a100'" in changed.json()["detail"]


H100 = {"torch": "2.4.0", "cuda": "12.4", "gpu": "H100", "backend": "nccl"}
A100 = {**H100, "gpu": "A100"}


def test_a_second_environment_without_a_leg_is_told_to_set_the_leg(
    http: httpx.Client, engine: Engine
) -> None:
    """A hand-written matrix that runs shard 0 on H100 and A100 without `leg`."""
    first = send(http, envelope([record("p2p")], environment=H100))
    assert first.status_code == 201, first.text
    second = envelope([record("p2p", "failed", message="nan")], environment=A100)
    refused = send(http, second)
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert "shard 0 of run 100 attempt 1 was already uploaded from another environment" in detail
    assert "gpu 'H100', now 'A100'" in detail
    assert "neither upload names a matrix leg" in detail
    assert "`cpci upload --leg` / CPCI_LEG, the Action's `leg` input" in detail
    assert "ci_attempt" not in detail, "a rerun is not what happened"
    with Session(engine) as session:
        assert len(session.exec(select(Shard)).all()) == 1, "nothing of it was stored"
    # Told, the job uploads under its leg, and both environments' shards are kept.
    named = send(http, replaced(second, leg="a100"))
    assert named.status_code == 201, named.text
    assert named.json()["shards"]["legs"] == ["", "a100"]


def test_two_environments_sharing_a_leg_name_are_told_to_name_each(http: httpx.Client) -> None:
    body = envelope([record("p2p")], leg="gpu", environment=H100)
    assert send(http, body).status_code == 201
    refused = send(http, replaced(body, environment=A100))
    assert refused.status_code == 409, refused.text
    assert "two matrix jobs share the leg name 'gpu'" in refused.json()["detail"]


def test_an_envelope_without_a_leg_still_validates(http: httpx.Client) -> None:
    body = as_json(envelope([record("p2p")]))
    del body["leg"]  # as an uploader from before legs sends it
    response = send(http, body)
    assert response.status_code == 201, response.text
    assert response.json()["shards"]["legs"] == []


@pytest.mark.parametrize("leg", ["x" * 201, "a\x00b"])
def test_bad_legs_are_422(http: httpx.Client, leg: str) -> None:
    response = send(http, {**as_json(envelope([record("p2p")])), "leg": leg})
    assert response.status_code == 422
    assert "leg" in [e["path"] for e in response.json()["errors"]]


def test_a_declared_leg_that_never_uploads_is_missing(http: httpx.Client) -> None:
    """The workflow names its legs: the report waits for a leg with no upload at all."""
    legs = ["a100,gpu", "gpu,h100"]
    body = envelope([record("p2p")], leg="gpu,h100", legs=legs)
    progress = send(http, body).json()["shards"]
    assert (progress["text"], progress["complete"]) == ("1/2 shards on 2 legs", False)
    assert progress["missing_by_leg"] == {"a100,gpu": [0]}
    other = envelope([record("p2p")], leg="a100,gpu", legs=legs)
    assert send(http, other).json()["shards"]["complete"] is True
    mismatched = envelope([], leg="a100,gpu", shard_index=0, legs=["a100,gpu"], ci_run_id="7")
    assert send(http, mismatched).status_code == 201
    clash = envelope([], leg="gpu,h100", legs=legs, ci_run_id="7")
    response = send(http, clash)
    assert response.status_code == 409
    assert "legs: stored ['a100,gpu']" in response.json()["detail"]
