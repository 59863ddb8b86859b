"""``retry_until_stopped``: retries retryable errors, propagates others, gives up only on shutdown."""

from __future__ import annotations

import asyncio

import pytest

from consumers.retry import BatchAbandoned, retry_until_stopped


def test_retryable_errors_are_retried_until_success() -> None:
    calls: list[int] = []
    seen: list[BaseException] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("connection refused")
        return "done"

    async def run() -> str:
        return await retry_until_stopped(
            "write", attempt, asyncio.Event(), initial=0.001, on_retry=seen.append
        )

    assert asyncio.run(run()) == "done"
    assert len(calls) == 3 and [type(e) for e in seen] == [OSError, OSError]


def test_other_errors_propagate_at_once() -> None:
    calls: list[int] = []

    async def attempt() -> None:
        calls.append(1)
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError):
        asyncio.run(retry_until_stopped("write", attempt, asyncio.Event(), initial=0.001))
    assert len(calls) == 1


def test_shutdown_while_failing_abandons_the_batch() -> None:
    async def run() -> None:
        stop = asyncio.Event()

        async def attempt() -> None:
            stop.set()
            raise OSError("still down")

        await retry_until_stopped("write", attempt, stop, initial=0.001)

    with pytest.raises(BatchAbandoned) as raised:
        asyncio.run(run())
    assert isinstance(raised.value.__cause__, OSError)


def test_an_attempt_may_return_any_awaitable() -> None:
    async def run() -> int:
        loop = asyncio.get_running_loop()
        return await retry_until_stopped(
            "lookup", lambda: loop.run_in_executor(None, int, "7"), asyncio.Event()
        )

    assert asyncio.run(run()) == 7
