"""How a world's ranks agree on each config's outcome, over the world's store.

Each rank sets its `RankPayload` under the round's key; rank 0 waits for every rank's, merges
them (`cpci.runner.wire.agreement`), appends the `AgreedRecord` to the world's outcomes file, then
sets the round's "agreed" key that every other rank waits for: a store barrier, so no rank
begins the next config before all have finished this one. No process group is involved, so a
test that destroys (or re-creates) the default process group cannot disturb the agreement.

A payload rank 0 cannot accept (a rank of an older cpci, a test that wrote its own) stands for
an `error` of that rank naming the refused fields: it fails that config, never the world.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError

from cpci.runner.wire.agreement import agreed_record
from cpci.runner.wire.journal import JournalWriter
from cpci.runner.wire.protocol import RankPayload
from cpci.runner.wire.rank_errors import refusal

#: The keys of the control plane live under this prefix of the world's store.
PREFIX = "cpci/control"


class ControlPlane:
    """One rank's end of the agreement; every rank calls `agree` for the same configs in order."""

    def __init__(
        self, store: Any, *, rank: int, world_size: int, agreed_file: JournalWriter | None
    ) -> None:
        import torch.distributed as dist

        self._store = dist.PrefixStore(PREFIX, store)
        self._rank = rank
        self._world_size = world_size
        self._agreed_file = agreed_file  # rank 0's
        self._round = 0

    def agree(self, index: int, payload: RankPayload, started: float) -> None:
        """Hand this rank's view of config `index` over; return once every rank has."""
        self._round += 1
        here = f"{self._round}"
        self._store.set(f"{here}/payload/{self._rank}", payload.model_dump_json())
        if self._rank == 0:
            keys = [f"{here}/payload/{r}" for r in range(self._world_size)]
            self._store.wait(keys)
            payloads = [_accepted(r, self._store.get(k)) for r, k in enumerate(keys)]
            for key in keys:
                self._store.delete_key(key)
            # The wall clock may step back while a config runs; a duration is never negative.
            record = agreed_record(index, payloads, duration_s=max(0.0, time.time() - started))
            if self._agreed_file is not None:
                self._agreed_file.write(record)
            if self._round > 1:  # every rank got past the last round's key: it set this one's
                self._store.delete_key(f"{self._round - 1}/agreed")
            self._store.set(f"{here}/agreed", "1")
        else:
            self._store.wait([f"{here}/agreed"])


def _accepted(rank: int, raw: bytes) -> RankPayload:
    """Rank `rank`'s payload, or an `error` in its place naming what could not be accepted."""
    try:
        return RankPayload.model_validate_json(raw)
    except ValidationError as exc:
        error = refusal(rank, f"rank {rank}'s report of this config", exc)
        return RankPayload(rank=rank, outcome="error", reports=[], errors=[error], metrics={})
