"""``ledger verify-por`` on hostile files: refused as unreadable (exit 2), never read elsewhere, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from cli.main import main
from ledger.por_files import MAX_PACK_BYTES, PackReadError, read_pack_files

PACKS = Path(__file__).resolve().parents[1] / "data" / "por_packs"
GENUINE_DIR = PACKS / "genuine" / "two_sources_agree"
DOCUMENT = PACKS / "genuine" / "conflicting_sources_document.json"
PRICE = re.compile(r'("price_usd": )[0-9.]+')


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["verify-por", *args])
    return code, capsys.readouterr().out


def copy_pack(tmp_path: Path) -> Path:
    pack = tmp_path / "pack"
    shutil.copytree(GENUINE_DIR, pack)
    return pack


def test_a_symbolic_link_inside_a_pack_is_refused_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("secret", encoding="utf-8")
    pack = copy_pack(tmp_path)
    (pack / "checks" / "outside.txt").symlink_to(secret)
    with pytest.raises(PackReadError, match="symbolic links are not allowed"):
        read_pack_files(pack)
    code, out = run(capsys, str(pack))
    assert code == 2 and out.startswith("UNREADABLE")


def test_a_linked_directory_inside_a_pack_is_refused(tmp_path: Path) -> None:
    pack = copy_pack(tmp_path)
    (pack / "more").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PackReadError, match="symbolic links"):
        read_pack_files(pack)


def test_a_huge_sparse_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    pack = copy_pack(tmp_path)
    with (pack / "huge.bin").open("wb") as handle:
        handle.truncate(2 * 1024**3)  # 2 GiB, sparse: reading it would need 2 GiB of memory
    with pytest.raises(PackReadError, match=f"more than {MAX_PACK_BYTES} bytes"):
        read_pack_files(pack)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pack.json"
    os.mkfifo(fifo)
    code, out = run(capsys, str(fifo))
    assert code == 2 and "not a directory or a regular file" in out
    pack = copy_pack(tmp_path)
    os.mkfifo(pack / "checks" / "pipe")
    with pytest.raises(PackReadError, match="not a regular file"):
        read_pack_files(pack)


def test_a_zip_member_with_a_backslash_parent_name_is_unsafe(tmp_path: Path) -> None:
    archive = tmp_path / "pack.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("..\\evil.json", "{}")
    with pytest.raises(PackReadError, match="unsafe member name"):
        read_pack_files(archive)


@pytest.mark.parametrize(
    ("literal", "code"), [("9" * 400, "number_too_large"), ("1e400", "non_finite_number")]
)
def test_a_number_no_float_holds_is_refused_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], literal: str, code: str
) -> None:
    text = json.dumps(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    document = tmp_path / "pack.json"
    document.write_text(PRICE.sub(lambda m: m.group(1) + literal, text, count=1), encoding="utf-8")
    exit_code, out = run(capsys, str(document))
    assert exit_code == 2 and code in out
    pack = copy_pack(tmp_path)
    evidence = pack / "evidence_bundle.json"
    evidence.write_bytes(evidence.read_bytes().replace(b"{", b'{"x": ' + literal.encode() + b", ", 1))
    exit_code, out = run(capsys, str(pack))
    assert exit_code == 1 and "parse.evidence_bundle" in out and code in out


def test_control_characters_and_lone_surrogates_are_escaped_in_text_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    pack["por_bundle"]["market_id"] = pack["por_bundle"]["verdict"]["market_id"] = "m\x1b[2J"
    document = tmp_path / "pack.json"
    document.write_text(json.dumps(pack), encoding="utf-8")
    code, out = run(capsys, str(document))
    assert code == 1 and "\x1b" not in out and "market=m\\u001b[2J" in out
    strange = tmp_path / os.fsdecode(b"bad\xffname.json")
    strange.write_text("{}", encoding="utf-8")
    code, out = run(capsys, str(strange))
    assert code == 1 and "bad\\udcffname.json" in out
    out.encode("utf-8")  # printable: no lone surrogate left


def test_a_zip_larger_than_the_pack_limit_is_refused_before_its_directory_is_read(tmp_path: Path) -> None:
    archive = tmp_path / "pack.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("manifest.json", "{}")
    small = archive.read_bytes()
    with archive.open("wb") as handle:  # a sparse hole before the zip: still a valid zip
        handle.seek(MAX_PACK_BYTES + 1)
        handle.write(small)
    assert zipfile.is_zipfile(archive)
    with pytest.raises(PackReadError, match="zip of more than"):
        read_pack_files(archive)


def test_a_zip_with_too_many_members_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "pack.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for index in range(600):
            zipped.writestr(f"d{index}/", "")
    with pytest.raises(PackReadError, match="zip members"):
        read_pack_files(archive)
