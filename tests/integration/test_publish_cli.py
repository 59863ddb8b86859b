"""``ledger publish`` on a real broker: ``--raw`` sends any bytes (a lone surrogate in the market id
included) without a traceback, and a reader that goes away (``| head``) ends the command quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.consumer import ROOT, make_inputs, read_topic

pytestmark = pytest.mark.integration


def _env(bootstrap: str, topic: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LEDGER_KAFKA_BOOTSTRAP": bootstrap, "LEDGER_TOPIC": topic}


def test_publish_raw_sends_a_lone_surrogate_market_id_byte_for_byte(
    kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    document = make_inputs(1)
    text = json.dumps(document).replace(document["prompt_spec"]["market"]["market_id"], "mk_\\ud800", 1)
    path = tmp_path / "surrogate.json"
    path.write_text(text, encoding="ascii")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "publish", "--raw", str(path)],
        env=_env(kafka_bootstrap, topic_name),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith(f"sent {path} -> {topic_name}[")
    [record] = read_topic(kafka_bootstrap, topic_name, 1)
    assert record.value == path.read_bytes()
    assert record.key is None  # "mk_\ud800" has no UTF-8 form: the record travels without a key


def test_publish_into_a_closed_pipe_ends_quietly_after_sending_everything(
    kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    files = []
    for index in range(5):
        path = tmp_path / f"bundle{index}.json"
        path.write_text(json.dumps(make_inputs(index)))
        files.append(str(path))
    child = subprocess.Popen(
        [sys.executable, "-m", "cli", "publish", *files],
        env=_env(kafka_bootstrap, topic_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # `| head -0`: the reader is gone before the first line is printed
    returncode = child.wait(timeout=120)
    stderr = child.stderr.read().decode()
    child.stderr.close()
    assert stderr == ""
    assert returncode == 141  # 128 + SIGPIPE, as a shell reports for `cat big | head`
    assert len(read_topic(kafka_bootstrap, topic_name, 5)) == 5
