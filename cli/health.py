"""``ledger health``: is the database reachable, is the broker reachable, and how far behind is the group."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from sqlalchemy.engine import make_url

from cli.options import add_database_url, add_format
from consumers.lag import PartitionLag, broker_source_identity, partition_lag
from consumers.logs import configure_logging
from devstack.services import open_store, resolve_broker, settings_with
from ledger.store.source_log import Incarnation, SourceIdentity

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``health`` to the ``ledger`` command line."""
    parser = subparsers.add_parser(
        "health",
        description=(
            "Exit status 0 when both the ledger database and the broker answer and the stored offsets "
            "belong to the log the broker serves (same cluster id and topic id as the group's current "
            "source incarnation, no log end below a stored offset); 1 otherwise. Lag per "
            "partition = broker high watermark - next offset stored in Postgres for the group. "
            "Starts nothing except, without LEDGER_DATABASE_URL, the embedded PostgreSQL to read it."
        ),
    )
    parser.add_argument("--topic", help="topic (default: LEDGER_TOPIC)")
    parser.add_argument("--group", help="consumer group id (default: LEDGER_GROUP_ID)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: LEDGER_KAFKA_BOOTSTRAP)")
    add_database_url(parser, "LEDGER_DATABASE_URL or embedded")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per check (default 10)")
    add_format(parser, json_help="one JSON object")
    parser.set_defaults(handler=run)


def _check_database(
    settings: Any,
) -> tuple[dict[str, Any], dict[int, int] | None, Incarnation | None, str, str]:
    topic, group = settings.topic, settings.group_id
    try:
        with open_store(settings, migrate=False, create=False) as store:
            offsets = store.load_offsets(group, topic)
            incarnation = store.current_incarnation(group, topic)
            where = make_url(str(store.engine.url)).render_as_string(hide_password=True)
            return {"ok": True, "url": where, "max_seq": store.max_seq()}, offsets, incarnation, topic, group
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, None, None, topic, group


def _check_source(
    bootstrap: str | None,
    topic: str,
    stored: dict[int, int],
    incarnation: Incarnation | None,
    lags: list[PartitionLag],
    timeout: float,
) -> dict[str, Any]:
    """Do the stored offsets belong to the log the broker serves? ``ok`` False when undecided."""
    report: dict[str, Any] = {"incarnation": incarnation.number if incarnation else None}
    if incarnation is not None:
        report |= {"cluster_id": incarnation.identity.cluster_id, "topic_id": incarnation.identity.topic_id}
    if bootstrap is None or (not stored and incarnation is None):
        return report | {"ok": True}  # nothing consumed yet: nothing to compare
    try:
        observed: SourceIdentity | None = asyncio.run(
            broker_source_identity(bootstrap, topic, timeout=timeout)
        )
    except Exception as exc:
        return report | {
            "ok": False,
            "error": f"no identity for the topic's log: {type(exc).__name__}: {exc}",
        }
    assert observed is not None
    report |= {"broker_cluster_id": observed.cluster_id, "broker_topic_id": observed.topic_id}
    if incarnation is None:
        problem = "the stored offsets predate source incarnations; `ledger consume` records one and rereads the topic"
    elif incarnation.identity != observed:
        problem = (
            f"the broker serves another log of the topic than incarnation {incarnation.number}; the stored "
            "offsets do not apply to it until `ledger consume` records the new incarnation"
        )
    elif below := [lag.partition for lag in lags if lag.next_offset > lag.highwater]:
        problem = (
            f"partitions {below} end below the stored offsets under the same log identity (truncated log)"
        )
    else:
        return report | {"ok": True}
    return report | {"ok": False, "error": problem}


def _check_broker(
    settings: Any, stored: dict[int, int], timeout: float
) -> tuple[dict[str, Any], list[PartitionLag]]:
    try:
        broker = resolve_broker(settings, start=False)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []
    if broker is None:
        return {"ok": False, "error": "no LEDGER_KAFKA_BOOTSTRAP and no `ledger up` broker running"}, []
    try:
        lags = asyncio.run(partition_lag(broker.bootstrap, settings.topic, stored, timeout=timeout))
    except Exception as exc:
        return {"ok": False, "bootstrap": broker.bootstrap, "error": f"{type(exc).__name__}: {exc}"}, []
    return {"ok": True, "bootstrap": broker.bootstrap, "origin": broker.origin}, lags


def run(args: argparse.Namespace) -> int:
    """Check both services; print a report; exit 0 only when both are reachable."""
    configure_logging("warning")  # the report says what failed; library records only for real problems
    settings = settings_with(bootstrap=args.bootstrap, database_url=args.database_url)
    update = {key: value for key, value in (("topic", args.topic), ("group_id", args.group)) if value}
    settings = settings.model_copy(update=update) if update else settings
    database, stored, incarnation, topic, group = _check_database(settings)
    broker, lags = _check_broker(settings, stored or {}, args.timeout)
    source: dict[str, Any] = {"ok": False, "error": "database or broker unreachable"}
    if database["ok"] and broker["ok"]:
        source = _check_source(broker.get("bootstrap"), topic, stored or {}, incarnation, lags, args.timeout)
    report = {
        "ok": database["ok"] and broker["ok"] and source["ok"],
        "database": database,
        "broker": broker,
        "source": source,
        "topic": topic,
        "group": group,
        "partitions": [
            {
                "partition": lag.partition,
                "next_offset": lag.next_offset,
                "highwater": lag.highwater,
                "lag": lag.lag,
            }
            for lag in lags
        ],
        "total_lag": sum(lag.lag for lag in lags),
    }
    if args.format == "json":
        print(json.dumps(report, ensure_ascii=False))
    else:
        for name in ("database", "broker"):
            status = report[name]
            detail = status.get("url") or status.get("bootstrap") or ""
            print(
                f"{name}: {'ok' if status['ok'] else 'UNREACHABLE'} {detail} {status.get('error', '')}".rstrip()
            )
        where = f"incarnation {source.get('incarnation')} (cluster {source.get('cluster_id')}, topic id {source.get('topic_id')})"
        print(
            f"source log: {'ok' if source['ok'] else 'UNDECIDED'} {where} {source.get('error', '')}".rstrip()
        )
        print(f"group {group} on topic {topic}: total lag {report['total_lag']}")
        print(f"{'partition':>9} {'next_offset':>12} {'highwater':>10} {'lag':>8}")
        for row in report["partitions"]:
            print(f"{row['partition']:>9} {row['next_offset']:>12} {row['highwater']:>10} {row['lag']:>8}")
    sys.stdout.flush()
    return 0 if report["ok"] else 1
