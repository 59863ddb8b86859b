"""``ledger replay``: re-run the engine on stored inputs and compare with what the ledger holds.

For each selected audited submission, in ledger order: decode the canonical PromptSpec and
EvidenceBundle of its ``submission.received`` entry with the consumer's validation
(:func:`engine.envelope_inputs.decode_stored_inputs`), run :func:`engine.pipeline.run_pipeline`, and
compare every step, step hash, the verdict, the roots and the other committed payload parts with
the stored step rows and entries (:mod:`ledger.replay.compare`). The common case is settled first
from texts alone: when every stored payload equals the one the draft builder rebuilds, and every
step row its replayed step, the submission is identical and nothing else is parsed. Recorded LLM exchanges of
``reasoning.verified`` entries are replayed too (:mod:`ledger.replay.reasoning`).

Statuses: ``identical``; ``diverged`` (same engine version, something differs: nondeterminism or
tampering); ``version_drift`` (the recorded engine version is not :data:`ENGINE_VERSION`:
differences are expected and listed, not counted as divergence); ``error`` (the stored inputs
cannot be replayed at all). Pages are read from one snapshot; with ``jobs > 1`` worker processes
replay one page while the next is read.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, fields, replace
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.context import BaseContext
from typing import Any, Literal

import orjson
from pydantic import ValidationError
from sqlalchemy import Engine

from engine.auditor import AuditorAgent
from engine.envelope import DecodedEnvelope
from engine.envelope_inputs import decode_stored_inputs
from engine.judge import JudgeAgent
from engine.merkle.rfc6962 import Frontier, leaf_hash
from engine.pipeline import PipelineResult, run_pipeline
from engine.version import ENGINE_VERSION
from ledger.collection import fewer_collections, frozen_heap
from ledger.replay.compare import Difference, StoredArtifacts, compare_run
from ledger.replay.identical import whole_run_identical
from ledger.replay.reasoning import REASONING_STATUSES, ReasoningReplay, reasoning_stage, replay_reasoning
from ledger.replay.received import received_identical, received_pieces
from ledger.replay.results import ResultsTree, leaf_bytes
from ledger.replay.source import ReplayCase, ReplaySelection, as_text, count_selected, iter_replay_pages
from ledger.store.drafts import outcome_entries, payload_entries, submission_draft
from ledger.store.read import auto_jobs, read_ahead, snapshot

__all__ = ["ReplayReport", "SubmissionReplay", "replay_case", "run_replay", "worker_context"]

ReplayStatus = Literal["identical", "diverged", "version_drift", "error"]
MAX_RESULTS = 1000
FIRST_PAGE_SIZE = 50  # submissions; replay starts on these while the first full page is read
AUTO_PARALLEL_MIN = 1000  # submissions; below this, replaying inline beats starting workers

_AUDITOR = AuditorAgent()
_JUDGE = JudgeAgent()


@dataclass(frozen=True)
class SubmissionReplay:
    """The replay of one submission."""

    submission_id: str
    market_id: str | None
    first_seq: int
    status: ReplayStatus
    recorded_engine_version: str
    steps: int
    head_stream_seq: int = 0
    differing: tuple[str, ...] = ()
    first: Difference | None = None
    por_root: str | None = None
    error: str | None = None
    reasoning: tuple[ReasoningReplay, ...] = ()

    @property
    def failed(self) -> bool:
        """Diverged, unreplayable, or a reasoning entry diverged or failed."""
        return self.status in ("diverged", "error") or any(item.failed for item in self.reasoning)

    def leaf(self) -> bytes:
        """This outcome as a leaf of the run's ``results_root`` (canonical JSON bytes)."""
        return leaf_bytes(
            {
                "por_root": self.por_root,
                "recorded_engine_version": self.recorded_engine_version,
                "status": self.status,
                "submission_id": self.submission_id,
            }
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {
            "submission_id": self.submission_id,
            "market_id": self.market_id,
            "first_seq": self.first_seq,
            "status": self.status,
            "recorded_engine_version": self.recorded_engine_version,
            "steps": self.steps,
            "differing": list(self.differing),
            "first_difference": None if self.first is None else self.first.to_json(),
            "por_root": self.por_root,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.reasoning:
            out["reasoning"] = [item.to_json() for item in self.reasoning]
        return out


def _load(text: str | None, kind: str) -> dict[str, Any]:
    if text is None:
        raise ValueError(f"no {kind} entry")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"the {kind} payload is not an object")
    return value


_RECEIVED, _AUDIT, _VERDICT = _COMPARED_KINDS = ("submission.received", "audit.completed", "verdict.issued")


def _pipeline(decoded: DecodedEnvelope) -> PipelineResult:
    """The pipeline over the decoded stored inputs, with the prompt spec's canonical bytes replay's
    own decoder made from them (never the stored text: the comparison stays stored vs rebuilt)."""
    inputs = decoded.envelope
    return run_pipeline(
        inputs.prompt_spec,
        inputs.evidence_bundle,
        auditor=_AUDITOR,
        judge=_JUDGE,
        prompt_spec_canonical=decoded.prompt_spec_canonical,
        evidence_items_canonical=decoded.evidence_items_canonical,
    )


def _identical_fast(case: ReplayCase) -> PipelineResult | None:
    """The pipeline result when the submission replays identically, judged from stored texts only.

    The received payload is parsed with orjson, which reads integers beyond 64 bits as floats; an
    identical verdict still proves the parse exact, since the payload rebuilt from the parsed value
    re-emits every value as the stored text holds it (a float where the text holds digits would
    differ). The stored text's UTF-8 bytes, which the payload is parsed from, let the decoder skip
    its walk for U+0000 and lone surrogates when they hold no such escape (a text with a lone
    surrogate has no UTF-8 form: the exact path walks it). Any other outcome (None) is decided by
    the exact path, :func:`_replay_exact`.
    """
    if case.received is None or case.audit is None or case.verdict is None:
        return None
    texts = {_RECEIVED: case.received, _AUDIT: case.audit, _VERDICT: case.verdict}
    try:
        raw = case.received if isinstance(case.received, bytes) else case.received.encode("utf-8")
        received = orjson.loads(raw)
        if not isinstance(received, dict):
            return None
        decoded = decode_stored_inputs(received, raw)
        result = _pipeline(decoded)
        pieces = received_pieces(decoded, result)
        if pieces is None:  # the draft's three compared entries, no step drafts
            entries = payload_entries(decoded, result)
            identical = whole_run_identical(texts, case.step_hashes, case.step_texts, result, entries)
        else:  # the received payload checked on its bytes; the other two as the draft builds them
            identical = received_identical(raw, pieces) and whole_run_identical(
                {_AUDIT: case.audit, _VERDICT: case.verdict},
                case.step_hashes,
                case.step_texts,
                result,
                outcome_entries(result),
            )
    except Exception:  # whatever fails here, the exact path fails the same way and says why
        return None
    return result if identical else None


def replay_case(case: ReplayCase, live: bool = False) -> SubmissionReplay:
    """Replay one stored submission (pure apart from ``live`` reasoning calls)."""
    recorded = case.recorded_engine_version
    reasoning = tuple(replay_reasoning(seq, text, live=live) for seq, text in case.reasoning)
    fast = _identical_fast(case)
    status: ReplayStatus = "error"
    if fast is not None:
        status = "version_drift" if recorded != fast.engine_version else "identical"
    outcome = _outcome(
        case.submission_id,
        case.market_id,
        case.first_seq,
        status,
        recorded,
        len(case.step_texts),
        case.head_stream_seq,
        None if fast is None else fast.roots.por_root,
        reasoning,
    )
    return outcome if fast is not None else _replay_exact(case, outcome)


_new_object = object.__new__
_set_attribute = object.__setattr__
_OUTCOME_FIELDS = [
    "submission_id",
    "market_id",
    "first_seq",
    "status",
    "recorded_engine_version",
    "steps",
    "head_stream_seq",
    "differing",
    "first",
    "por_root",
    "error",
    "reasoning",
]
_OUTCOME_LAYOUT_HOLDS = (
    [item.name for item in fields(SubmissionReplay)] == _OUTCOME_FIELDS
    and not hasattr(SubmissionReplay, "__post_init__")
    and not hasattr(SubmissionReplay, "__slots__")
)
"""Whether :func:`_outcome` may set a record's ``__dict__`` (the layout it was written for)."""


def _outcome(
    submission_id: str,
    market_id: str | None,
    first_seq: int,
    status: ReplayStatus,
    recorded_engine_version: str,
    steps: int,
    head_stream_seq: int,
    por_root: str | None,
    reasoning: tuple[ReasoningReplay, ...],
) -> SubmissionReplay:
    """``SubmissionReplay(...)`` with its ``__dict__`` set at once (no ``object.__setattr__`` call per
    field; the tests pin the two equal); the constructor when the record changed shape."""
    values: dict[str, Any] = {
        "submission_id": submission_id,
        "market_id": market_id,
        "first_seq": first_seq,
        "status": status,
        "recorded_engine_version": recorded_engine_version,
        "steps": steps,
        "head_stream_seq": head_stream_seq,
        "differing": (),
        "first": None,
        "por_root": por_root,
        "error": None,
        "reasoning": reasoning,
    }
    if not _OUTCOME_LAYOUT_HOLDS:
        return SubmissionReplay(**values)
    outcome = _new_object(SubmissionReplay)
    _set_attribute(outcome, "__dict__", values)
    return outcome


def _replay_exact(case: ReplayCase, failed: SubmissionReplay) -> SubmissionReplay:
    """Every stored payload parsed exactly, the whole comparison: where the fast path gives up."""
    try:
        payloads = [
            None if text is None else as_text(text) for text in (case.received, case.audit, case.verdict)
        ]
        received = _load(payloads[0], "submission.received")
        stored = StoredArtifacts(
            engine_version=case.recorded_engine_version,
            received=received,
            audit=_load(payloads[1], "audit.completed"),
            verdict=_load(payloads[2], "verdict.issued"),
            step_ids=case.step_ids,
            step_hashes=case.step_hashes,
            step_texts=tuple(map(as_text, case.step_texts)),
            payload_texts={
                kind: text for kind, text in zip(_COMPARED_KINDS, payloads, strict=True) if text is not None
            },
        )
        # the consumer's own validation (models and cross-field checks), so stored inputs it would
        # have refused are refused here too, with its reason code
        decoded = decode_stored_inputs(received)
    except (ValueError, ValidationError) as exc:  # EnvelopeError is a ValueError
        return replace(failed, error=f"stored inputs cannot be replayed: {exc}".splitlines()[0])
    try:
        result = _pipeline(decoded)
        draft = submission_draft(decoded, result, None)  # the consumer's own draft builder
    except Exception as exc:  # the engine refusing stored inputs is a finding, not a crash
        return replace(failed, error=f"the engine failed on the stored inputs: {type(exc).__name__}: {exc}")
    outcome = compare_run(stored, result, draft)
    return replace(
        failed,
        status=outcome.status,
        differing=outcome.differing,
        first=outcome.first,
        por_root=result.roots.por_root,
    )


@dataclass
class ReplayReport:
    """Totals, the non-identical results (all results with ``keep_identical``), notes."""

    selection: ReplaySelection
    live: bool
    engine_version: str = ENGINE_VERSION
    counts: dict[str, int] = field(
        default_factory=lambda: {"identical": 0, "diverged": 0, "version_drift": 0, "error": 0}
    )
    reasoning_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONING_STATUSES, 0))
    steps: int = 0
    steps_by_status: dict[str, int] = field(
        default_factory=lambda: {"identical": 0, "diverged": 0, "version_drift": 0, "error": 0}
    )
    elapsed_seconds: float = 0.0
    jobs: int = 1
    results: list[SubmissionReplay] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tree: ResultsTree = field(default_factory=ResultsTree)
    first_seq: int | None = None
    last_seq: int | None = None
    recorded: dict[str, Any] | None = None
    results_left_out: int = 0

    @property
    def submissions(self) -> int:
        """Submissions replayed."""
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        """No divergence and no error (version drift alone is not a failure)."""
        return self.counts["diverged"] == 0 and self.counts["error"] == 0 and not self.reasoning_failed

    @property
    def reasoning_failed(self) -> bool:
        """A reasoning entry diverged or could not be replayed."""
        return self.reasoning_counts["diverged"] > 0 or self.reasoning_counts["error"] > 0

    @property
    def frontier(self) -> Frontier:
        """The tree over every outcome's :meth:`SubmissionReplay.leaf`, in ledger order."""
        return self.tree.frontier()

    @property
    def results_root(self) -> str:
        """RFC 6962 root over every outcome's :meth:`SubmissionReplay.leaf`, in ledger order."""
        return "0x" + self.frontier.root().hex()

    def add(self, item: SubmissionReplay, keep_identical: bool) -> None:
        """Count one outcome."""
        self.counts[item.status] += 1
        self.steps += item.steps
        self.steps_by_status[item.status] += item.steps
        for reasoning in item.reasoning:
            self.reasoning_counts[reasoning.status] += 1
        self.tree.append(leaf_hash(item.leaf()))
        self.first_seq = item.first_seq if self.first_seq is None else self.first_seq
        self.last_seq = item.first_seq
        if keep_identical or item.status != "identical" or (item.reasoning and item.failed):
            if len(self.results) < MAX_RESULTS:
                self.results.append(item)
            else:
                self.results_left_out += 1

    def summary(self) -> dict[str, Any]:
        """The totals as JSON-ready values."""
        total = self.submissions
        rate = self.steps / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
        return {
            "submissions": total,
            **self.counts,
            "identical_percent": round(100.0 * self.counts["identical"] / total, 3) if total else 100.0,
            "steps": self.steps,
            "reasoning": dict(self.reasoning_counts),
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "steps_per_second": round(rate, 1),
            "jobs": self.jobs,
            "results_root": self.results_root,
            "results_count": self.tree.size,
        }

    def to_json(self) -> dict[str, Any]:
        """The whole report (see docs/replay-and-verify.md for the shape)."""
        return {
            "command": "replay",
            "ok": self.ok,
            "engine_version": self.engine_version,
            "live": self.live,
            "selection": self.selection.describe(),
            "summary": self.summary(),
            "results": [item.to_json() for item in self.results],
            "results_left_out": self.results_left_out,
            "notes": list(self.notes),
            "recorded": self.recorded,
        }


