"""``ledger consume``'s summary keeps the last lag seen after the member's gauge is cleared."""

from __future__ import annotations

import io

from cli.consume_summary import ConsumeReport
from consumers.metrics import ConsumerMetrics


def test_the_lag_watch_remembers_the_last_lag_seen() -> None:
    metrics = ConsumerMetrics()
    report = ConsumeReport(metrics, "bundles", io.StringIO())
    assert report.totals().lag == {}
    metrics.lag.labels(topic="bundles", partition="1").set(7)
    metrics.lag.labels(topic="bundles", partition="0").set(3)
    report.remember_lag()
    metrics.lag.clear()  # the member left its partitions
    report.remember_lag()
    assert report.totals().lag == {0: 3, 1: 7}
    assert "  lag                 10  (p0 3, p1 7)" in report.summary_lines("stopped")
