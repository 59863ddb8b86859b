"""``POST /v1/verify-por`` against a running ``ledger serve``: the same verifier and report as the CLI."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from ledger.por_files import verify_pack_path
from tests.api.conftest import ServedLedger

PACKS = Path(__file__).resolve().parents[1] / "data" / "por_packs"


def _zip_directory(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()


def _without_source(report: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in report.items() if key != "source"}


def test_a_genuine_pack_document_verifies_with_the_clis_report(served: ServedLedger) -> None:
    document = PACKS / "genuine" / "conflicting_sources_document.json"
    with served.client() as client:
        response = client.post(
            "/v1/verify-por", content=document.read_bytes(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["status"] == "ok"
    cli = verify_pack_path(document).model_dump(mode="json")
    assert _without_source(report) == _without_source(cli)


def test_a_genuine_zip_verifies_and_a_mutated_one_is_pinpointed(served: ServedLedger) -> None:
    with served.client() as client:
        genuine = client.post(
            "/v1/verify-por",
            content=(PACKS / "genuine" / "two_sources_agree_zip.zip").read_bytes(),
            headers={"content-type": "application/zip"},
        )
        flipped = client.post(
            "/v1/verify-por",
            content=_zip_directory(PACKS / "mutated" / "outcome_flipped"),
            headers={"content-type": "application/zip"},
        )
    assert genuine.status_code == 200 and genuine.json()["status"] == "ok", genuine.text
    assert flipped.status_code == 200, flipped.text
    report = flipped.json()
    assert report["status"] == "failed"
    cli = verify_pack_path(PACKS / "mutated" / "outcome_flipped").model_dump(mode="json")
    failed = sorted(check["check_id"] for check in report["checks"] if check["status"] == "failed")
    assert failed and failed == sorted(
        check["check_id"] for check in cli["checks"] if check["status"] == "failed"
    )


def test_a_body_that_is_no_pack_is_a_problem_never_a_verdict(served: ServedLedger) -> None:
    with served.client() as client:
        not_zip = client.post(
            "/v1/verify-por", content=b"PK\x03\x04junk", headers={"content-type": "application/zip"}
        )
        not_json = client.post(
            "/v1/verify-por", content=b"{nope", headers={"content-type": "application/json"}
        )
        text = client.post("/v1/verify-por", content=b"{}", headers={"content-type": "text/plain"})
        anonymous = served.client(token=None).post(
            "/v1/verify-por", content=b"{}", headers={"content-type": "application/json"}
        )
    assert (not_zip.status_code, not_zip.json()["code"]) == (422, "pack_unreadable")
    assert (not_json.status_code, not_json.json()["code"]) == (422, "invalid_json")
    assert text.status_code == 415
    assert anonymous.status_code == 401
    for response in (not_zip, not_json, text):
        assert response.headers["content-type"].startswith("application/problem+json")
        assert "Traceback" not in response.text
