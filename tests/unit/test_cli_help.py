"""Every ``ledger`` command explains itself: a description, help on every option, no leftover markup,
and ``ledger --help`` lists every command under its journey."""

from __future__ import annotations

import argparse
import re
from importlib import import_module

import pytest

from cli.main import CONSUMER_COMMAND_MODULES
from cli.main import main as ledger_main
from cli.parser import COMMAND_GROUPS, OTHER_GROUP, command_parsers

MARKUP = re.compile(r"``|:(func|class|mod|meth|data|attr):")
COMMANDS = command_parsers([import_module(name).register for name in CONSUMER_COMMAND_MODULES])


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
    grouped = [name for _, names in COMMAND_GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS), "each command belongs to exactly one journey"
    text = _help_text(["--help"], capsys)
    assert OTHER_GROUP not in text and not MARKUP.search(text)
    for title, names in COMMAND_GROUPS:
        block = text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in block.splitlines()] == list(names)
