"""``ledger consume`` output: a human summary on a terminal, JSON log lines otherwise."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.consumer import (
    GROUP_TIMING,
    ROOT,
    consumer_env,
    make_inputs,
    publish,
    publish_raw,
    run_consumer,
)

pytestmark = pytest.mark.integration

POISON = [b"[1, 2, 3]", b"", b"{}"]  # not_an_object, empty_value, unknown_envelope_schema


def _run_on_terminal(args: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[int, str]:
    """Run ``python -m cli ARGS`` with stdout and stderr on a pseudo-terminal; (status, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([master], [], [], 0.5)
            if not readable:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end and everything was read
                break
            if not data:
                break
            chunks.append(data)
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return status, b"".join(chunks).decode(errors="replace")


def _publish_mixed(bootstrap: str, topic: str) -> None:
    publish(bootstrap, topic, [make_inputs(index) for index in range(2)])
    publish_raw(bootstrap, topic, POISON)


def test_consume_on_a_terminal_prints_progress_and_a_summary(
    kafka_bootstrap: str, database_url: str, topic_name: str
) -> None:
    _publish_mixed(kafka_bootstrap, topic_name)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)

    status, output = _run_on_terminal(["consume", "--until-idle", "3", *GROUP_TIMING], env)

    assert status == 0, output
    assert f"consuming {topic_name}:" in output  # the progress line was drawn
    final = output.rsplit("\r\x1b[K", 1)[-1]  # after the last erase of the progress line
    lines = [re.sub(r"\s+", " ", line).strip() for line in final.splitlines()]
    assert lines[0].startswith("ledger consume finished after "), final
    assert "records read 5" in lines
    assert "bundles committed 2" in lines
    assert "rejected 3 (empty_value 1, not_an_object 1, unknown_envelope_schema 1)" in lines
    assert "duplicates 0" in lines and "conflicts 0" in lines
    assert any(line.startswith("lag 0 (p0 0") for line in lines), final
    assert '{"ts"' not in output and "Context impl" not in output


def test_consume_without_a_terminal_writes_json_lines_with_a_summary_event(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path
) -> None:
    _publish_mixed(kafka_bootstrap, topic_name)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)

    process = run_consumer(tmp_path, env)

    text = process.log_path.read_text()
    records = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    assert records and "Context impl" not in text
    (summary,) = [record for record in records if record["event"] == "consume summary"]
    assert summary["outcome"] == "finished"
    assert summary["records_read"] == 5 and summary["committed"] == 2
    assert summary["rejected"] == {"empty_value": 1, "not_an_object": 1, "unknown_envelope_schema": 1}
    assert summary["duplicates"] == 0 and summary["conflicts"] == 0
    assert sum(summary["lag"].values()) == 0
