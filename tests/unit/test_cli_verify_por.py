"""``ledger verify-por``: exit 0 genuine, 1 failed/unverifiable, 2 unreadable; documented JSON shape."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from cli.main import main

PACKS = Path(__file__).resolve().parents[1] / "data" / "por_packs"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["verify-por", *args])
    return code, capsys.readouterr().out


def test_genuine_packs_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(path) for path in sorted((PACKS / "genuine").iterdir())]
    code, out = run(capsys, *paths)
    assert code == 0
    assert out.count("\nOK ") + out.startswith("OK ") == len(paths)


def test_failed_pack_exits_one_and_json_pinpoints(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, str(PACKS / "mutated" / "steps_reordered"), "--format", "json")
    assert code == 1
    document = json.loads(out)
    assert document["report_version"] == "por-verification.v1"
    assert document["summary"] == {"ok": 0, "failed": 1, "unverifiable": 0, "unreadable": 0}
    (pack,) = document["packs"]
    check = next(c for c in pack["checks"] if c["check_id"] == "root.reasoning_root")
    assert (check["file"], check["leaf_index"], check["step_id"]) == ("reasoning_trace.json", 1, "step_003")
    assert pack["challenges"][0]["merkle_proof"]["tree"] == "reasoning"


def test_unreadable_input_exits_two_but_still_reports_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not json")
    code, out = run(capsys, str(junk), str(tmp_path / "absent"), str(PACKS / "genuine" / "clean_threshold"))
    assert code == 2
    assert out.count("UNREADABLE") == 2 and "OK " in out


def test_zip_with_unsafe_member_is_unreadable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "evil.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("../manifest.json", "{}")
    code, _ = run(capsys, str(target))
    assert code == 2


def test_directory_without_manifest_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(PACKS / "genuine" / "clean_threshold", pack)
    (pack / "manifest.json").unlink()
    code, out = run(capsys, str(pack))
    assert code == 1 and "manifest.present" in out
