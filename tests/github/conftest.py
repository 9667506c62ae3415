"""Fixtures: a fake GitHub held to the published contract, a fake clock, a client on both."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from cpci.github.auth import TokenAuth
from cpci.github.client import GitHubClient
from cpci.github.retry import Clock
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub


@dataclass
class FakeClock:
    """Time that moves only when the code under test sleeps."""

    t: float = 1_800_000_000.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds

    def clock(self) -> Clock:
        return Clock(now=self.now, sleep=self.sleep)


@pytest.fixture
def fake() -> FakeGitHub:
    require_reference()
    return FakeGitHub()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(fake: FakeGitHub, clock: FakeClock) -> Iterator[GitHubClient]:
    with GitHubClient(
        TokenAuth("ghs_test"),
        api_url="http://127.0.0.1",
        transport=fake.transport(),
        clock=clock.clock(),
    ) as gh:
        yield gh
