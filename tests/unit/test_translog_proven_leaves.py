"""ProvenLeaves: the leaves ``ledger verify``'s ledger pass proved, held in bounded memory."""

from __future__ import annotations

import pytest

from ledger.translog.leaves import ProvenLeaves, entry_leaf_hash

HASH = "0x" + "ab" * 32


def test_a_proven_leaf_is_the_leaf_of_its_entry_hash_and_others_are_unknown() -> None:
    proven = ProvenLeaves()
    proven.add(3, HASH)
    assert proven.get(3) == entry_leaf_hash(HASH)
    assert proven.get(1) is None and proven.get(2) is None and proven.get(4) is None


def test_entries_beyond_the_capacity_are_not_held_so_the_log_check_reads_them_itself() -> None:
    proven = ProvenLeaves(capacity=4)
    for seq in range(1, 10):
        proven.add(seq, HASH)
    assert [proven.get(seq) is not None for seq in range(1, 10)] == [True] * 4 + [False] * 5
    assert len(proven._hashes) == 32 * 4  # memory stops at the capacity


def test_a_non_positive_global_seq_is_refused() -> None:
    with pytest.raises(ValueError, match="global_seq must be positive"):
        ProvenLeaves().add(0, HASH)


def test_add_many_holds_what_add_holds() -> None:
    pairs = [(seq, "0x" + f"{seq:02x}" * 32) for seq in (1, 2, 5, 3, 9, 40)]
    one, many = ProvenLeaves(capacity=30), ProvenLeaves(capacity=30)
    for seq, value in pairs:
        one.add(seq, value)
    many.add_many(pairs)
    assert [many.get(seq) for seq in range(1, 45)] == [one.get(seq) for seq in range(1, 45)]
    assert many.get(9) == entry_leaf_hash(pairs[4][1]) and many.get(40) is None


@pytest.mark.parametrize(
    "bad", ["ab" * 33, "0x" + "ab" * 31, "0x" + "ab" * 31 + "a b", "0x" + "zz" * 32, "0X" + "ab" * 32]
)
def test_add_many_refuses_what_add_refuses(bad: str) -> None:
    proven = ProvenLeaves()
    proven.add_many([(1, HASH), (2, HASH)])  # the arrays exist: the inline path is taken
    with pytest.raises(ValueError):
        proven.add(2, bad)
    with pytest.raises(ValueError):
        proven.add_many([(2, bad)])
    with pytest.raises(ValueError, match="global_seq must be positive"):
        proven.add_many([(0, HASH)])


def test_has_says_what_get_says_without_the_leaf() -> None:
    proven = ProvenLeaves(capacity=6)
    proven.add_many([(2, HASH), (5, HASH), (9, HASH)])  # 9 is beyond the capacity: not held
    assert [proven.has(seq) for seq in range(-1, 12)] == [
        proven.get(seq) is not None for seq in range(-1, 12)
    ]
    assert [seq for seq in range(-1, 12) if proven.has(seq)] == [2, 5]


@pytest.mark.parametrize("start", [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 10])
def test_run_length_and_leaves_say_what_get_says(start: int, limit: int) -> None:
    proven = ProvenLeaves(capacity=8)
    proven.add_many([(seq, "0x" + f"{seq:02x}" * 32) for seq in (2, 3, 4, 6, 7)])
    expected = 0
    while expected < limit and proven.get(start + expected) is not None:
        expected += 1
    assert proven.run_length(start, limit) == expected
    if start >= 1:
        held = proven.leaves(start, expected)
        assert held == b"".join(proven.get(start + i) or b"" for i in range(expected))
    if start >= 1 and expected < limit:
        with pytest.raises(ValueError, match="not all proven"):
            proven.leaves(start, expected + 1)


def test_add_many_with_growth_and_odd_pairs_holds_what_add_holds() -> None:
    pairs = [
        (1, HASH),
        (3, "0x" + "AB" * 32),  # upper-case hex: bytes.fromhex reads it, as add's path does
        (True, "0x" + "cd" * 32),  # not an int: add decides (global_seq 1)
        (70, "0x" + "ef" * 32),  # beyond the arrays: add grows them, the rest go inline again
        (71, HASH),
        (200, HASH),  # beyond the capacity: not held
    ]
    one, many = ProvenLeaves(capacity=100), ProvenLeaves(capacity=100)
    for seq, value in pairs:
        one.add(seq, value)
    many.add_many(iter(pairs))
    assert [many.get(seq) for seq in range(0, 202)] == [one.get(seq) for seq in range(0, 202)]
    assert many.get(1) == entry_leaf_hash("0x" + "cd" * 32) and many.get(71) == entry_leaf_hash(HASH)
