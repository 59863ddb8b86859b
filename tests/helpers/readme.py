"""Run a Markdown file's command blocks as a reader would: parsed in order, typed into one shell.

``command_blocks`` reads the fenced blocks of a Markdown text; ``ShellSession`` is one ``bash``
that runs commands one after another, so ``export``, plain variables and ``&`` jobs carry from one
command to the next exactly as in a terminal. Each command's stdout and stderr go to files, so a
background job (``ledger serve &``) never holds a pipe the test is reading.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Command:
    """One command of a block: ``text`` as written (continuations kept), ``key`` without comments."""

    text: str
    key: str


@dataclass(frozen=True)
class Block:
    """A fenced block: its info string (``""``, ``sql``, ``text``, ...), section heading and lines."""

    language: str
    heading: str
    body: str

    @property
    def commands(self) -> list[Command]:
        """The logical lines of the block (a trailing ``\\`` joins the next line), blank ones dropped."""
        return _logical_lines(self.body.splitlines())

    @property
    def prompted(self) -> list[Command]:
        """The commands of a terminal transcript: lines after a ``$ `` prompt, with their continuations."""
        lines: list[str] = []
        for line in self.body.splitlines():
            if line.startswith("$ "):
                lines.append(line[2:])
            elif lines and lines[-1].endswith("\\"):
                lines.append(line)
        return _logical_lines(lines)


def _logical_lines(lines: list[str]) -> list[Command]:
    commands: list[Command] = []
    pending: list[str] = []
    for line in lines:
        pending.append(line)
        if line.endswith("\\"):
            continue
        text = "\n".join(pending)
        pending = []
        key = " ".join(without_comment(part.removesuffix("\\")) for part in text.splitlines())
        if key.strip():
            commands.append(Command(text=text, key=" ".join(key.split())))
    return commands


def without_comment(line: str) -> str:
    """``line`` up to its shell comment (a ``#`` after blank space, outside quotes), stripped."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip()
    return line.strip()


def command_blocks(markdown: str) -> list[Block]:
    """Every fenced block of ``markdown`` in order, with the ``#``-heading it sits under."""
    blocks: list[Block] = []
    heading = ""
    language: str | None = None
    body: list[str] = []
    for line in markdown.splitlines():
        fence = _FENCE.match(line)
        if language is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif fence:
                language, body = fence.group(1), []
        elif fence and not fence.group(1):
            blocks.append(Block(language=language, heading=heading, body="\n".join(body)))
            language = None
        else:
            body.append(line)
    return blocks


@dataclass(frozen=True)
class Ran:
    """What one command did: exit status, stdout and stderr."""

    command: str
    status: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The command and everything it printed, for an assertion message."""
        return f"$ {self.command}\nexit {self.status}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


class ShellSession:
    """One ``bash`` (no profile, no rc file) in its own process group, fed one command at a time."""

    def __init__(self, cwd: Path, env: dict[str, str], log_dir: Path) -> None:
        """Start the shell in ``cwd``; each command's output is kept under ``log_dir``."""
        bash = shutil.which("bash", path=env.get("PATH"))
        if bash is None:
            raise RuntimeError("no bash on the PATH")
        self._log_dir = log_dir
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._count = 0
        self._marker = f"__readme_done_{uuid.uuid4().hex}__"
        self._buffer = b""
        self._proc = subprocess.Popen(
            [bash, "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def run(self, command: str, timeout: float) -> Ran:
        """Type ``command`` into the shell and wait (at most ``timeout`` s) for its exit status."""
        self._count += 1
        out = self._log_dir / f"{self._count:02d}.out"
        err = self._log_dir / f"{self._count:02d}.err"
        script = (
            f"{{ {command}\n}} >{shlex.quote(str(out))} 2>{shlex.quote(str(err))} </dev/null\n"
            f'echo "{self._marker} $?"\n'
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write(script.encode())
        self._proc.stdin.flush()
        status, shell_said = self._wait_marker(timeout)

        def read(path: Path) -> str:
            return path.read_text(errors="replace") if path.exists() else ""

        return Ran(command, status, read(out), shell_said + read(err))

    def _wait_marker(self, timeout: float) -> tuple[int, str]:
        """The exit status the shell echoed after the command, and anything else it printed."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                found = re.search(rb"(?m)^" + self._marker.encode() + rb" (\d+)\n", self._buffer)
                if found:
                    said = self._buffer[: found.start()].decode(errors="replace")
                    self._buffer = self._buffer[found.end() :]
                    return int(found.group(1)), said
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no exit status after {timeout:.0f} s")
                if selector.select(left):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        said = self._buffer.decode(errors="replace")
                        raise RuntimeError(f"the shell exited (status {self._proc.wait()}): {said}")
                    self._buffer += chunk

    def close(self) -> None:
        """End the shell and every job it left in its process group (``ledger serve &``)."""
        if self._proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
