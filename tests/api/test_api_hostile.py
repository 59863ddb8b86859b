"""Hostile requests to ``ledger serve``: every answer is a 4xx RFC 9457 problem, never a 500 or a trace."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.conftest import TOKEN, ServedLedger

pytestmark = pytest.mark.integration

HUGE = "9" * 5000
HOSTILE_GETS = [
    f"/v1/submissions?limit={HUGE}",
    "/v1/submissions?limit=-1",
    f"/v1/submissions?after={HUGE}",
    "/v1/submissions?after=-5",
    "/v1/submissions?after=9223372036854775808",
    "/v1/submissions?market_id=a%00b",
    "/v1/submissions?market_id=%ED%A0%80",
    "/v1/submissions?market_id=%FF",
    f"/v1/submissions?market_id={'m' * 5000}",
    "/v1/submissions?status=%00",
    f"/v1/proofs/entry/{HUGE}",
    "/v1/proofs/entry/-1",
    "/v1/proofs/entry/1?size=0",
    f"/v1/proofs/entry/1?size={HUGE}",
    f"/v1/proofs/consistency?from={HUGE}&to=1",
    "/v1/proofs/consistency?from=-1&to=1",
    "/v1/proofs/consistency?from=5&to=1",
    "/v1/proofs/consistency?from=1&to=9223372036854775807",
    "/v1/submissions/0x" + "0" * 64,
    "/v1/submissions/0x" + "0" * 64 + "/steps/99999999999999999999/proof",
    "/v1/submissions/0x" + "0" * 64 + "/steps/-1/proof",
    "/v1/submissions/%00",
    "/tile/0/x000/001",
    "/tile/0/../../etc/passwd",
    "/tile/0/%2e%2e/%2e%2e/etc/passwd",
    "/tile/0/001.p/0",
    "/tile/0/001.p/256",
    "/tile/0/001.p/" + HUGE,
    "/tile/0/" + "x999/" * 10 + "999",
    "/tile/99/000",
    "/tile/" + HUGE + "/000",
    "/tile/entries/" + HUGE,
    "/tile/0/%00",
    "/tile/-1/000",
    "/tile/0/1",
    "/tile/0/0001",
    "/tile/0/x001/x234/067.p/8",
]


@pytest.mark.parametrize("path", HOSTILE_GETS)
def test_hostile_query_and_path_values_get_4xx_problems(served: ServedLedger, path: str) -> None:
    with served.client() as client:
        response = client.get(path)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text and 'File "' not in response.text


def raw_request(served: ServedLedger, request: bytes) -> bytes:
    address = urlsplit(served.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "content_length",
    [b"9" * 5000, b"\xb2", b"-1", b"99999999999999999999999999"],
)
def test_hostile_content_lengths_never_reach_a_500(served: ServedLedger, content_length: bytes) -> None:
    request = (
        b"POST /v1/audit HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: "
        + content_length
        + b"\r\n\r\n{}"
    )
    answer = raw_request(served, request)
    status = int(answer.split(b" ", 2)[1])
    assert 400 <= status < 500, answer[:300]


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe{}",
        b'{"a": "\xed\xa0\x80"}',
        b'{"schema_id": "\\u0000"}',
        b"[" * 100000,
        b'{"a": ' + HUGE.encode() + b"}",
    ],
)
def test_hostile_audit_bodies_get_422_problems(served: ServedLedger, body: bytes) -> None:
    with served.client() as client:
        response = client.post("/v1/audit", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text[:300]
    assert response.headers["content-type"].startswith("application/problem+json")


def test_a_por_envelope_posted_to_audit_is_a_problem(served: ServedLedger) -> None:
    body = b'{"schema_id": "cournot-ledger/por-envelope", "schema_version": 1, "pack": {}}'
    with served.client() as client:
        response = client.post("/v1/audit", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422


def test_a_chunked_body_over_the_limit_is_413(served: ServedLedger) -> None:
    def chunks():
        for _ in range(200):
            yield b" " * 65536

    with served.client() as client:
        response = client.post("/v1/audit", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("application/problem+json")


def test_paths_that_look_like_the_open_health_path_still_need_the_token(served: ServedLedger) -> None:
    with httpx.Client(base_url=served.base_url, timeout=30) as client:
        for path in (
            "/healthz/",
            "//healthz",
            "/healthz/../v1/submissions",
            "/HEALTHZ",
            "/healthz%2f..%2fv1/submissions",
        ):
            response = client.get(path)
            assert response.status_code in (401, 404), (path, response.status_code)
            assert "submissions" not in response.text or response.status_code == 401


def test_made_up_methods_do_not_grow_the_metric_labels(served: ServedLedger) -> None:
    for index in range(3):
        method = f"ATTACK{index}X"
        request = f"{method} /v1/submissions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        raw_request(served, request.encode())
    with served.client() as client:
        metrics = client.get("/metrics").text
    assert "ATTACK" not in metrics
    assert 'method="other"' in metrics


def test_every_stored_status_can_be_filtered_on(served: ServedLedger) -> None:
    from ledger.store.records import SUBMISSION_STATUSES

    with served.client() as client:
        for status in SUBMISSION_STATUSES:
            response = client.get("/v1/submissions", params={"status": status})
            assert response.status_code == 200, (status, response.text[:200])
