"""Issue 5: two `ledger consume` processes in one group split the partitions, with no duplicates."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from ledger.migration import upgrade
from tests.helpers.consumer import (
    GROUP_TIMING,
    ConsumerProcess,
    assert_ledger_exact,
    consumer_env,
    make_inputs,
    publish,
    submission_count,
    wait_until,
)

pytestmark = pytest.mark.integration

N = 400


def latest_assignment(process: ConsumerProcess) -> set[int] | None:
    assigned = process.events("partitions assigned")
    return set(assigned[-1]["partitions"]) if assigned else None


def committed(process: ConsumerProcess) -> list[dict[str, Any]]:
    return process.events("batch committed")


def test_two_members_of_one_group_split_the_work_without_duplicates(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    publish(kafka_bootstrap, topic_name, [make_inputs(0)])  # creates the topic (4 partitions)
    upgrade(database_url)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    members = [
        ConsumerProcess(["--max-records", "25", *GROUP_TIMING], env, tmp_path / f"member{index}.log")
        for index in range(2)
    ]
    try:

        def split() -> bool:
            assignments = [latest_assignment(member) for member in members]
            return (
                all(assignments)
                and len(assignments[0] & assignments[1]) == 0
                and all(  # type: ignore[operator]
                    len(assignment or ()) == 2 for assignment in assignments
                )
            )

        wait_until(split, 60, "both members to own two partitions each")
        documents = [make_inputs(index, markets=32) for index in range(1, N)]
        publish(kafka_bootstrap, topic_name, documents)
        wait_until(lambda: submission_count(database_url) >= N, 180, f"{N} submissions")
        for member in members:
            member.signal(signal.SIGTERM)
        assert [member.wait(60) for member in members] == [0, 0]
    finally:
        for member in members:
            member.stop()

    assert_ledger_exact(database_url, {f"bundle_{index:06d}" for index in range(N)})
    new_per_member = [sum(line["new"] for line in committed(member)) for member in members]
    assert all(count > 0 for count in new_per_member), new_per_member
    assert sum(new_per_member) == N  # every bundle written by exactly one member
    for member in members:  # the process CPU the benchmark reads per member: present and never decreasing
        cpu = [line["cpu_seconds"] for line in member.events("partitions assigned") + committed(member)]
        assert cpu and all(isinstance(seconds, float) and seconds > 0 for seconds in cpu)
        batches = [line["cpu_seconds"] for line in committed(member)]
        assert batches == sorted(batches)
