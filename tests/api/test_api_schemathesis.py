"""schemathesis fuzzes the OpenAPI document against the running server: no 5xx, and every response
has a documented status, content type and shape."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.conftest import ServedLedger

pytestmark = pytest.mark.integration

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def _schemathesis() -> list[str]:
    found = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    return [found]


def test_schemathesis_finds_no_server_error_and_no_undocumented_response(
    served: ServedLedger, tmp_path: Path
) -> None:
    command = [
        *_schemathesis(),
        "run",
        f"{served.base_url}/openapi.json",
        "--checks",
        CHECKS,
        "--header",
        f"Authorization: Bearer {served.token}",
        "--max-examples",
        "60",
        "--workers",
        "1",
        "--seed",
        "6962",
        "--suppress-health-check",
        "all",
        "--no-color",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    output = run.stdout + run.stderr
    (tmp_path / "schemathesis.txt").write_text(output)
    print(output[-4000:])
    assert run.returncode == 0, output[-6000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", output)
    assert counts is not None and counts.group(1) == counts.group(2) and int(counts.group(1)) > 500, output[
        -3000:
    ]
    assert not re.search(r"\d+ failed", output), output[-3000:]
    served_log = served.log_path.read_text() if served.log_path else ""
    assert "Traceback" not in served_log, served_log[-3000:]
