"""Access and hygiene: token off loopback, 401s, body limits, problem details, no stack traces,
and a server that reads as ledger_reader and cannot write."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import sqlalchemy.exc
from fastapi.testclient import TestClient
from psycopg import sql
from sqlalchemy.engine import make_url

from api.app import create_app
from api.binding import AccessError, check_bind, is_loopback
from api.db import ReaderSetupError, reader_engine
from cli.main import main
from ledger.connect import libpq_url
from tests.api.conftest import (
    ROOT,
    ServedLedger,
    envelope_bytes,
    free_port,
    start_server,
    stop_server,
    wait_healthy,
)

pytestmark = pytest.mark.integration


def test_a_public_address_without_a_token_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LEDGER_API_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2  # usage: no token off loopback
    err = capsys.readouterr().err
    assert "refusing to serve on '0.0.0.0' without a bearer token" in err and "LEDGER_API_TOKEN" in err
    monkeypatch.setenv("LEDGER_API_TOKEN", "short")
    assert main(["serve", "--host", "127.0.0.1", "--port", "0"]) == 2
    assert "shorter than 16" in capsys.readouterr().err


def test_without_the_api_extra_the_cli_still_works_and_serve_names_the_extra() -> None:
    blocked = (
        "import sys; sys.modules['fastapi'] = None; sys.modules['uvicorn'] = None; from cli.main import main"
    )
    code = blocked + "; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LEDGER_API_TOKEN", None)
    helped = subprocess.run([sys.executable, "-c", code, "--help"], env=env, capture_output=True, text=True)
    assert helped.returncode == 0 and "serve" in helped.stdout
    refused = subprocess.run([sys.executable, "-c", code, "serve"], env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "pip install 'verification-ledger[api]'" in refused.stderr


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("127.8.9.10")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")
    check_bind("localhost", None)
    with pytest.raises(AccessError):
        check_bind("192.168.1.10", None)
    check_bind("0.0.0.0", "a-long-enough-token-value")


def test_a_port_already_served_is_an_environment_error_in_one_line(served: ServedLedger) -> None:
    port = served.base_url.rsplit(":", 1)[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEDGER_DATABASE_URL": served.database_url}
    env.pop("LEDGER_API_TOKEN", None)
    second = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--port", port, "--log-format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2, second.stderr  # uvicorn's own status for it would be 3
    assert (
        second.stderr.splitlines()[-1]
        == f"ledger serve: could not serve on 127.0.0.1:{port} (the log above says why)"
    )
    assert '"color_message"' not in second.stderr and "address already in use" in second.stderr


def test_requests_without_the_right_token_get_401_problems(served: ServedLedger) -> None:
    for token in (None, "wrong-token-wrong-token"):
        with served.client(token=token) as client:
            for path in ("/v1/submissions", "/tile/0/000", "/checkpoint", "/openapi.json", "/metrics"):
                response = client.get(path)
                assert response.status_code == 401, path
                assert response.headers["content-type"] == "application/problem+json"
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert response.json()["code"] == "unauthorized"


def test_request_bodies_are_size_limited_even_when_chunked(served: ServedLedger) -> None:
    big = b'{"schema_id": "' + b"x" * 1_100_000 + b'"}'
    with served.client() as client:
        response = client.post("/v1/audit", content=big, headers={"content-type": "application/json"})
        assert response.status_code == 413 and response.json()["code"] == "oversize"

        def chunks() -> Iterator[bytes]:
            for _ in range(40):
                yield b" " * 65_536

        response = client.post("/v1/audit", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413


def test_strict_decoder_refusals_name_the_reason_and_path(served: ServedLedger) -> None:
    raw = envelope_bytes("01_clean_threshold.json").replace(b'"schema_version": 1', b'"schema_version": 3')
    with served.client() as client:
        response = client.post("/v1/audit", content=raw, headers={"content-type": "application/json"})
        body = response.json()
        assert response.status_code == 422 and body["code"] == "unknown_envelope_version"
        assert (
            body["path"] == "$.schema_version"
            and body["status"] == 422
            and body["type"].endswith(body["code"])
        )
        nan = client.post("/v1/audit", content=b'{"a": NaN}', headers={"content-type": "application/json"})
        assert nan.json()["code"] == "non_finite_number"


def test_unexpected_errors_reach_clients_without_a_trace(served: ServedLedger) -> None:
    engine = reader_engine(served.database_url)
    app = create_app(engine)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret detail in /srv/app/private.py")

    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            response = client.get("/boom")
    finally:
        engine.dispose()
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "secret" not in response.text and "Traceback" not in response.text and ".py" not in response.text
    assert response.json()["code"] == "internal_error"


def test_the_server_reads_as_ledger_reader_and_cannot_write(served: ServedLedger) -> None:
    engine = reader_engine(served.database_url)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT current_user").scalar() == "ledger_reader"
            with pytest.raises(sqlalchemy.exc.DBAPIError) as refused:
                connection.exec_driver_sql(
                    "INSERT INTO ledger_store.merkle_tiles VALUES (0, 999999, 1, %(h)s)", {"h": b"\0" * 32}
                )
            assert "read-only" in str(refused.value) or "permission denied" in str(refused.value)
    finally:
        engine.dispose()


def test_a_login_outside_ledger_reader_is_refused_at_startup(served: ServedLedger) -> None:
    role = f"api_outsider_{uuid.uuid4().hex[:8]}"
    admin = libpq_url(served.database_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        url = (
            make_url(served.database_url)
            .set(username=role, password=None)
            .render_as_string(hide_password=False)
        )
        with pytest.raises(ReaderSetupError, match="GRANT ledger_reader TO"):
            reader_engine(url)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_damaged_tree_is_a_500_problem_never_a_bad_tile(served: ServedLedger, tmp_path: Path) -> None:
    """A copy of the ledger whose stored leaf 3 was overwritten behind the triggers' back."""
    admin = libpq_url(served.database_url)
    source = make_url(served.database_url).database
    assert source is not None
    copy = f"{source}_damaged"
    with psycopg.connect(
        make_url(admin).set(database="postgres").render_as_string(hide_password=False), autocommit=True
    ) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (source,),
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(copy), sql.Identifier(source))
        )
    damaged_url = make_url(served.database_url).set(database=copy).render_as_string(hide_password=False)
    port = free_port()
    process = None
    try:
        with psycopg.connect(libpq_url(damaged_url), autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")  # bypass the append-only triggers
            conn.execute(  # leaf 3: bytes 96..127 of level-0 tile 0
                "UPDATE ledger_store.merkle_tiles SET hashes = overlay(hashes PLACING %s FROM 97) "
                "WHERE level = 0 AND idx = 0",
                (b"\1" * 32,),
            )
        process = start_server(damaged_url, port, tmp_path / "serve.log")
        wait_healthy(f"http://127.0.0.1:{port}", process, tmp_path / "serve.log")
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {served.token}"}
        ) as client:
            bundle = client.get("/tile/entries/000")
            proof = client.get("/v1/entries/3/proof")  # leaf 3 is on leaf 2's audit path
        assert bundle.status_code == 500 and bundle.json()["code"] == "log_damaged"
        assert proof.status_code == 500 and proof.json()["code"] == "log_damaged"
    finally:
        if process is not None:
            stop_server(process)
        with psycopg.connect(
            make_url(admin).set(database="postgres").render_as_string(hide_password=False), autocommit=True
        ) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(copy)))
