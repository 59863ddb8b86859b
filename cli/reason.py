"""``ledger reason`` (ad-hoc check) and ``ledger reason-worker`` (the reasoning stage).

``ledger reason QUERY --expression EXPR [--reasoning TEXT] [--providers anthropic,openai]
[--no-cross-validation] [--format json|text]`` runs the ReasoningVerifier once and prints the
result (JSON: the canonical result with every provider exchange). Exit 0 when valid, 1 when
invalid (fail-closed results included), 2 on usage errors (bad arguments, unknown provider,
a query or expression the verifier refuses).

``ledger reason-worker [--once] [--concurrency N] [--providers ...] [--poll-interval S]
[--retry-failed] [--max-attempts N] [--retry-backoff S]`` verifies the submissions whose
envelope asked for it and appends ``reasoning.verified`` entries. It is a separate process from
``ledger consume`` and never blocks it; run one or more next to the consumers.

Providers come from the usual variables (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``,
``ANTHROPIC_MODEL``, ``OPENAI_*``, ``AZURE_OPENAI_*``, ``GEMINI_*``); one whose key is missing
is recorded as unavailable and the result fails closed. ``LEDGER_REDIS_URL`` adds a Redis layer
under the process's own result cache; its entries live in a namespace private to that process's
verifier, so two processes never serve each other's results.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE, for_ledger_error
from cli.options import add_database_url, add_logging
from consumers.logs import configure_logging
from devstack.database import open_database
from engine.reasoning import ProviderConfigError, ReasoningResult, ReasoningTask, ReasoningVerifier
from engine.reasoning.env import build_providers_from_env
from ledger.errors import LedgerError, SchemaNotReadyError
from ledger.migration import WRITER_ROLE, require_head, require_role_member
from ledger.reasoning.stage import status_of
from ledger.reasoning.worker import ReasoningWorker, WorkerConfig
from ledger.settings import LedgerSettings, get_settings
from ledger.store.ledger_store import LedgerStore

__all__ = ["DEFAULT_PROVIDERS", "register", "render_text", "run_reason", "run_worker"]

DEFAULT_PROVIDERS = "anthropic,openai"

log = logging.getLogger(__name__)


def _provider_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ProviderConfigError("--providers needs at least one provider name")
    return names


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``reason`` and ``reason-worker`` commands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--providers",
        default=DEFAULT_PROVIDERS,
        help=f"comma-separated, in order: primary first (default {DEFAULT_PROVIDERS})",
    )
    common.add_argument("--timeout", type=_non_negative, default=30.0, help="seconds per provider call")
    common.add_argument("--no-cache", action="store_true", help="do not use the result cache")
    add_logging(common, text_help="one plain line per record")
    reason = subparsers.add_parser(
        "reason",
        parents=[common],
        description="Runs the ReasoningVerifier once and prints the result (JSON: the canonical result with "
        "every provider exchange). Providers read their usual variables (ANTHROPIC_API_KEY, OPENAI_*, "
        "AZURE_OPENAI_*, GEMINI_*); a provider without a key fails the result closed. Exit 0 when valid, "
        "1 when invalid, 2 on a usage error.",
    )
    reason.add_argument("query", metavar="QUERY", help="the question the expression should answer")
    reason.add_argument("--expression", required=True, metavar="EXPR", help="arithmetic: numbers, + - * / **")
    reason.add_argument("--reasoning", default=None, metavar="TEXT", help="optional chain of thought")
    reason.add_argument("--no-cross-validation", action="store_true", help="skip the secondary provider")
    reason.add_argument("--format", choices=("json", "text"), default="json", help="output (default json)")
    reason.set_defaults(handler=run_reason)
    worker = subparsers.add_parser(
        "reason-worker",
        parents=[common],
        description="Finds the submissions whose envelope asked for reasoning verification, runs the "
        "ReasoningVerifier on each and appends a reasoning.verified entry. It runs next to `ledger consume` "
        "and never blocks it. LEDGER_REDIS_URL adds a shared result cache.",
    )
    worker.add_argument("--once", action="store_true", help="one pass over pending work, then exit")
    worker.add_argument("--concurrency", type=_positive_int, default=4, help="verifications in flight (4)")
    worker.add_argument("--poll-interval", type=_non_negative, default=2.0, help="seconds between passes")
    worker.add_argument("--retry-failed", action="store_true", help="re-verify fail_closed results")
    worker.add_argument("--max-attempts", type=_positive_int, default=3, help="attempts per submission (3)")
    worker.add_argument(
        "--retry-backoff", type=_non_negative, default=60.0, help="base seconds before a retry"
    )
    worker.add_argument("--no-cross-validation", action="store_true", help="skip the secondary provider")
    add_database_url(worker)
    worker.set_defaults(handler=run_worker)


def _verifier(args: argparse.Namespace, settings: LedgerSettings) -> ReasoningVerifier:
    providers = build_providers_from_env(_provider_names(args.providers), timeout=args.timeout)
    return ReasoningVerifier(providers, enable_cache=not args.no_cache, redis_url=settings.redis_url or None)


def render_text(result: ReasoningResult) -> str:
    """A human summary: verdict, formulas, issues, trace and exchanges."""
    lines = [
        f"{status_of(result).upper()}  confidence {result.confidence}",
        f"primary formula:     {result.primary_formula}",
    ]
    if result.alternative_formula is not None:
        lines.append(f"alternative formula: {result.alternative_formula}")
    lines += [f"issue: {issue}" for issue in result.issues]
    lines += [f"trace: {step}" for step in result.reasoning_trace]
    for exchange in result.exchanges:
        outcome = f"error {exchange.error_code}" if exchange.failed else "answered"
        lines.append(f"exchange: {exchange.purpose} {exchange.vendor}/{exchange.model} {outcome}")
    lines.append(f"result_hash: {result.result_hash()}")
    return "\n".join(lines)


def run_reason(args: argparse.Namespace) -> int:
    """Verify once; print; exit 0 valid, 1 invalid, 2 usage error."""
    configure_logging(args.log_level, log_format=args.log_format)
    try:
        verifier = _verifier(args, get_settings())
    except (ProviderConfigError, ValueError) as exc:
        print(f"ledger reason: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        task = ReasoningTask(expression=args.expression, reasoning=args.reasoning)
        result = verifier.verify_reasoning(
            args.query, task, enable_cross_validation=not args.no_cross_validation
        )
    except (TypeError, ValueError) as exc:
        print(f"ledger reason: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        verifier.close()
    print(result.canonical_json() if args.format == "json" else render_text(result))
    return EXIT_OK if result.is_valid else EXIT_FAILED


async def _serve(worker: ReasoningWorker, once: bool, poll_interval: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, stop.set)
    if once:
        stats = await worker.run_once(stop)
        print(f"reason-worker: {stats.summary()}")
        return 1 if stats.errors else 0
    log.info("reason-worker polling every %ss (concurrency %d)", poll_interval, worker.config.concurrency)
    await worker.run_forever(stop, poll_interval)
    return 0


def run_worker(args: argparse.Namespace) -> int:
    """Run the reasoning stage until stopped (or one pass with ``--once``)."""
    configure_logging(args.log_level, log_format=args.log_format)
    settings = get_settings()
    if args.database_url:
        settings = settings.model_copy(update={"database_url": args.database_url})
    try:
        config = WorkerConfig(
            concurrency=args.concurrency,
            retry_failed=args.retry_failed,
            max_attempts=args.max_attempts,
            retry_backoff=args.retry_backoff,
            cross_validation=not args.no_cross_validation,
        )
        verifier = _verifier(args, settings)
    except (ProviderConfigError, ValueError) as exc:
        print(f"ledger reason-worker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        # never migrates (the owner's step, `ledger migrate`); appends run as ledger_writer
        with open_database(settings, migrate=False) as engine:
            require_head(engine, command_name="ledger reason-worker")
            require_role_member(engine, WRITER_ROLE)
            with LedgerStore(engine, role=WRITER_ROLE) as store:
                worker = ReasoningWorker(store, verifier, config)
                return asyncio.run(_serve(worker, args.once, args.poll_interval))
    except SchemaNotReadyError as exc:
        print(f"ledger reason-worker: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except LedgerError as exc:
        print(f"ledger reason-worker: {exc}", file=sys.stderr)
        return for_ledger_error(exc)
    finally:
        verifier.close()
