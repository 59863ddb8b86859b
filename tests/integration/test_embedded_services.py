"""Contract of the service fixtures and the embedded servers behind them.

The PostgreSQL and broker contracts run once per available backend: embedded always, the
``LEDGER_TEST_*`` server when it answers, and a container where Docker answers.

Tests that orphan a server on purpose make pytest a child subreaper (``PR_SET_CHILD_SUBREAPER``)
and reap it at once: this machine's pid 1 reaps orphans only every ~2 s, and a zombie is
no proof that the server is gone until it is reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
import redis
import sqlalchemy
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from consumers.consumer_config import consumer_kwargs
from devstack.broker import EmbeddedBroker, EmbeddedBrokerUnavailable
from devstack.postgres import EmbeddedPostgres, EmbeddedPostgresUnavailable
from devstack.redis_server import EmbeddedRedis
from devstack.server import EmbeddedServer, ServiceStatus, free_loopback_port, pid_alive, wait_pid_gone
from ledger.connect import libpq_url
from tests.helpers.services import (
    PgServer,
    ServiceStack,
    broker_kinds,
    postgres_kinds,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
_PR_SET_CHILD_SUBREAPER = 36
_seen_databases: dict[str, list[str]] = {}


# --- helpers ---------------------------------------------------------------------------


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """Orphaned descendants are reparented to this process (and reaped by wait_pid_gone)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def run_python(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter from the repository root; return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def spawn_python(code: str, *args: str, tmpdir: Path | None = None) -> subprocess.Popen[str]:
    """Start ``code`` in a fresh interpreter whose stdout we read line by line."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True
    )


def descendants(pid: int) -> list[int]:
    """Pids of all live descendants of ``pid``."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    return []


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A directory under /tmp that the unprivileged postgres user can already traverse."""
    path = Path(tempfile.mkdtemp(prefix="ledger-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- PostgreSQL contract, per backend ----------------------------------------------------


@pytest.fixture(scope="session", params=postgres_kinds())
def pg_server(request: pytest.FixtureRequest, service_stack: ServiceStack) -> PgServer:
    """Overrides the plugin's pg_server: one server per available backend."""
    return service_stack.postgres(request.param)


def test_server_accepts_psycopg_connections_with_admin_rights(pg_server: PgServer) -> None:
    with psycopg.connect(libpq_url(pg_server.admin_url)) as conn:
        row = conn.execute(
            "SELECT rolsuper OR (rolcreatedb AND rolcreaterole) FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert row == (True,)


def test_database_url_gives_a_fresh_database(pg_server: PgServer, database_url: str) -> None:
    assert database_url.startswith("postgresql+psycopg://")
    engine = sqlalchemy.create_engine(database_url)
    with engine.begin() as conn:
        name = conn.execute(sqlalchemy.text("SELECT current_database()")).scalar_one()
        tables = conn.execute(sqlalchemy.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
        assert tables.scalar_one() == 0
        conn.execute(sqlalchemy.text("CREATE TABLE isolation_marker (id int)"))
    engine.dispose()
    assert name.startswith("test_")
    _seen_databases.setdefault(pg_server.kind, []).append(name)


def test_database_url_is_isolated_from_other_tests(pg_server: PgServer, database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url)) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        marker = conn.execute("SELECT to_regclass('isolation_marker')").fetchone()
        earlier = _seen_databases.get(pg_server.kind, [])
        still_there = conn.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", (earlier,))
        leftovers = still_there.fetchall()
    assert name is not None and name[0] not in earlier
    assert marker == (None,)
    assert leftovers == []  # earlier tests' databases were dropped


# --- embedded PostgreSQL ---------------------------------------------------------------

_PG_FOREGROUND = """
import sys, time
from devstack.postgres import EmbeddedPostgres
server = EmbeddedPostgres(sys.argv[1], durable=False)
server.start()
print(server.pid, flush=True)
time.sleep(600)
"""

_PG_DETACHED = """
import dataclasses, json, sys
from devstack.postgres import EmbeddedPostgres
server = EmbeddedPostgres(sys.argv[1], mode="detached", state_dir=sys.argv[2], durable=False)
if sys.argv[3] == "start":
    server.start()
    print(json.dumps({"pid": server.pid, "url": server.url}))
elif sys.argv[3] == "status":
    print(json.dumps(dataclasses.asdict(server.status())))
else:
    server.stop()
"""


def test_embedded_stop_leaves_no_process(scratch_dir: Path) -> None:
    server = EmbeddedPostgres(scratch_dir / "data", durable=False)
    with server:
        pid = server.pid
        assert pid is not None
        with psycopg.connect(server.dsn) as conn:
            assert conn.execute("SELECT current_setting('fsync')").fetchone() == ("off",)
        children = descendants(pid)
        assert children  # checkpointer, walwriter, ...
    assert not any(pid_alive(p) for p in [pid, *children])
    assert server.status().running is False


def test_embedded_postmaster_dies_with_sigkilled_parent(scratch_dir: Path) -> None:
    with subreaper():
        parent = spawn_python(_PG_FOREGROUND, str(scratch_dir / "data"))
        assert parent.stdout is not None
        postmaster = int(parent.stdout.readline())
        children = descendants(postmaster)
        assert pid_alive(postmaster)
        parent.kill()
        parent.wait()
        assert wait_pid_gone(postmaster, 20.0), "postmaster outlived its SIGKILLed parent"
        assert all(wait_pid_gone(child, 20.0) for child in children)


def test_detached_server_is_managed_from_other_processes(scratch_dir: Path) -> None:
    data, state = str(scratch_dir / "data"), str(scratch_dir / "run")
    with subreaper():
        started = json.loads(run_python(_PG_DETACHED, data, state, "start"))
        assert pid_alive(started["pid"]), "detached server did not outlive the process that started it"
        status = json.loads(run_python(_PG_DETACHED, data, state, "status"))
        assert status["running"] and status["pid"] == started["pid"] and not status["orphaned"]
        assert status["url"] == started["url"]
        with psycopg.connect(libpq_url(started["url"])) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        run_python(_PG_DETACHED, data, state, "stop")
        assert wait_pid_gone(started["pid"], 20.0)
    assert not (scratch_dir / "run" / "postgres.json").exists()
    assert json.loads(run_python(_PG_DETACHED, data, state, "status"))["running"] is False


def test_detached_stale_state_file_and_orphaned_server_are_handled(scratch_dir: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    server = EmbeddedPostgres(scratch_dir / "data", mode="detached", state_dir=scratch_dir, durable=False)
    server.state_file.write_text(json.dumps({"pid": dead.pid, "port": 1}))
    assert server.status().stale_state and not server.status().running
    with subreaper():
        server.start()  # replaces the stale state
        live_pid = server.pid
        assert live_pid is not None and json.loads(server.state_file.read_text())["pid"] == live_pid
        server.state_file.write_text(json.dumps({"pid": dead.pid, "port": 1}))  # now the server is orphaned
        other = EmbeddedPostgres(scratch_dir / "data", mode="detached", state_dir=scratch_dir)
        found = other.status()
        assert found.running and found.orphaned and found.pid == live_pid and other.port == server.port
        other.stop()
        assert wait_pid_gone(live_pid, 20.0)
    assert not server.state_file.exists()
    assert other.status() == ServiceStatus(False)


def test_missing_wheel_names_the_embedded_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(EmbeddedPostgresUnavailable, match="'embedded' extra"):
        EmbeddedPostgres("/nonexistent/data").start()


# --- broker contract, per backend ------------------------------------------------------


@pytest.fixture(scope="session", params=broker_kinds())
def kafka_bootstrap(request: pytest.FixtureRequest, service_stack: ServiceStack) -> str:
    """Overrides the plugin's kafka_bootstrap: one broker per available backend."""
    return service_stack.kafka(request.param)


async def test_produce_and_consume_a_message(
    kafka_bootstrap: str, topic_name: str, request: pytest.FixtureRequest
) -> None:
    topic = f"{topic_name}-roundtrip"
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"bundle-1", key=b"k", headers=[("type", b"bundle")])
    finally:
        await producer.stop()
    embedded = request.node.callspec.params["kafka_bootstrap"] == "embedded"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        **consumer_kwargs(embedded=embedded),
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()
    assert (record.key, record.value, list(record.headers)) == (b"k", b"bundle-1", [("type", b"bundle")])


# --- embedded broker -------------------------------------------------------------------

_BROKER_FOREGROUND = """
import time
from devstack.broker import EmbeddedBroker
broker = EmbeddedBroker()
broker.start()
print(broker.pid, flush=True)
time.sleep(600)
"""

_BROKER_DETACHED = """
import dataclasses, json, sys
from devstack.broker import EmbeddedBroker
broker = EmbeddedBroker(mode="detached", state_dir=sys.argv[1])
if sys.argv[2] == "start":
    broker.start()
    print(json.dumps({"pid": broker.pid, "bootstrap": broker.bootstrap}))
elif sys.argv[2] == "status":
    print(json.dumps(dataclasses.asdict(broker.status())))
else:
    broker.stop()
"""


def test_embedded_broker_dies_with_sigkilled_parent() -> None:
    with subreaper():
        parent = spawn_python(_BROKER_FOREGROUND)
        assert parent.stdout is not None
        broker = int(parent.stdout.readline())
        assert pid_alive(broker)
        parent.kill()
        parent.wait()
        assert wait_pid_gone(broker, 20.0), "broker outlived its SIGKILLed parent"


def test_detached_broker_is_managed_from_other_processes(scratch_dir: Path) -> None:
    with subreaper():
        started = json.loads(run_python(_BROKER_DETACHED, str(scratch_dir), "start"))
        assert pid_alive(started["pid"])
        status = json.loads(run_python(_BROKER_DETACHED, str(scratch_dir), "status"))
        assert status["running"] and status["pid"] == started["pid"]
        run_python(_BROKER_DETACHED, str(scratch_dir), "stop")
        assert wait_pid_gone(started["pid"], 20.0)
    assert EmbeddedBroker(mode="detached", state_dir=scratch_dir).status().running is False


def test_missing_broker_wheel_names_the_embedded_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_package(name: str) -> None:
        raise ModuleNotFoundError(name)

    monkeypatch.setattr("importlib.resources.files", no_package)
    with pytest.raises(EmbeddedBrokerUnavailable, match="'embedded' extra"):
        EmbeddedBroker().start()


# --- Redis -----------------------------------------------------------------------------


def test_redis_set_get_with_ttl(redis_db_url: str, redis_key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_db_url)
    try:
        client.set(f"{redis_key_prefix}verdict", b"valid", ex=60)
        client.set(f"{redis_key_prefix}short", b"gone soon", px=150)
        assert client.get(f"{redis_key_prefix}verdict") == b"valid"
        assert 0 < client.ttl(f"{redis_key_prefix}verdict") <= 60
        time.sleep(0.3)
        assert client.get(f"{redis_key_prefix}short") is None
    finally:
        client.close()


def test_embedded_redis_on_a_fixed_port_restarts_there_empty_and_stop_leaves_nothing() -> None:
    server = EmbeddedRedis(free_loopback_port())
    assert isinstance(server, EmbeddedServer)  # the same base as the PostgreSQL and broker servers
    with server:
        port, first_pid = server.port, server.pid
        client = redis.Redis.from_url(server.url, socket_connect_timeout=1)
        try:
            client.set("k", b"v")
            server.kill()
            assert not server.status().running and not pid_alive(first_pid or 0)
            server.start()
            assert server.port == port and server.status().running
            assert client.get("k") is None  # memory only: nothing survives a kill
        finally:
            client.close()
        workdir = server.workdir
    assert not server.status().running and workdir is not None and not workdir.exists()


# --- the fixtures' own lifecycle ------------------------------------------------------


def test_service_stack_close_stops_every_embedded_server() -> None:
    stack = ServiceStack()
    try:
        stack.postgres("embedded")
        stack.kafka("embedded")
        stack.redis("embedded")
        pids = list(stack.embedded_pids)
        assert len(pids) == 3 and all(pid_alive(pid) for pid in pids)
        server_children = [child for pid in pids for child in descendants(pid)]
    finally:
        stack.close()
    assert not any(pid_alive(pid) for pid in [*pids, *server_children])


_STACK = """
import time
from tests.helpers.services import ServiceStack
stack = ServiceStack()
stack.postgres("embedded"), stack.kafka("embedded"), stack.redis("embedded")
print(*stack.embedded_pids, flush=True)
time.sleep(600)
"""


def test_fixture_servers_die_with_sigkilled_pytest(scratch_dir: Path) -> None:
    with subreaper():
        parent = spawn_python(_STACK, tmpdir=scratch_dir)  # its temp dirs land in scratch_dir
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        server_children = [child for pid in pids for child in descendants(pid)]
        assert len(pids) == 3 and all(pid_alive(pid) for pid in pids)
        parent.kill()
        parent.wait()
        assert all(wait_pid_gone(pid, 20.0) for pid in [*pids, *server_children])
