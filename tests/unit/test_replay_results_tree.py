"""Replay's in-place results tree is ``Frontier.append`` leaf by leaf: same size, roots and root."""

from __future__ import annotations

import hashlib

import pytest

from engine.merkle.rfc6962 import Frontier, leaf_hash
from ledger.replay.results import ResultsTree
from ledger.replay.runner import ReplayReport
from ledger.replay.source import ReplaySelection


def test_every_size_up_to_130_matches_the_immutable_frontier() -> None:
    tree, frontier = ResultsTree(), Frontier()
    assert tree.frontier() == frontier
    for index in range(130):
        leaf = leaf_hash(hashlib.sha256(str(index).encode()).digest())
        tree.append(leaf)
        frontier = frontier.append(leaf)
        assert tree.size == frontier.size == index + 1
        assert tree.frontier() == frontier
        assert tree.frontier().root() == frontier.root()


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, bytearray(32), "0" * 32])
def test_a_leaf_that_is_not_32_bytes_is_refused(bad: object) -> None:
    tree = ResultsTree()
    with pytest.raises(ValueError, match="32 bytes"):
        tree.append(bad)  # type: ignore[arg-type]
    assert tree.size == 0


def test_the_report_root_is_the_frontiers() -> None:
    report = ReplayReport(selection=ReplaySelection(), live=False)
    assert report.results_root == "0x" + Frontier().root().hex()
    leaves = [leaf_hash(bytes([index]) * 32) for index in range(5)]
    for leaf in leaves:
        report.tree.append(leaf)
    assert report.results_root == "0x" + Frontier.from_leaf_hashes(leaves).root().hex()
    assert report.summary()["results_count"] == 5
