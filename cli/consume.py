"""``ledger consume``: run one consumer-group member until SIGTERM/SIGINT (or idle, for batch jobs)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from cli.consume_summary import ConsumeReport
from cli.exit_status import EXIT_OK, EXIT_USAGE, for_ledger_error
from cli.options import add_database_url, add_logging
from consumers.consumer import ConsumerConfig, LedgerConsumer
from consumers.logs import configure_logging
from consumers.metrics import ConsumerMetrics
from devstack.services import open_writer_store, resolve_broker, settings_with
from ledger.errors import LedgerError, SchemaNotReadyError
from ledger.store.drafts import audit_envelope

__all__ = ["register"]

log = logging.getLogger("consumers.consume")


def _records_or_zero(text: str) -> int:
    """A record count >= 0 (argparse type): a negative one is a usage error, never read as 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def register(subparsers: Any) -> None:
    """Add ``consume`` to the ``ledger`` command line."""
    parser = subparsers.add_parser(
        "consume",
        description=(
            "Reads the topic as a member of the consumer group, audits every record and appends each "
            "batch with its partition offsets in one Postgres transaction. Refused records go to the "
            "dead-letter topic and are recorded as submission.rejected. Stops cleanly on SIGTERM/SIGINT."
        ),
    )
    parser.add_argument("--topic", help="source topic (default: LEDGER_TOPIC)")
    parser.add_argument("--dlq-topic", help="dead-letter topic (default: LEDGER_DLQ_TOPIC)")
    parser.add_argument("--group", help="consumer group id (default: LEDGER_GROUP_ID)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: LEDGER_KAFKA_BOOTSTRAP)")
    add_database_url(parser, "LEDGER_DATABASE_URL or embedded")
    parser.add_argument("--max-records", type=int, default=500, help="records per batch (default 500)")
    parser.add_argument(
        "--max-batch-bytes",
        type=int,
        default=16_777_216,
        help="stop filling a batch at this many bytes of record values (default 16 MiB)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=2,
        help="audited batches committing or queued for commit while the next is audited (default 2)",
    )
    parser.add_argument(
        "--max-commit-records",
        type=_records_or_zero,
        default=ConsumerConfig.max_commit_records,
        metavar="N",
        help="group commit: a batch audited while the previous one still waits for its commit joins "
        f"it, up to N records per transaction; 0 never joins (default {ConsumerConfig.max_commit_records})",
    )
    parser.add_argument(
        "--until-idle", type=float, metavar="SECONDS", help="exit after SECONDS with nothing new"
    )
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    parser.add_argument(
        "--session-timeout-ms", type=int, help="default 2000 on the embedded broker, else 10000"
    )
    parser.add_argument(
        "--heartbeat-interval-ms", type=int, help="default 300 on the embedded broker, else 3000"
    )
    parser.add_argument(
        "--max-poll-interval-ms", type=int, default=300_000, help="leave the group if a poll takes longer"
    )
    parser.add_argument("--instance-id", help="static group membership id (fewer rebalances on restart)")
    parser.add_argument("--create-topics", action="store_true", help="create missing topics first")
    parser.add_argument(
        "--partitions", type=int, default=4, help="partitions for --create-topics (default 4)"
    )
    add_logging(
        parser,
        text_help="a progress line, a closing summary, and warnings and errors as plain lines "
        "(info records too with --log-level debug)",
    )
    parser.set_defaults(handler=run)


async def _create_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(name, partitions, 1) for name in topics if name not in existing]
        if missing:
            await admin.create_topics(missing)
            log.info("created topics", extra={"topics": [topic.name for topic in missing]})
    finally:
        await admin.close()


async def _serve(consumer: LedgerConsumer, report: ConsumeReport, *, progress: bool) -> None:
    loop = asyncio.get_running_loop()
    watcher = asyncio.create_task(report.draw_progress() if progress else report.watch_lag())
    task = asyncio.current_task()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        log.info("signal received", extra={"signal": signal.Signals(signum).name})
        if signals == 1:
            consumer.request_stop()
        elif task is not None:  # a second signal abandons the batch in flight (nothing half-written)
            task.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await consumer.run()
    finally:
        watcher.cancel()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def run(args: argparse.Namespace) -> int:
    """Resolve broker and database, then consume until stopped or idle."""
    text = configure_logging(args.log_level, log_format=args.log_format) == "text"
    if text and args.log_level == "info":  # the progress line and the summary stand for info records
        logging.getLogger().setLevel(logging.WARNING)
    settings = settings_with(bootstrap=args.bootstrap, database_url=args.database_url)
    broker = resolve_broker(settings)
    assert broker is not None
    timing = broker.group_timing()
    host = socket.gethostname()
    config = ConsumerConfig(
        bootstrap=broker.bootstrap,
        topic=args.topic or settings.topic,
        dlq_topic=args.dlq_topic or settings.dlq_topic,
        group_id=args.group or settings.group_id,
        host=host,
        max_records=args.max_records,
        max_batch_bytes=args.max_batch_bytes,
        max_in_flight=args.max_in_flight,
        max_commit_records=args.max_commit_records,
        max_message_bytes=settings.max_message_bytes,
        until_idle=args.until_idle,
        session_timeout_ms=args.session_timeout_ms or timing["session_timeout_ms"],
        heartbeat_interval_ms=args.heartbeat_interval_ms or timing["heartbeat_interval_ms"],
        max_poll_interval_ms=args.max_poll_interval_ms,
        group_instance_id=args.instance_id,
        client_id=f"ledger-consumer-{host}",
    )
    metrics = ConsumerMetrics()
    metrics_port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    if metrics_port:
        metrics.serve(metrics_port)
        log.info("serving metrics", extra={"port": metrics_port})
    if args.create_topics or broker.origin == "started":
        asyncio.run(_create_topics(broker.bootstrap, [config.topic, config.dlq_topic], args.partitions))
    report = ConsumeReport(metrics, config.topic, sys.stderr)
    progress = text and sys.stderr.isatty()
    ran = False
    status = EXIT_USAGE
    try:
        with open_writer_store(settings) as store:  # never migrates: `ledger migrate` is the owner's step
            consumer = LedgerConsumer(config, store, audit_envelope, metrics)
            ran = True
            asyncio.run(_serve(consumer, report, progress=progress))
            status = EXIT_OK
    except asyncio.CancelledError:
        log.warning("stopped by a second signal; the batch in flight was abandoned and will be re-delivered")
        status = 130
    except SchemaNotReadyError as exc:
        print(f"ledger consume: {exc.message}", file=sys.stderr)
        status = EXIT_USAGE
    except LedgerError as exc:  # 1: a ledger or source log it cannot trust; 2: no usable database
        log.error("ledger error", extra={"code": exc.code, "error": exc.message})
        status = for_ledger_error(exc)
    except KafkaError as exc:  # an unreachable or failing broker: an environment error (2)
        log.error(
            "broker error", extra={"bootstrap": broker.bootstrap, "error": f"{type(exc).__name__}: {exc}"}
        )
    if ran:
        outcome = {0: "finished", 130: "stopped"}.get(status, "failed")
        if text:
            report.print_summary(outcome)
        else:
            report.log_summary(outcome)
    return status
