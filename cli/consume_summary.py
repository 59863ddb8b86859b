"""What ``ledger consume`` tells a person at a terminal: a progress line and a closing summary.

Both are read from the process's :class:`~consumers.metrics.ConsumerMetrics` counters, so they
say exactly what the ``/metrics`` endpoint says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TextIO

from prometheus_client.metrics import MetricWrapperBase

from cli.progress import LiveLine
from consumers.metrics import ConsumerMetrics

__all__ = ["ConsumeReport", "Totals"]

log = logging.getLogger("consumers.consume")


def _by_label(metric: MetricWrapperBase, label: str) -> dict[str, float]:
    """A metric's sample values summed per value of ``label`` (``_created`` samples left out)."""
    values: dict[str, float] = {}
    for family in metric.collect():
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                key = sample.labels.get(label, "")
                values[key] = values.get(key, 0.0) + sample.value
    return values


def _total(metric: MetricWrapperBase) -> int:
    return int(sum(_by_label(metric, "topic").values()))


@dataclass(frozen=True)
class Totals:
    """The counters of one run, as a person reads them."""

    consumed: int
    audited: int
    rejected: dict[str, int]
    duplicates: int
    conflicts: int
    lag: dict[int, int] = field(default_factory=dict)

    @property
    def rejected_total(self) -> int:
        """Records refused, all reasons together."""
        return sum(self.rejected.values())


@dataclass
class ConsumeReport:
    """Reads the counters while the consumer runs; draws progress and prints the summary."""

    metrics: ConsumerMetrics
    topic: str
    stream: TextIO
    started: float = field(default_factory=time.monotonic)
    _last_lag: dict[int, int] = field(default_factory=dict)

    def remember_lag(self) -> None:
        """Keep the lag gauge's values, if any (a member forgets its lag when it leaves)."""
        lag = {
            int(partition): int(value)
            for partition, value in _by_label(self.metrics.lag, "partition").items()
        }
        if lag:
            self._last_lag = lag

    def totals(self) -> Totals:
        """The counters now; the lag as last seen (:meth:`remember_lag`)."""
        self.remember_lag()
        rejected = {
            reason: int(count) for reason, count in _by_label(self.metrics.rejected, "reason").items()
        }
        return Totals(
            consumed=_total(self.metrics.consumed),
            audited=_total(self.metrics.audited),
            rejected=dict(sorted(rejected.items())),
            duplicates=_total(self.metrics.duplicates),
            conflicts=_total(self.metrics.conflicts),
            lag=dict(sorted(self._last_lag.items())),
        )

    def progress_line(self) -> str:
        """``consuming TOPIC: N read, N committed, N rejected, lag N, 12.3 s``."""
        t = self.totals()
        lag = str(sum(t.lag.values())) if t.lag else "?"
        return (
            f"consuming {self.topic}: {t.consumed} read, {t.audited} committed, "
            f"{t.rejected_total} rejected, lag {lag}, {time.monotonic() - self.started:.1f} s"
        )

    async def draw_progress(self, interval: float = 0.25) -> None:
        """Redraw the progress line in place every ``interval`` seconds until cancelled, then erase it."""
        line = LiveLine(self.stream)
        try:
            while True:
                line.update(self.progress_line())
                await asyncio.sleep(interval)
        finally:
            line.stop()

    async def watch_lag(self, interval: float = 0.25) -> None:
        """Only remember the lag (no drawing) until cancelled, for the summary."""
        while True:
            self.remember_lag()  # the lag gauge alone: collecting every counter cost the loop ~3 %
            await asyncio.sleep(interval)

    def summary_lines(self, outcome: str) -> list[str]:
        """The closing summary, one fact a line."""
        t = self.totals()
        reasons = ", ".join(f"{reason} {count}" for reason, count in t.rejected.items())
        partitions = ", ".join(f"p{partition} {lag}" for partition, lag in t.lag.items())
        return [
            f"ledger consume {outcome} after {time.monotonic() - self.started:.1f} s (topic {self.topic})",
            f"  records read        {t.consumed}",
            f"  bundles committed   {t.audited}",
            f"  rejected            {t.rejected_total}" + (f"  ({reasons})" if reasons else ""),
            f"  duplicates          {t.duplicates}",
            f"  conflicts           {t.conflicts}",
            f"  lag                 {sum(t.lag.values())}  ({partitions})"
            if t.lag
            else "  lag                 unknown",
        ]

    def print_summary(self, outcome: str) -> None:
        """Erase the progress line (on a terminal) and print the summary."""
        prefix = "\r\x1b[K" if self.stream.isatty() else ""
        self.stream.write(prefix + "\n".join(self.summary_lines(outcome)) + "\n")
        self.stream.flush()

    def log_summary(self, outcome: str) -> None:
        """The same facts as one JSON log line (``event`` = ``consume summary``)."""
        t = self.totals()
        log.info(
            "consume summary",
            extra={
                "outcome": outcome,
                "elapsed_s": round(time.monotonic() - self.started, 3),
                "records_read": t.consumed,
                "committed": t.audited,
                "rejected": t.rejected,
                "duplicates": t.duplicates,
                "conflicts": t.conflicts,
                "lag": {str(partition): lag for partition, lag in t.lag.items()},
            },
        )
