"""CommitChain: several audited batches in flight, committed strictly in order, nothing after a fence."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from consumers.batch import BatchWriter, CommitChain, PreparedBatch


class RecordingWriter:
    """Stands in for BatchWriter.write: records start/end order; answers per batch (True, False or raise)."""

    def __init__(self, answers: dict[int, Any]) -> None:
        self.answers = answers
        self.events: list[str] = []
        self.release: dict[int, asyncio.Event] = {}

    async def write(self, prepared: PreparedBatch) -> bool:
        number = int(prepared.started)
        self.events.append(f"start {number}")
        gate = self.release.setdefault(number, asyncio.Event())
        await gate.wait()
        self.events.append(f"end {number}")
        answer = self.answers.get(number, True)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)


def _batch(number: int) -> PreparedBatch:
    return PreparedBatch({}, [], [], float(number), 0.0)


def _chain(writer: RecordingWriter, depth: int) -> CommitChain:
    return CommitChain(cast(BatchWriter, writer), depth)


async def _open_all(writer: RecordingWriter, numbers: list[int]) -> None:
    for number in numbers:
        await asyncio.sleep(0.01)
        writer.release.setdefault(number, asyncio.Event()).set()


def test_batches_commit_one_after_another_in_hand_over_order() -> None:
    async def scenario() -> list[str]:
        writer = RecordingWriter({})
        chain = _chain(writer, depth=3)
        for number in (1, 2, 3):
            chain.hand_over(_batch(number))
        assert chain.full and len(chain) == 3
        await asyncio.sleep(0.01)
        assert writer.events == ["start 1"]  # 2 and 3 wait for 1, even though they are in flight
        opener = asyncio.create_task(_open_all(writer, [1, 2, 3]))
        assert await chain.settle(keep=0)
        await opener
        return writer.events

    assert asyncio.run(scenario()) == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]


def test_settle_keeps_the_newest_commits_in_flight() -> None:
    async def scenario() -> tuple[bool, int]:
        writer = RecordingWriter({})
        chain = _chain(writer, depth=2)
        chain.hand_over(_batch(1))
        chain.hand_over(_batch(2))
        writer.release.setdefault(1, asyncio.Event()).set()
        ok = await chain.settle(keep=1)
        remaining = len(chain)
        writer.release.setdefault(2, asyncio.Event()).set()
        await chain.settle()
        return ok, remaining

    assert asyncio.run(scenario()) == (True, 1)


def test_nothing_is_written_behind_a_fenced_batch() -> None:
    async def scenario() -> tuple[bool, list[str], int]:
        writer = RecordingWriter({1: False})
        chain = _chain(writer, depth=3)
        for number in (1, 2, 3):
            chain.hand_over(_batch(number))
        writer.release.setdefault(1, asyncio.Event()).set()
        ok = await chain.settle(keep=2)
        return ok, writer.events, len(chain)

    assert asyncio.run(scenario()) == (False, ["start 1", "end 1"], 0)


def test_a_commit_error_is_raised_and_nothing_is_written_after_it() -> None:
    async def scenario() -> list[str]:
        writer = RecordingWriter({1: RuntimeError("fatal ledger error")})
        chain = _chain(writer, depth=2)
        chain.hand_over(_batch(1))
        chain.hand_over(_batch(2))
        writer.release.setdefault(1, asyncio.Event()).set()
        with pytest.raises(RuntimeError, match="fatal ledger error"):
            await chain.settle()
        assert len(chain) == 0 and not chain.unfinished()
        return writer.events

    assert asyncio.run(scenario()) == ["start 1", "end 1"]
