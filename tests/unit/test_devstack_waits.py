"""The two tenacity waits every development server shares (``devstack.server``)."""

from __future__ import annotations

import pytest

from devstack.extra import EmbeddedServiceError
from devstack.server import NotYet, PortTaken, poll, retry_port_race


def test_poll_returns_what_the_probe_returns_once_it_is_ready() -> None:
    calls: list[int] = []

    def probe() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise NotYet("still starting")
        return "ready"

    assert poll(probe, timeout=30, what="server not ready", first_delay=0.001) == "ready"
    assert len(calls) == 3


def test_poll_gives_up_after_the_timeout_naming_what_and_the_last_error() -> None:
    def never() -> None:
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(EmbeddedServiceError, match=r"^server not ready after 0\.05s: connection refused$"):
        poll(
            never,
            timeout=0.05,
            what="server not ready",
            first_delay=0.001,
            transient=(ConnectionRefusedError,),
        )


def test_poll_does_not_retry_an_error_that_is_not_transient() -> None:
    calls: list[int] = []

    def exited() -> None:
        calls.append(1)
        raise EmbeddedServiceError("postmaster exited during startup")

    with pytest.raises(EmbeddedServiceError, match="exited during startup"):
        poll(exited, timeout=30, what="server not ready", transient=(ConnectionRefusedError,))
    assert calls == [1]


@pytest.mark.parametrize(("fixed_port", "tries"), [(False, 3), (True, 1)])
def test_a_lost_port_race_is_retried_on_a_free_port_only(fixed_port: bool, tries: int) -> None:
    calls: list[int] = []

    def start() -> None:
        calls.append(1)
        raise PortTaken("Address already in use")

    with pytest.raises(PortTaken):
        retry_port_race(start, fixed_port=fixed_port)
    assert len(calls) == tries


def test_any_other_start_failure_is_not_retried() -> None:
    calls: list[int] = []

    def start() -> None:
        calls.append(1)
        raise EmbeddedServiceError("initdb failed")

    with pytest.raises(EmbeddedServiceError, match="initdb failed"):
        retry_port_race(start, fixed_port=False)
    assert calls == [1]
