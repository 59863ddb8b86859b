"""The README's "Ask over HTTP" journey: every curl command runs against a real server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.api.conftest import ROOT, ServedLedger

pytestmark = pytest.mark.integration


def journey_commands() -> list[str]:
    """The commands between the README's http-journey markers (backslash continuations joined)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- http-journey:start -->\n```\n(.*?)```\n<!-- http-journey:end -->", text, re.S)
    assert block is not None, "README lacks the http-journey block"
    joined = block.group(1).replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip()]


def test_the_readme_journey_has_curl_commands() -> None:
    commands = journey_commands()
    assert len(commands) >= 7 and all("curl" in command for command in commands)


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq")
def test_every_readme_curl_command_works(served: ServedLedger) -> None:
    env = {**os.environ, "L": served.base_url, "H": f"Authorization: Bearer {served.token}"}
    outputs = []
    for command in journey_commands():
        run = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0 and run.stdout.strip(), f"{command}\n{run.stderr}"
        outputs.append(run.stdout)
        print(f"$ {command}\n{run.stdout[:600]}")  # shown with -s
    assert json.loads(outputs[0])["items"][0]["status"] == "audited"
    assert json.loads(outputs[3])["format"] == "cournot-ledger/inclusion-proof/v1"
    assert outputs[5] == served.checkpoints[-1].note
    assert json.loads(outputs[-1])["outcome"] in ("YES", "NO", "INVALID")
