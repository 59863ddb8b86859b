"""``ledger up`` then the separate commands a new user would try one by one, then ``ledger down``.

Every command runs in its own process with no LEDGER_* variable set, some from the project
directory and some from another one: the default per-user state dir (``$XDG_STATE_HOME/ledger``;
each test points XDG_STATE_HOME at its own temporary directory) is how they find the services.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from cli.commands import command_names
from devstack.stack import default_corpus_dir, embedded_server_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

COMMAND_TIMEOUT = 90  # each command takes seconds; this bounds a hang


def ledger(cwd: Path, *args: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` in ``cwd`` with no LEDGER_* variable; XDG_STATE_HOME is ``cwd``'s sibling."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env["XDG_STATE_HOME"] = str(cwd.parent / "state-home")
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must have succeeded."""
    assert done.returncode == 0, f"{done.args}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A directory to run in; ``ledger down`` runs at the end whatever happened."""
    project = tmp_path / "project"
    project.mkdir()
    try:
        yield project
    finally:
        ledger(project, "down", timeout=60)


@pytest.fixture
def elsewhere(workdir: Path) -> Path:
    """Another directory next to ``workdir`` (same state home), far from the project."""
    other = workdir.parent / "elsewhere"
    other.mkdir()
    return other


def server_pids(up_output: str) -> list[int]:
    """The pids ``ledger up`` printed."""
    pids = [int(pid) for pid in re.findall(r"^\s+(?:postgres|broker)\s+pid (\d+)", up_output, re.M)]
    assert len(pids) == 2, up_output
    return pids


def test_up_publish_consume_query_down(workdir: Path, elsewhere: Path) -> None:
    corpus = default_corpus_dir()
    state_dir = workdir.parent / "state-home" / "ledger"

    up = ok(ledger(workdir, "up"))
    url = re.search(r"^database URL\s+(postgresql://\S+)$", up, re.M)
    assert url, up
    assert re.search(r'^psql\s+\S*psql "postgresql://postgres@127\.0\.0\.1:\d+/ledger"$', up, re.M), up
    assert re.search(r"^bootstrap\s+127\.0\.0\.1:\d+$", up, re.M), up
    pids = server_pids(up)
    assert (state_dir / "postgres.json").is_file() and (state_dir / "broker.json").is_file()
    assert not (workdir / ".ledger").exists()

    status = ok(ledger(elsewhere, "status"))  # found from another directory
    assert re.search(r"postgres\s+running\s+pid \d+", status) and re.search(r"broker\s+running", status)
    assert server_pids(ok(ledger(workdir, "up"))) == pids  # a second `up` adopts the running servers

    bundles = sorted(str(path) for path in (corpus / "bundles").glob("*.json"))
    poison = sorted(str(path) for path in (corpus / "poison").glob("*.json"))
    ok(ledger(workdir, "publish", *bundles))
    ok(ledger(workdir, "publish", "--raw", *poison))
    ok(ledger(workdir, "consume", "--until-idle", "3"))

    with psycopg.connect(url.group(1), connect_timeout=10) as conn:
        outcomes: dict[str, str] = dict(
            conn.execute("SELECT market_id, outcome FROM ledger.verdicts").fetchall()
        )
        reasons = sorted(row[0] for row in conn.execute("SELECT reason_code FROM ledger.rejections"))
        steps = conn.execute("SELECT count(*) FROM ledger.trace_steps").fetchone()
    assert len(outcomes) == len(bundles)
    assert outcomes["mk_btc_above_100k_20260201_conflict"] == "YES"
    assert outcomes["mk_btc_above_100k_q3of3"] == "INVALID"
    assert reasons == ["invalid_json", "non_finite_number"]
    assert steps is not None and steps[0] > 0

    offered = command_names()
    replayed = ok(ledger(elsewhere, "replay", "--all"))  # from another directory: same ledger
    assert re.search(rf"identical\s+{len(bundles)}\b", replayed), replayed
    if "verify" in offered:
        ok(ledger(elsewhere, "verify"))

    down = ok(ledger(workdir, "down"))
    assert "stopped postgres, broker" in down
    stopped = ledger(workdir, "status")
    assert stopped.returncode == 1  # what status checks (the services run) failed
    assert re.search(r"postgres\s+stopped", stopped.stdout) and re.search(r"broker\s+stopped", stopped.stdout)
    assert embedded_server_processes(state_dir) == []
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_status_before_up_and_down_without_up(workdir: Path) -> None:
    stopped = ledger(workdir, "status")
    assert stopped.returncode == 1  # what status checks (the services run) failed
    assert re.search(r"postgres\s+stopped", stopped.stdout) and "ledger up" in stopped.stdout
    assert "nothing was running" in ok(ledger(workdir, "down"))


def test_a_read_command_with_nothing_running_says_so_in_one_line(workdir: Path) -> None:
    for command in (["replay", "--all"], ["verify"], ["prove", "1"]):
        done = ledger(workdir, *command)
        assert done.returncode == 2, done  # an environment error: no database
        [line] = done.stderr.strip().splitlines()
        assert "nothing runs in" in line and "`ledger up`" in line and "LEDGER_DATABASE_URL" in line, line
    assert not (workdir.parent / "state-home" / "ledger" / "postgres").exists()  # no empty cluster made
