"""The one logging setup (``consumers.logs``) and the one progress renderer (``cli.progress``)."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from cli.progress import CountProgress, LiveLine, StepProgress
from consumers.logs import configure_logging


class Terminal(io.StringIO):
    """A stream that says it is a terminal (what a pty is to the code under test)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_auto_is_json_off_a_terminal_and_text_on_one() -> None:
    piped, terminal = io.StringIO(), Terminal()
    assert configure_logging("info", piped, log_format="auto") == "json"
    logging.getLogger("consumers.test").info("batch committed", extra={"partition": 3})
    record = json.loads(piped.getvalue())
    assert (record["level"], record["logger"], record["event"], record["partition"]) == (
        "info",
        "consumers.test",
        "batch committed",
        3,
    )
    assert record["ts"].endswith("Z")

    assert configure_logging("warning", terminal, log_format="auto") == "text"
    logging.getLogger("consumers.test").info("not shown below the level")
    logging.getLogger("consumers.test").warning("broker slow", extra={"retry_in": 0.2})
    assert terminal.getvalue() == "\r\x1b[Kwarning: broker slow (retry_in=0.2)\n"


@pytest.mark.usefixtures("restore_root_logger")
def test_an_unknown_log_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log_format"):
        configure_logging("info", io.StringIO(), log_format="yaml")


def test_steps_off_a_terminal_are_two_plain_lines_each() -> None:
    stream = io.StringIO()
    steps = StepProgress(stream, prefix="ledger up")
    with steps.step("embedded PostgreSQL") as step:
        step.detail = "pid 7, port 5433"
    with pytest.raises(RuntimeError), steps.step("broker"):
        raise RuntimeError("no tansu")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[ledger up] embedded PostgreSQL ..."
    assert lines[1].startswith("[ledger up] embedded PostgreSQL: done in ")
    assert lines[1].endswith("s pid 7, port 5433")
    assert lines[2:3] == ["[ledger up] broker ..."] and "broker: FAILED in" in lines[3]
    assert "\x1b" not in stream.getvalue()


def test_steps_on_a_terminal_are_drawn_by_rich_and_end_with_the_same_closing_line() -> None:
    terminal = Terminal()
    steps = StepProgress(terminal, prefix="ledger demo")
    with steps.step("consuming") as step:
        step.detail = "2/5 records committed"
    out = terminal.getvalue()
    assert "\x1b[" in out and "consuming 2/5 records committed" in out  # the live line, with detail
    assert re.search(
        r"\[ledger demo\] consuming: done in \d+\.\ds 2/5 records committed$", out.splitlines()[-1]
    )


def test_a_count_off_a_terminal_is_the_text_bar_only_when_enabled() -> None:
    stream = io.StringIO()
    bar = CountProgress("replay", stream, enabled=True)
    for done in (1, 2, 3):
        bar(done, 3, done * 10, 0)
    bar.close()
    assert "replay [##############################] 3/3" in stream.getvalue()
    assert stream.getvalue().endswith("\n") and "\x1b" not in stream.getvalue()
    quiet = io.StringIO()
    off = CountProgress("verify", quiet, enabled=False)
    off(1, 1, 1, 0)
    off.close()
    assert quiet.getvalue() == ""


def test_a_count_and_a_live_line_on_a_terminal_are_drawn_by_rich() -> None:
    terminal = Terminal()
    bar = CountProgress("verify", terminal, enabled=True)
    bar(4, 4, 40, 0)
    bar.close()
    assert "verify" in terminal.getvalue() and "4/4" in terminal.getvalue()
    line_out = Terminal()
    line = LiveLine(line_out)
    line.update("consuming t: 1 read")
    line.stop()
    line.stop()  # idempotent
    assert "consuming t: 1 read" in line_out.getvalue()
