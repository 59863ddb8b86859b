"""Every ``ledger`` command explains itself: a description, help on every option, no leftover markup,
and ``ledger --help`` lists every command under its journey."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from cli.commands import COMMANDS as TABLE
from cli.commands import GROUPS
from cli.main import main as ledger_main
from cli.parser import build_parser, command_parsers

MARKUP = re.compile(r"``|:(func|class|mod|meth|data|attr):")
COMMANDS = command_parsers()


def _help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        ledger_main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_description_and_help_on_every_option(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = COMMANDS[name]
    assert (parser.description or "").strip(), f"`ledger {name}` has no description"
    # argparse has no public way to list a parser's arguments
    actions: list[argparse.Action] = parser._actions
    unexplained = [a.option_strings or [a.dest] for a in actions if not (a.help or "").strip()]
    assert unexplained == [], f"`ledger {name}`: options without help: {unexplained}"
    text = _help_text([name, "--help"], capsys)
    assert not MARKUP.search(text), f"`ledger {name} --help` prints markup: {MARKUP.search(text)}"


def test_commands_that_differ_have_different_descriptions() -> None:
    by_text: dict[str, list[str]] = {}
    for name, parser in COMMANDS.items():
        by_text.setdefault(parser.description or "", []).append(name)
    assert [names for names in by_text.values() if len(names) > 1] == []


def test_top_level_help_lists_every_command_once_under_its_journey(
    capsys: pytest.CaptureFixture[str],
) -> None:
    grouped = [command.name for command in TABLE]
    assert sorted(grouped) == sorted(COMMANDS), "the table lists exactly the registered commands, once"
    assert {command.group for command in TABLE} == set(GROUPS)
    text = _help_text(["--help"], capsys)
    assert not MARKUP.search(text)
    for title in GROUPS:
        block = text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        names = [command.name for command in TABLE if command.group == title]
        assert [line.split()[0] for line in block.splitlines()] == names


def test_the_table_names_the_module_that_registers_each_command() -> None:
    """The table is what ``ledger --help`` prints without importing anything: it must not drift."""
    for command in TABLE:
        _, subparsers = build_parser([command])
        assert command.name in subparsers.choices, f"{command.module} does not register {command.name}"


def test_top_level_help_imports_no_command_module() -> None:
    code = (
        "import sys; from cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('ledger', 'consumers', 'api', 'engine'))\n"
        "print(loaded, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"
