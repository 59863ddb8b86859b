"""``ledger publish`` lists every validation error of every invalid file, with its JSON path, like
``ledger audit`` does, and sends nothing (no broker is needed to refuse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from tests.golden.regenerate import CORPUS_DIR


def test_every_schema_error_is_listed_with_its_path_and_nothing_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads((CORPUS_DIR / "01_clean_threshold.json").read_text(encoding="utf-8"))
    document["prompt_spec"]["market"]["possible_outcomes"] = 3
    document["prompt_spec"]["market"]["question"] = 42
    document["evidence_bundle"]["items"][0]["success"] = "perhaps"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document), encoding="utf-8")
    good = CORPUS_DIR / "02_two_sources_agree.json"

    code = main(["publish", "--bootstrap", "127.0.0.1:9", str(good), str(bad)])

    err = capsys.readouterr().err
    assert code == 1
    assert f"invalid: {bad}: schema_violation" in err
    for path in (
        "$.prompt_spec.market.possible_outcomes",
        "$.prompt_spec.market.question",
        "$.evidence_bundle.items[0].success",
    ):
        assert f"  {path}: " in err, err
    assert "more error" not in err
    assert "nothing sent: 1 of 2 file(s) invalid" in err
