"""C2SP tlog-tiles path spelling: encode and parse agree, and only the canonical spelling parses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.tiles import ENTRIES_LEVEL, TileRef, parse_tile_path, tile_path


def test_the_spec_example() -> None:
    assert tile_path(TileRef(0, 1234067, 256)) == "tile/0/x001/x234/067"
    assert tile_path(TileRef(ENTRIES_LEVEL, 5, 17)) == "tile/entries/005.p/17"
    assert parse_tile_path("2/x001/x234/067.p/8") == TileRef(2, 1234067, 8)


@given(
    level=st.sampled_from([ENTRIES_LEVEL, 0, 1, 2, 7]),
    n=st.integers(min_value=0, max_value=2**54),
    w=st.integers(min_value=1, max_value=256),
)
def test_encoding_round_trips(level: int, n: int, w: int) -> None:
    tile = TileRef(level, n, w)
    assert parse_tile_path(tile_path(tile).removeprefix("tile/")) == tile


@pytest.mark.parametrize(
    "path",
    [
        "0/1",
        "0/0001",
        "0/x000/001",
        "0/x1/001",
        "0/001/x002",
        "0/000.p/0",
        "0/000.p/256",
        "0/000.p/07",
        "8/000",
        "00/000",
        "-1/000",
        "data/000",
        "0",
        "0/000.p",
        "0/000/",
        "entries/x001/x000/x000/x000/x000/x000/x000/000",
    ],
)
def test_non_canonical_paths_do_not_parse(path: str) -> None:
    assert parse_tile_path(path) is None
