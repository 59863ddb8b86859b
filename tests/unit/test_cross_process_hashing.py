"""The same artifacts hash identically whatever the hash seed, time zone or locale of the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).parent.parent / "data" / "cournot_minimal.json"

SCRIPT = """
import json, sys
from engine.canonical import hash_canonical, to_hex
from engine.schemas import EvidenceBundle, PromptSpec
from engine.commitments import evidence_root, prompt_spec_hash
doc = json.load(open(sys.argv[1], encoding="utf-8"))
spec = PromptSpec.model_validate(doc["prompt_spec"])
bundle = EvidenceBundle.model_validate(doc["evidence_bundle"])
print(json.dumps({
    "prompt_spec_hash": prompt_spec_hash(spec),
    "evidence_root": evidence_root(bundle),
    "bundle_hash": to_hex(hash_canonical(bundle)),
    "raw_hash": to_hex(hash_canonical(doc)),
}, sort_keys=True))
"""

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LANG": "C"},
    {"PYTHONHASHSEED": "1", "TZ": "Pacific/Kiritimati", "LANG": "de_DE.UTF-8"},
    {"PYTHONHASHSEED": "4242", "TZ": "America/St_Johns", "LANG": "tr_TR.UTF-8"},
    {"PYTHONHASHSEED": "random", "TZ": "Asia/Kathmandu", "LANG": "ja_JP.UTF-8"},
]


def run_in(env_overrides: dict[str, str]) -> str:
    env = {**os.environ, **env_overrides, "LC_ALL": env_overrides["LANG"]}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(SAMPLE)], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout


def test_hashes_identical_across_seed_timezone_and_locale() -> None:
    outputs = {run_in(env) for env in ENVIRONMENTS}
    assert len(outputs) == 1, outputs
    values = json.loads(outputs.pop())
    assert values["prompt_spec_hash"].startswith("0x") and len(values["prompt_spec_hash"]) == 66
