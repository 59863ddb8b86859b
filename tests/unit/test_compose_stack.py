"""docker-compose.yml and the Dockerfile are validated structurally (no container engine runs here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def ledger_commands() -> set[str]:
    from cli.commands import command_names

    return set(command_names())


def test_stack_has_every_service() -> None:
    assert {"kafka", "postgres", "redis", "migrate", "consumer"} <= set(SERVICES)
    assert "zookeeper" not in SERVICES


def test_kafka_runs_kraft_single_node() -> None:
    env = SERVICES["kafka"]["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    node_id = env["KAFKA_NODE_ID"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{node_id}@kafka:")
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1


@pytest.mark.parametrize("name", ["kafka", "postgres", "redis", "consumer"])
def test_long_running_services_have_healthchecks(name: str) -> None:
    check = SERVICES[name]["healthcheck"]
    assert check["test"][0] in {"CMD", "CMD-SHELL"}
    assert int(check["retries"]) >= 3


def test_named_volumes_are_declared_and_used() -> None:
    declared = set(COMPOSE["volumes"])
    used = {
        volume.split(":")[0]
        for service in SERVICES.values()
        for volume in service.get("volumes", [])
        if not volume.startswith((".", "/"))
    }
    assert used and used <= declared


def test_host_ports_do_not_collide() -> None:
    host_ports = [port.split(":")[0] for service in SERVICES.values() for port in service.get("ports", [])]
    assert len(host_ports) == len(set(host_ports))


def _database(env: dict[str, str]) -> Any:
    return urlparse(env["LEDGER_DATABASE_URL"].replace("postgresql+psycopg", "postgresql"))


def test_consumer_environment_points_at_the_stack() -> None:
    env = SERVICES["consumer"]["environment"]
    database = _database(env)
    pg_env = SERVICES["postgres"]["environment"]
    assert database.hostname == "postgres"
    assert database.path.lstrip("/") == pg_env["POSTGRES_DB"]
    bootstrap_host, bootstrap_port = env["LEDGER_KAFKA_BOOTSTRAP"].split(":")
    assert (
        f"PLAINTEXT://{bootstrap_host}:{bootstrap_port}"
        in SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    )
    assert urlparse(env["LEDGER_REDIS_URL"]).hostname == "redis"
    migrate_env = SERVICES["migrate"]["environment"]
    assert {k: v for k, v in migrate_env.items() if k != "LEDGER_DATABASE_URL"} == {
        k: v for k, v in env.items() if k != "LEDGER_DATABASE_URL"
    }


def test_migration_runs_as_the_owner_and_the_consumer_as_a_writer_login() -> None:
    pg_env = SERVICES["postgres"]["environment"]
    owner = _database(SERVICES["migrate"]["environment"])
    assert (owner.username, owner.password) == (pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"])
    consumer = _database(SERVICES["consumer"]["environment"])
    assert consumer.username != pg_env["POSTGRES_USER"]
    assert (consumer.hostname, consumer.path) == (owner.hostname, owner.path)
    mounts = [v.split(":") for v in SERVICES["postgres"]["volumes"] if v.startswith(".")]
    [(host_dir, container_dir, *_)] = mounts
    assert container_dir == "/docker-entrypoint-initdb.d"
    init_sql = " ".join(p.read_text() for p in sorted((ROOT / host_dir).glob("*.sql")))
    statement = re.search(
        rf"CREATE ROLE {consumer.username} LOGIN PASSWORD '([^']*)' IN ROLE (\w+);", init_sql
    )
    assert statement is not None and statement.groups() == (consumer.password, "ledger_writer")
    for role in ("ledger_owner", "ledger_writer", "ledger_reader"):
        assert f"CREATE ROLE {role} NOLOGIN;" in init_sql


def test_consumer_waits_for_migration_and_healthy_dependencies() -> None:
    depends = SERVICES["consumer"]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert depends["kafka"]["condition"] == "service_healthy"
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_compose_and_dockerfile_commands_exist_in_the_cli() -> None:
    commands = ledger_commands()
    for name in ("migrate", "consumer"):
        assert SERVICES[name]["command"][0] in commands
    assert SERVICES["consumer"]["healthcheck"]["test"][1:] == ["ledger", "health"]
    assert "health" in commands
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r'^CMD \["(\w+)"', dockerfile, re.MULTILINE)
    assert cmd and cmd.group(1) in commands


def test_dockerfile_copies_every_package_and_installs_it_like_a_wheel() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for path in ("engine", "ledger", "consumers", "api", "devstack", "cli", "alembic.ini", "pyproject.toml"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", dockerfile, re.MULTILINE), path
        assert (ROOT / path).exists(), path
    # migrations and the demo corpus are package data: a non-editable install must carry them
    assert re.search(r"^RUN pip install \.(?! *-e)", dockerfile, re.MULTILINE)
    assert "pip install -e" not in dockerfile
