"""The ``ledger`` console script: the composition root of the command line."""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Sequence

from cli.commands import find
from cli.exit_status import EXIT_USAGE
from cli.parser import build_parser
from devstack.extra import EmbeddedExtraMissing

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool killed by SIGPIPE
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}  # writing the report failed


def run(argv: Sequence[str]) -> int:
    """Parse ``argv`` and run the chosen command; returns the process exit code."""
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    command = find(name) if name is not None else None
    # no name: only the grouped help; unknown name: every command, so argparse lists them all
    parser, _ = build_parser([] if name is None else [command] if command else None)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(handler(args))
    except EmbeddedExtraMissing as exc:  # one line naming the extra, not a traceback
        print(f"ledger {args.command} {exc}", file=sys.stderr)
        return EXIT_USAGE  # the command needs an optional extra that is not installed
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (
        UnicodeEncodeError
    ) as exc:  # an argument with bytes that are not UTF-8 reached a database or a note
        print(f"ledger {args.command}: an argument is not UTF-8 text ({exc.reason})", file=sys.stderr)
        return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ledger`` command line."""
    try:
        code = run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a closed pipe shows up here at the latest, not at interpreter exit
    except BrokenPipeError:
        # The reader went away (`ledger publish ... | head`): end quietly, as Unix tools do. Nothing
        # is lost by it: whatever the command did (records sent, entries appended) is already done,
        # only the rest of its report has nowhere to go.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise
        _silence_stdout()  # the output cannot be written (a full disk, /dev/full): an environment error
        print(f"ledger: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush cannot raise again as a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
