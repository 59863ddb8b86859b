"""The one progress renderer of the ``ledger`` command line: ``rich.progress`` on a terminal.

Three shapes, all on stderr and all drawn by ``rich.progress`` when the stream is a terminal:

- :class:`StepProgress`: one line per step (``ledger up``, ``ledger demo``), a spinner with the
  elapsed time and live detail while it runs, then ``[prefix] label: done in 1.2s detail``.
- :class:`CountProgress`: ``done/total`` with a bar, the step rate and the time left
  (``ledger replay``, ``ledger verify``).
- :class:`LiveLine`: one line of text redrawn in place (``ledger consume``).

Off a terminal there is no animation: a step prints ``[prefix] label ...`` and its closing line,
and a count asked for with ``--progress`` is one text line redrawn with ``\\r``, as scripts and
logs have always read them. ``rich`` is imported only when something is drawn on a terminal.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["CountProgress", "LiveLine", "StepProgress"]


def _is_terminal(stream: TextIO) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def _rich_progress(stream: TextIO, *columns: object, transient: bool) -> Progress:
    """A started ``rich.progress.Progress`` drawing ``columns`` on ``stream`` (a terminal)."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(file=stream, force_terminal=True, highlight=False)
    # redirect_*=False: log lines go straight to the stream and the next refresh redraws below them
    progress = Progress(
        *columns,  # type: ignore[arg-type]  # rich's column union is wider than ``object`` shows
        console=console,
        transient=transient,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    progress.start()
    return progress


class StepProgress:
    """One line per step on ``stream`` (stderr): a spinner on a terminal, start/end lines otherwise."""

    def __init__(self, stream: TextIO | None = None, *, prefix: str = "ledger") -> None:
        """Write to ``stream`` (default: stderr)."""
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.tty = _is_terminal(self.stream)
        self._detail = ""
        self._live: tuple[Progress, TaskID, str] | None = None

    @property
    def detail(self) -> str:
        """What the running step shows after its label; set it to update the line."""
        return self._detail

    @detail.setter
    def detail(self, value: str) -> None:
        self._detail = value
        if self._live is not None:
            progress, task, label = self._live
            progress.update(task, description=f"{label} {value}" if value else label)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def note(self, message: str) -> None:
        """A one-off line."""
        self._write(f"[{self.prefix}] {message}\n")

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[StepProgress]:
        """Report ``label`` while the block runs; set ``.detail`` to show live or final detail."""
        self._detail = ""
        started = time.monotonic()
        if self.tty:
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

            progress = _rich_progress(
                self.stream,
                TextColumn(f"[{self.prefix}]", markup=False),
                SpinnerColumn(spinner_name="line"),
                TextColumn("{task.description}", markup=False),
                TimeElapsedColumn(),
                transient=True,
            )
            self._live = (progress, progress.add_task(label, total=None), label)
        else:
            self._write(f"[{self.prefix}] {label} ...\n")
        ok = False
        try:
            yield self
            ok = True
        finally:
            if self._live is not None:
                self._live[0].stop()
                self._live = None
            verdict = "done" if ok else "FAILED"
            detail = f" {self._detail}" if self._detail else ""
            elapsed = time.monotonic() - started
            self._write(f"[{self.prefix}] {label}: {verdict} in {elapsed:.1f}s{detail}\n")


class CountProgress:
    """``done/total`` on ``stream``: a ``rich`` bar on a terminal, else one ``\\r``-redrawn text line."""

    WIDTH = 30  # characters of the text bar

    def __init__(self, label: str, stream: TextIO, *, enabled: bool, interval: float = 0.2) -> None:
        """Draw nothing unless ``enabled``; off a terminal, redraw at most every ``interval`` seconds."""
        self.label, self.stream, self.enabled, self.interval = label, stream, enabled, interval
        self.tty = _is_terminal(stream)
        self._started = time.monotonic()
        self._last = 0.0
        self._drawn = False
        self._bar: tuple[Progress, TaskID] | None = None

    def __call__(self, done: int, total: int, steps: int, steps_total: int) -> None:
        """Update with ``done`` of ``total`` submissions and ``steps`` steps so far."""
        if not self.enabled:
            return
        now = time.monotonic()
        rate = f"{steps / max(now - self._started, 1e-9):,.0f} steps/s"
        if self.tty:
            self._draw_bar(done, total, rate)
            return
        if now - self._last < self.interval and done < total:
            return
        self._last = now
        filled = self.WIDTH if total <= 0 else min(self.WIDTH, self.WIDTH * done // total)
        eta = ""
        if 0 < done < total:
            eta = f"  ETA {(now - self._started) * (total - done) / done:,.0f}s"
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done:,}/{total:,}  {rate}{eta}  ")
        self.stream.flush()
        self._drawn = True

    def _draw_bar(self, done: int, total: int, rate: str) -> None:
        if self._bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

            progress = _rich_progress(
                self.stream,
                TextColumn(self.label, markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}", markup=False),
                TimeRemainingColumn(),
                transient=False,
            )
            self._bar = (progress, progress.add_task(self.label, total=total, rate=rate))
        progress, task = self._bar
        progress.update(task, total=total, completed=done, rate=rate)

    def close(self) -> None:
        """Leave the finished bar on its own line."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class LiveLine:
    """One line of text redrawn in place on a terminal (``rich.progress``), erased by :meth:`stop`."""

    def __init__(self, stream: TextIO) -> None:
        """Nothing is drawn before the first :meth:`update`."""
        self.stream = stream
        self._line: tuple[Progress, TaskID] | None = None

    def update(self, text: str) -> None:
        """Show ``text`` instead of the previous line."""
        if self._line is None:
            from rich.progress import TextColumn

            progress = _rich_progress(
                self.stream, TextColumn("{task.description}", markup=False), transient=True
            )
            self._line = (progress, progress.add_task(text, total=None))
        progress, task = self._line
        progress.update(task, description=text)

    def stop(self) -> None:
        """Erase the line; idempotent."""
        if self._line is not None:
            self._line[0].stop()
            self._line = None