def _replayed(pages: Iterable[list[ReplayCase]], live: bool, jobs: int) -> Iterator[SubmissionReplay]:
    """Outcomes in ledger order; page k is replayed (inline or by workers) while page k+1 is read."""
    if jobs <= 1:
        for page in read_ahead(iter(pages)):
            for case in page:
                yield replay_case(case, live)
        return
    with ProcessPoolExecutor(max_workers=jobs, mp_context=worker_context()) as pool:
        pending: list[_Chunk] | None = None
        for page in pages:
            size = max(1, len(page) // (jobs * 4))
            submitted = [
                _Chunk(
                    page[first : first + size], pool.submit(_replay_chunk, page[first : first + size], live)
                )
                for first in range(0, len(page), size)
            ]
            if pending is not None:
                yield from _collected(pending, live)
            pending = submitted
        if pending is not None:
            yield from _collected(pending, live)


def worker_context() -> BaseContext:
    """How replay's workers start: forked when ``fork`` exists and no other thread runs (at once,
    with the engine already imported; a thread could hold a lock at the fork that a child would
    wait on forever), else from a fork server that imports this module once (about a second)."""
    if "fork" in get_all_start_methods() and threading.active_count() == 1:
        return get_context("fork")
    context = get_context("forkserver")
    context.set_forkserver_preload([__name__])  # imported once by the server, not by every worker
    return context


@dataclass(frozen=True)
class _Chunk:
    cases: list[ReplayCase]
    outcomes: Future[list[SubmissionReplay]]


def _replay_chunk(cases: list[ReplayCase], live: bool) -> list[SubmissionReplay]:
    with fewer_collections():  # in a worker as in the parent (ledger.collection)
        return [replay_case(case, live) for case in cases]


def _collected(chunks: list[_Chunk], live: bool) -> Iterator[SubmissionReplay]:
    """The chunks' outcomes in order; while the next chunk is not done, this process replays chunks
    from the end of the list that no worker has taken yet (so the workers' start is not time lost)."""
    inline: dict[int, list[SubmissionReplay]] = {}
    taken = len(chunks)  # chunks[taken:] were cancelled and replayed here
    for index, chunk in enumerate(chunks):
        while index < taken - 1 and not chunk.outcomes.done() and chunks[taken - 1].outcomes.cancel():
            taken -= 1
            inline[taken] = _replay_chunk(chunks[taken].cases, live)
        yield from inline.pop(index) if index >= taken else chunk.outcomes.result()


def run_replay(
    engine: Engine,
    selection: ReplaySelection,
    *,
    live: bool = False,
    jobs: int = 1,
    keep_identical: bool = False,
    progress: Callable[[int, int, int, int], None] | None = None,
    recorder: Callable[[SubmissionReplay], None] | None = None,
    page_size: int = 500,
) -> ReplayReport:
    """Replay the selection; ``progress(done, total, steps_done, steps_total)`` after each outcome,
    ``recorder(outcome)`` (e.g. :class:`ledger.replay.record.ReplayRecorder`) for each one."""
    report = ReplayReport(selection=selection, live=live)
    started = time.perf_counter()
    with fewer_collections(), frozen_heap(), snapshot(engine) as conn:
        # the totals only feed the progress bar and --jobs 0: not counted (a scan of every step row) otherwise
        total, total_steps = count_selected(conn, selection) if progress is not None or jobs <= 0 else (0, 0)
        report.jobs = auto_jobs(total, AUTO_PARALLEL_MIN) if jobs <= 0 else jobs
        pages = iter_replay_pages(conn, selection, page_size, first_page=min(page_size, FIRST_PAGE_SIZE))
        for item in _replayed(pages, live, report.jobs):
            report.add(item, keep_identical)
            if recorder is not None:
                recorder(item)
            if progress is not None:
                progress(report.submissions, total, report.steps, total_steps)
    report.elapsed_seconds = time.perf_counter() - started
    if report.reasoning_counts["skipped"]:
        report.notes.append(
            f"{report.reasoning_counts['skipped']} reasoning.verified entries skipped: "
            "ledger.reasoning.stage is not installed, LLM exchanges not replayed"
        )
    if sum(report.reasoning_counts.values()) == 0:
        where = "" if reasoning_stage() is not None else " (ledger.reasoning.stage is not installed)"
        report.notes.append(
            f"no reasoning.verified entries in the selection: LLM exchanges not replayed{where}"
        )
    if report.counts["version_drift"]:
        report.notes.append(
            f"{report.counts['version_drift']} submission(s) were produced by another engine version than "
            f"{ENGINE_VERSION}: version drift, not nondeterminism"
        )
    return report
