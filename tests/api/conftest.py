"""A real ledger served by a real ``ledger serve`` process, shared by the API tests of a module.

The database (real PostgreSQL) holds audited submissions produced by the real engine from the
sample corpus, a rejected one, and bulk submissions with many steps (so the tree has more than 256
leaves and level-1 tiles exist), under two signed checkpoints.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from engine.envelope import decode_envelope, wrap_inputs
from ledger.connect import create_ledger_engine
from ledger.migration import upgrade
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import StoredCheckpoint, create_checkpoint
from ledger.translog.note import verifier_key
from tests.helpers.ledger_factories import audited, rejected
from tests.helpers.services import PgServer, fresh_database

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "samples" / "corpus"
TOKEN = "test-token-0123456789abcdef"
ORIGIN = "cournot-ledger.test/log"


@dataclass
class ServedLedger:
    """A running server and what the test put in its database."""

    base_url: str
    token: str
    database_url: str
    public_key: bytes
    verifier_key: str
    checkpoints: list[StoredCheckpoint]
    submissions: dict[str, str] = field(default_factory=dict)  # name -> submission_id
    log_path: Path | None = None

    def client(self, *, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def envelope_bytes(name: str, **options: Any) -> bytes:
    document = json.loads((CORPUS / name).read_text())
    return json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"], **options)).encode()


def populate(url: str, key: Ed25519PrivateKey) -> tuple[list[StoredCheckpoint], dict[str, str]]:
    """Append real and bulk submissions; sign a checkpoint in the middle and one at the end."""
    store = LedgerStore(url)
    engine = create_ledger_engine(url)
    names: dict[str, str] = {}
    try:
        for name in sorted(p.name for p in CORPUS.glob("*.json"))[:3]:
            names[name] = store.append(audit_envelope(decode_envelope(envelope_bytes(name)))).submission_id
        names["rejected"] = store.append(rejected("bad-1", b"{not json")).submission_id
        first = create_checkpoint(engine, key, origin=ORIGIN)
        for i in range(10):
            draft = audited(f"bulk-{i}", market_id=f"bulk-market-{i % 2}", steps=60)
            names[f"bulk-{i}"] = store.append(draft).submission_id
        for name in sorted(p.name for p in CORPUS.glob("*.json"))[3:5]:
            names[name] = store.append(audit_envelope(decode_envelope(envelope_bytes(name)))).submission_id
        second = create_checkpoint(engine, key, origin=ORIGIN)
    finally:
        store.close()
        engine.dispose()
    return [first, second], names


def start_server(
    url: str, port: int, log_path: Path, *, token: str | None = TOKEN, host: str = "127.0.0.1"
) -> subprocess.Popen[bytes]:
    """``ledger serve`` in a subprocess, the real console entry point, logging to ``log_path``."""
    env = {**os.environ, "LEDGER_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    env.pop("LEDGER_API_TOKEN", None)
    if token is not None:
        env["LEDGER_API_TOKEN"] = token
    command = [sys.executable, "-m", "cli", "serve", "--host", host, "--port", str(port)]
    with log_path.open("wb") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def wait_healthy(
    base_url: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ledger serve exited {process.returncode}: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.2)
    raise RuntimeError(f"ledger serve did not become healthy: {log_path.read_text()[-3000:]}")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def served(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLedger]:
    """A populated ledger and a ``ledger serve`` on it (loopback, bearer token set)."""
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    with fresh_database(pg_server.admin_url) as url:
        upgrade(url)
        checkpoints, names = populate(url, key)
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        process = start_server(url, port, log_path)
        try:
            wait_healthy(base_url, process, log_path)
            yield ServedLedger(
                base_url,
                TOKEN,
                url,
                public,
                verifier_key(ORIGIN, key.public_key()),
                checkpoints,
                names,
                log_path,
            )
        finally:
            stop_server(process)
