"""The optional mypyc build (``engine.build``, and ``ledger.build`` for the ledger's group): what it
compiles, and that a stale build is caught.

Compiling takes a minute and a C compiler, so these tests never compile; they pin the module list
(no Pydantic models, nothing whose semantics mypyc would change) and the stale/clean bookkeeping.
When the engine in this checkout *is* compiled, the last test asserts the build matches its sources.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from engine.build import COMPILED_MODULES, ENGINE, ROOT, clean, compiled_files, stale_modules
from ledger.build import GROUPS, LEDGER

NOT_COMPILED = (
    "engine/schemas/",
    "engine/merkle/cournot.py",
    "engine/auditor/config.py",
    "engine/build.py",
    "engine/loader.py",
)
MODEL_FREE_SCHEMA_MODULES = ("engine/schemas/trusted.py", "engine/schemas/utc.py")
"""Inside ``engine/schemas/`` only: builds models, defines none (the next test checks that)."""


def test_every_compiled_module_is_an_engine_source_outside_the_excluded_ones() -> None:
    for source in COMPILED_MODULES:
        assert source.startswith("engine/") and source.endswith(".py")
        assert (ROOT / source).is_file(), source
        if source not in MODEL_FREE_SCHEMA_MODULES:
            assert not any(source.startswith(excluded) for excluded in NOT_COMPILED), source
    assert len(set(COMPILED_MODULES)) == len(COMPILED_MODULES)


def test_compiled_modules_define_no_pydantic_model() -> None:
    for source in COMPILED_MODULES:
        text = (ROOT / source).read_text(encoding="utf-8")
        assert "(BaseModel)" not in text and "(StrictModel)" not in text, source


def _fake_tree(root: Path) -> tuple[Path, Path]:
    source = root / "engine" / "canonical.py"
    source.parent.mkdir(parents=True)
    source.write_text("x = 1\n", encoding="utf-8")
    extension = root / "engine" / "canonical.cpython-311-x86_64-linux-gnu.so"
    extension.write_bytes(b"")
    return source, extension


def test_an_extension_older_than_its_source_is_stale(tmp_path: Path) -> None:
    source, extension = _fake_tree(tmp_path)
    os.utime(extension, (1_000_000, 1_000_000))
    os.utime(source, (2_000_000, 2_000_000))
    assert stale_modules(tmp_path) == ["engine/canonical.py"]
    os.utime(extension, (3_000_000, 3_000_000))
    assert stale_modules(tmp_path) == []


def test_clean_removes_every_extension_and_keeps_sources(tmp_path: Path) -> None:
    source, extension = _fake_tree(tmp_path)
    shared = tmp_path / "engine" / "_compiled__mypyc.cpython-311-x86_64-linux-gnu.so"
    shared.write_bytes(b"")
    assert compiled_files(tmp_path) == sorted([extension, shared])
    assert clean(tmp_path) == sorted([extension, shared])
    assert compiled_files(tmp_path) == [] and source.is_file()


def test_this_checkout_has_no_stale_compiled_module() -> None:
    assert stale_modules(ROOT, GROUPS) == [], "run `make compile` or `make clean-compiled`"


def test_the_ledger_group_holds_ledger_sources_without_classes_mypyc_would_change() -> None:
    """Compiled, a dataclass or named tuple becomes a native class (no ``__dict__``, pickled
    otherwise): the ledger's compiled modules define plain classes and functions only."""
    assert GROUPS == (ENGINE, LEDGER) and LEDGER.package == "ledger"
    assert LEDGER.modules and len(set(LEDGER.modules)) == len(LEDGER.modules)
    for source in LEDGER.modules:
        assert source.startswith("ledger/") and source.endswith(".py") and source != "ledger/build.py"
        tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                assert not node.decorator_list, (source, node.name)
                assert not bases & {"NamedTuple", "BaseModel", "StrictModel", "TypedDict"}, (
                    source,
                    node.name,
                )


def test_groups_scan_their_own_package(tmp_path: Path) -> None:
    _fake_tree(tmp_path)
    ledger_source = tmp_path / "ledger" / "verify" / "checks.py"
    ledger_source.parent.mkdir(parents=True)
    ledger_source.write_text("x = 1\n", encoding="utf-8")
    ledger_extension = ledger_source.with_name("checks.cpython-311-x86_64-linux-gnu.so")
    ledger_extension.write_bytes(b"")
    os.utime(ledger_extension, (1_000_000, 1_000_000))
    os.utime(ledger_source, (2_000_000, 2_000_000))
    assert ledger_extension not in compiled_files(tmp_path)  # the engine's group alone by default
    assert ledger_extension in compiled_files(tmp_path, GROUPS)
    assert stale_modules(tmp_path, GROUPS) == ["ledger/verify/checks.py"]
    assert ledger_extension in clean(tmp_path, GROUPS) and not ledger_extension.exists()


def test_the_compiled_judge_stores_floats_only_where_it_declares_float() -> None:
    """Compiled, a ``float`` field turns an int into a float; the judge must never hand it an int
    (a committed ``1`` would become ``1.0``), so policies and decisions hold floats in both builds."""
    from engine.judge.policy import ConfidencePolicy, round_confidence

    assert "engine/judge/policy.py" in COMPILED_MODULES and "engine/judge/rules.py" in COMPILED_MODULES
    numbers = {
        "default_confidence": 1,
        "min_confidence_for_yesno": 0,
        "conflict_multiplier": 1,
        "fallback_multiplier": 0,
    }
    policy, problems = ConfidencePolicy.from_extra(
        {"confidence_policy": {**numbers, "invalid_confidence": 1}}
    )
    assert problems == []
    for key, value in policy.as_dict().items():
        if key != "conflict_action":
            assert type(value) is float, key
    assert policy.as_dict()["default_confidence"] == 1.0
    assert type(policy.decided_confidence(conflict=True, fallback=True)) is float
    assert type(policy.invalid_cap(0.3)) is float and type(round_confidence(1)) is float
