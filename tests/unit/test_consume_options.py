"""``ledger consume --max-commit-records``: parsed as a record count, never a negative one."""

from __future__ import annotations

import pytest

from cli.parser import command_parsers
from consumers.consumer_config import ConsumerConfig


def test_the_default_is_the_consumer_config_default() -> None:
    args = command_parsers()["consume"].parse_args([])
    assert args.max_commit_records == ConsumerConfig.max_commit_records


def test_a_record_count_is_taken() -> None:
    args = command_parsers()["consume"].parse_args(["--max-commit-records", "1000"])
    assert args.max_commit_records == 1000
    assert command_parsers()["consume"].parse_args(["--max-commit-records", "0"]).max_commit_records == 0


def test_a_negative_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        command_parsers()["consume"].parse_args(["--max-commit-records", "-1"])
    assert exited.value.code == 2
    assert "must be 0 or more" in capsys.readouterr().err
