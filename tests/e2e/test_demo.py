"""``ledger demo`` on a bare machine: no LEDGER_* URLs, a temp state dir, run twice, nothing left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from devstack.stack import default_corpus_dir, embedded_server_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

DEMO_TIMEOUT = 120  # the demo itself takes a few seconds; this bounds a hang
VERDICT_LINES = {
    "mk_btc_above_100k_20260201 ": "YES",
    "mk_btc_above_100k_20260201_conflict": "YES",
    "mk_eth_4000_20260201_sym": "NO",
    "mk_sol_etf_approved_jan2026_b": "NO",
    "mk_btc_above_100k_q3of3": "INVALID",
    "mk_super_bowl_lx_winner": "Philadelphia Eagles",
}


def bare_env(state_dir: Path) -> dict[str, str]:
    """Our environment without any LEDGER_* setting, plus the temp state dir."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env["LEDGER_STATE_DIR"] = str(state_dir)
    return env


def run_demo(state_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ledger demo`` in a child process, as ``make run`` runs it."""
    return subprocess.run(
        [sys.executable, "-m", "cli", "demo"],
        cwd=cwd,
        env=bare_env(state_dir),
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
    )


def server_ports(stderr: str) -> tuple[int, int]:
    """PostgreSQL port and broker port from the demo's progress lines."""
    pg = re.search(r"starting embedded PostgreSQL: done .* port (\d+)", stderr)
    broker = re.search(r"bootstrap 127\.0\.0\.1:(\d+)", stderr)
    assert pg and broker, stderr
    return int(pg.group(1)), int(broker.group(1))


def servers_on(ports: tuple[int, int]) -> list[str]:
    """Live postgres/tansu processes started with one of ``ports``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        if proc.info["name"] not in {"postgres", "tansu"} or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(proc.info["cmdline"] or ())
        if any(f"-p {port}" in cmdline or f"127.0.0.1:{port}" in cmdline for port in ports):
            found.append(f"{proc.pid} {cmdline}")
    return found


def assert_demo_output(done: subprocess.CompletedProcess[str]) -> None:
    """The summary names verdicts, the poison rejections with reason codes, replay and verify."""
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    for market, outcome in VERDICT_LINES.items():
        line = next((line for line in out.splitlines() if market in line), "")
        assert outcome in line, f"{market}: expected {outcome} in {line!r}"
    assert "CONFLICT" in out and "INSUFFICIENT" in out
    assert re.search(r"poison/11_truncated_json\.json .*: invalid_json", out), out
    assert re.search(r"poison/12_nan_price\.json .*: non_finite_number", out), out
    assert re.search(r"ledger replay --all\b.*: identical", out), out
    assert re.search(r"ledger verify --public-key \S+checkpoint\.key\.pub: passed", out), out
    assert re.search(r"signed checkpoint #1 over \d+ entries", out), out
    assert re.search(r'psql\S* "postgresql://postgres@127\.0\.0\.1:\d+/ledger_demo"', out), out
    assert "All " in out and "checks passed" in out
    assert "Traceback" not in done.stderr


def test_demo_runs_twice_on_a_bare_machine_and_leaves_no_server(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    first = run_demo(state_dir, tmp_path)
    assert_demo_output(first)
    first_ports = server_ports(first.stderr)
    for step in ("starting embedded PostgreSQL", "applying migrations", "consuming", "stopping"):
        assert re.search(rf"\[ledger demo\] .*{step}.*: done in \d+\.\ds", first.stderr), first.stderr

    second = run_demo(state_dir, tmp_path)  # re-running is safe: fresh database and broker
    assert_demo_output(second)
    assert "12 submissions" in second.stdout  # the first run's rows are gone

    assert (state_dir / "demo" / "postgres" / "PG_VERSION").is_file()
    assert embedded_server_processes(state_dir) == []
    assert servers_on(first_ports) == [] and servers_on(server_ports(second.stderr)) == []


def test_demo_exits_non_zero_when_a_check_fails(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(default_corpus_dir(), corpus)
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    manifest["records"][0]["expect"]["outcome"] = "NO"  # the engine says YES
    (corpus / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    state_dir = tmp_path / "state"
    done = subprocess.run(
        [sys.executable, "-m", "cli", "demo", "--corpus", str(corpus)],
        cwd=tmp_path,
        env=bare_env(state_dir),
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
    )
    assert done.returncode == 1, done.stderr
    assert "CHECKS FAILED: 1 of" in done.stdout
    assert (
        "01_btc_above_100k_clean.json: verdict ('NO', False, False) (got ('YES', False, False))"
        in done.stdout
    )
    assert embedded_server_processes(state_dir) == []
