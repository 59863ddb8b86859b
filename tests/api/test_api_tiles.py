"""The log as C2SP tlog-tiles: a client that knows only the specs (and, when Go is installed, Go's
``golang.org/x/mod/sumdb/tlog``) verifies inclusion and consistency from the tile URLs alone."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import ORIGIN, ServedLedger
from tests.api.tlog_spec_client import (
    TileLog,
    leaf_hash,
    open_checkpoint,
    parse_entry_bundle,
    tile_url_path,
    verify_consistency,
    verify_inclusion,
)

pytestmark = pytest.mark.integration

GO_SOURCE = Path(__file__).resolve().parents[1] / "tlog_go" / "main.go"
# Debian's golang-golang-x-mod-dev puts the module's source here (no module proxy needed)
DEBIAN_X_MOD = Path("/usr/share/gocode/src/golang.org/x/mod")


def _fetcher(client: httpx.Client):  # type: ignore[no-untyped-def]
    def fetch(path: str) -> bytes:
        response = client.get("/" + path)
        assert response.status_code == 200, f"/{path}: {response.status_code} {response.text[:200]}"
        assert response.headers["content-type"] == "application/octet-stream"
        return response.content

    return fetch


def test_a_spec_only_client_verifies_inclusion_and_consistency_from_tiles(served: ServedLedger) -> None:
    first, latest = served.checkpoints
    with served.client() as client:
        note = client.get("/checkpoint").content
        checkpoint = open_checkpoint(note, ORIGIN, served.public_key)
        assert checkpoint.size == latest.tree_size > 512  # level-1 tiles exist
        log = TileLog(_fetcher(client), checkpoint.size)
        assert log.mth(0, checkpoint.size) == checkpoint.root  # every level-0 leaf hash hashes to the root

        # every entry bundle's entries hash to the level-0 tile's leaf hashes
        for n in range((checkpoint.size + 255) // 256):
            width = min(256, checkpoint.size - 256 * n)
            entries = parse_entry_bundle(_fetcher(client)(tile_url_path("entries", n, width)))
            assert [leaf_hash(entry) for entry in entries] == log._tile(0, n)

        for index in (0, 5, 255, 256, 300, checkpoint.size - 1):
            bundle_n, offset = divmod(index, 256)
            width = min(256, checkpoint.size - 256 * bundle_n)
            entry = parse_entry_bundle(_fetcher(client)(tile_url_path("entries", bundle_n, width)))[offset]
            path = log.inclusion_path(index, 0, checkpoint.size)
            assert verify_inclusion(leaf_hash(entry), index, checkpoint.size, path, checkpoint.root)
            # the API's proof is the same path
            api = client.get(f"/v1/entries/{index + 1}/proof").json()
            assert [bytes.fromhex(h[2:]) for h in api["inclusion_path"]] == path

        old = open_checkpoint(first.note.encode(), ORIGIN, served.public_key)
        old_log = TileLog(_fetcher(client), old.size)  # an older tree: its partial tiles
        assert old_log.mth(0, old.size) == old.root
        proof = log.consistency(old.size, 0, checkpoint.size)
        assert verify_consistency(old.size, checkpoint.size, old.root, checkpoint.root, proof)
        assert any(".p/" in path for path in log.fetched) and any(
            p.startswith("tile/1/") for p in log.fetched
        )


@pytest.mark.parametrize(
    "path",
    [
        "/tile/0/1",  # not 3 digits
        "/tile/0/x000/001",  # not the shortest spelling
        "/tile/0/000.p/0",
        "/tile/0/000.p/256",
        "/tile/0/000.p/08",
        "/tile/8/000",
        "/tile/01/000",
        "/tile/entries/x999/x999/x999/x999/x999/x999/999",
        "/tile/0/999",  # beyond the checkpoint
        "/tile/2/000.p/1",  # level 2 needs 65,536 leaves
    ],
)
def test_non_tile_paths_and_tiles_beyond_the_checkpoint_are_404_problems(
    served: ServedLedger, path: str
) -> None:
    with served.client() as client:
        response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_full_tiles_are_immutable_and_partial_widths_are_prefixes(served: ServedLedger) -> None:
    with served.client() as client:
        full = client.get("/tile/0/000")
        partial = client.get("/tile/0/000.p/17")
    assert full.headers["cache-control"].endswith("immutable") and len(full.content) == 256 * 32
    assert partial.content == full.content[: 17 * 32]


def _go_x_mod() -> str | None:
    """Why the Go client cannot run here, or None if it can."""
    if shutil.which("go") is None:
        return "no Go toolchain (apt-get install golang-go)"
    if not (DEBIAN_X_MOD / "go.mod").exists():
        return f"golang.org/x/mod source not at {DEBIAN_X_MOD} (apt-get install golang-golang-x-mod-dev)"
    return None


def test_go_sumdb_tlog_client_verifies_from_the_tiles(served: ServedLedger, tmp_path: Path) -> None:
    """Extra check with a standard client; the spec-only client above always runs."""
    reason = _go_x_mod()
    if reason is not None:
        pytest.skip(reason)
    (tmp_path / "main.go").write_text(GO_SOURCE.read_text())
    (tmp_path / "go.mod").write_text(
        f"module tlogcheck\n\ngo 1.19\n\nrequire golang.org/x/mod v0.7.0\n\nreplace golang.org/x/mod => {DEBIAN_X_MOD}\n"
    )
    env = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    build = subprocess.run(
        ["go", "build", "-o", str(tmp_path / "tlogcheck"), "."],
        cwd=tmp_path,
        env={**__import__("os").environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    first, latest = served.checkpoints
    old = open_checkpoint(first.note.encode(), ORIGIN, served.public_key)
    for index in (0, 300, latest.tree_size - 1):
        run = subprocess.run(
            [
                str(tmp_path / "tlogcheck"),
                "-url",
                served.base_url,
                "-vkey",
                served.verifier_key,
                "-token",
                served.token,
                "-index",
                str(index),
                "-old",
                str(old.size),
                "-oldroot",
                base64.b64encode(old.root).decode(),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr + run.stdout
        print(run.stdout, end="")  # shown with -s: the closing note quotes it
        assert f"inclusion ok: leaf {index} in tree {latest.tree_size}" in run.stdout
        assert f"consistency ok: tree {old.size}" in run.stdout
