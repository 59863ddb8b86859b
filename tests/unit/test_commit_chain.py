"""CommitChain: several audited batches in flight, committed strictly in order, nothing after a fence;
a batch audited while the newest one waits its turn joins it (group commit) only where it continues it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from consumers.batch import BatchWriter, CommitChain, PreparedBatch, merged
from consumers.processing import Outcome
from ledger.store.records import OffsetAdvance


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


# --- group commit: a batch audited while the newest one waits its turn joins it -------------


def _advance(partition: int, start: int, end: int, incarnation: int | None = 1) -> OffsetAdvance:
    return OffsetAdvance("g", "t", partition, start, end, incarnation)


def _span(number: int, *advances: OffsetAdvance) -> PreparedBatch:
    """Batch ``number`` with one placeholder outcome per record its advances cover."""
    records = sum(advance.next_offset - advance.from_offset for advance in advances)
    outcomes = [cast(Outcome, (number, index)) for index in range(records)]
    return PreparedBatch({}, outcomes, list(advances), float(number), 0.0)


class WrittenWriter(RecordingWriter):
    """Also keeps every batch it was asked to write."""

    def __init__(self, answers: dict[int, Any]) -> None:
        super().__init__(answers)
        self.written: list[PreparedBatch] = []

    async def write(self, prepared: PreparedBatch) -> bool:
        self.written.append(prepared)
        return await super().write(prepared)


def test_a_batch_joins_the_one_waiting_its_turn_and_they_commit_as_one() -> None:
    async def scenario() -> tuple[bool, list[str], list[PreparedBatch]]:
        writer = WrittenWriter({})
        chain = CommitChain(cast(BatchWriter, writer), depth=2, merge_records=100)
        chain.hand_over(_span(1, _advance(0, 0, 5)))
        chain.hand_over(_span(2, _advance(0, 5, 8)))
        await asyncio.sleep(0.01)
        joined = chain.join(_span(3, _advance(0, 8, 10), _advance(1, 0, 4)))
        assert len(chain) == 2
        opener = asyncio.create_task(_open_all(writer, [1, 2]))
        assert await chain.settle()
        await opener
        return joined, writer.events, writer.written

    joined, events, written = asyncio.run(scenario())
    assert joined
    assert events == ["start 1", "end 1", "start 2", "end 2"]
    second = written[1]
    assert second.offsets == [_advance(0, 5, 10), _advance(1, 0, 4)]
    assert list(map(tuple, cast(list[Any], second.outcomes))) == [(2, i) for i in range(3)] + [
        (3, i) for i in range(6)
    ]


def test_nothing_joins_a_batch_that_already_writes_or_would_grow_too_large() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        writer = WrittenWriter({})
        chain = CommitChain(cast(BatchWriter, writer), depth=2, merge_records=6)
        chain.hand_over(_span(1, _advance(0, 0, 5)))
        await asyncio.sleep(0.01)
        writing = chain.join(_span(2, _advance(0, 5, 6)))  # batch 1 has started writing
        chain.hand_over(_span(2, _advance(0, 5, 9)))
        too_large = chain.join(_span(3, _advance(0, 9, 12)))  # 4 + 3 > 6
        fits = chain.join(_span(3, _advance(0, 9, 11)))  # 4 + 2 <= 6
        opener = asyncio.create_task(_open_all(writer, [1, 2]))
        await chain.settle()
        await opener
        return writing, too_large, fits

    assert asyncio.run(scenario()) == (False, False, True)


def test_batches_that_do_not_continue_each_other_are_never_merged() -> None:
    first = _span(1, _advance(0, 0, 5))
    assert merged(first, _span(2, _advance(0, 6, 8))) is None  # a gap: offset 5 would be skipped
    assert merged(first, _span(2, _advance(0, 4, 8))) is None  # an overlap
    assert merged(first, _span(2, _advance(0, 5, 8, incarnation=2))) is None  # another source log
    joined = merged(first, _span(2, _advance(0, 5, 8)))
    assert joined is not None and joined.offsets == [_advance(0, 0, 8)]


def test_a_batch_joined_behind_a_fenced_one_is_never_written() -> None:
    async def scenario() -> tuple[bool, bool, list[str]]:
        writer = WrittenWriter({1: False})
        chain = CommitChain(cast(BatchWriter, writer), depth=2, merge_records=100)
        chain.hand_over(_span(1, _advance(0, 0, 5)))
        chain.hand_over(_span(2, _advance(0, 5, 8)))
        joined = chain.join(_span(3, _advance(0, 8, 9)))
        writer.release.setdefault(1, asyncio.Event()).set()
        ok = await chain.settle()
        return joined, ok, writer.events

    assert asyncio.run(scenario()) == (True, False, ["start 1", "end 1"])
