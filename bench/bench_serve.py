"""Proof requests per second over HTTP from ``ledger serve`` at 1 M entries, with p50/p99 latency.

Run:  .venv/bin/python bench/bench_serve.py [--url URL] [--entries 1000000] [--requests 2000]

Without --url an embedded PostgreSQL is started in a temporary directory. Setup (not timed) reuses
``bench_proofs``: ``--entries`` valid entries and the tiles of their tree are COPYed into a fresh,
migrated database and one checkpoint is signed. Then ``ledger serve`` (one uvicorn process, as
``ledger_reader``, bearer token on) is started on 127.0.0.1 and, timed, from 1 and ``--clients``
client threads (keep-alive connections):

* ``GET /v1/entries/{seq}/proof`` at random sequences (each proof fetches the entry, recomputes
  its hashes, reads the audit path and verifies it against the checkpoint before answering);
* ``GET /v1/consistency?from=M&to=N`` at random M;
* ``GET /tile/0/<N>`` full level-0 tiles at random N.

A sample of the returned proofs is verified afterwards with the engine's RFC 6962 verifier.
The client runs on the same machine as the server and the database: the figures include both.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_proofs import copy_entries, copy_tree
from common import fmt, machine_facts, percentile, postgres_server, scratch_database, server_facts

from api.tiles import TileRef, tile_path
from engine.merkle.rfc6962 import verify_consistency, verify_inclusion
from ledger.connect import create_ledger_engine
from ledger.translog.checkpoints import create_checkpoint
from ledger.translog.leaves import entry_leaf_hash

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int, token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LEDGER_DATABASE_URL": url, "LEDGER_API_TOKEN": token, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "serve", "--port", str(port)]
    with log.open("wb") as handle:
        process = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"ledger serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("ledger serve did not start")


def run_load(
    base: str, token: str, clients: int, requests: int, make_path: Callable[[random.Random], str]
) -> tuple[float, list[float], list[httpx.Response]]:
    """``requests`` GETs spread over ``clients`` threads; returns (elapsed s, latencies ms, a sample)."""
    latencies: list[float] = []
    errors: list[str] = []
    sample: list[httpx.Response] = []
    lock = threading.Lock()
    per_client = requests // clients

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        local: list[float] = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for i in range(per_client):
                path = make_path(rng)
                start = time.perf_counter()
                response = client.get(path)
                local.append((time.perf_counter() - start) * 1000)
                if response.status_code != 200:
                    with lock:
                        errors.append(f"{path}: {response.status_code} {response.text[:300]}")
                    return
                if i < 20:
                    with lock:
                        sample.append(response)
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} request(s) failed, first: {errors[0]}")
    return time.perf_counter() - start, latencies, sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("LEDGER_BENCH_DATABASE_URL"))
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args(argv)
    facts = machine_facts()
    print(
        f"machine: {facts['cpu']}, {facts['usable_cpus']} usable CPUs, {facts['python']}, load {facts['load_average']}"
    )
    with postgres_server(args.url) as server_url, scratch_database(server_url) as url:
        print(server_facts(url))
        start = time.perf_counter()
        hashes = copy_entries(url, 1, args.entries)
        copy_tree(url, [entry_leaf_hash(h) for h in hashes])
        engine = create_ledger_engine(url)
        checkpoint = create_checkpoint(engine, Ed25519PrivateKey.generate())
        engine.dispose()
        n, root = checkpoint.tree_size, checkpoint.root_hash
        print(f"setup: {n:,} entries, tree and first checkpoint in {time.perf_counter() - start:.1f} s")
        token = secrets.token_hex(16)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
            process = start_server(url, port, token, Path(tmp) / "serve.log")
            try:
                kinds: dict[str, Callable[[random.Random], str]] = {
                    "inclusion proof": lambda rng: f"/v1/entries/{rng.randrange(1, n + 1)}/proof",
                    "consistency proof": lambda rng: f"/v1/consistency?from={rng.randrange(1, n)}&to={n}",
                    "level-0 tile (8 KiB)": lambda rng: (
                        "/" + tile_path(TileRef(0, rng.randrange(n // 256), 256))
                    ),
                }
                run_load(base, token, 1, 100, kinds["inclusion proof"])  # warm-up: pool, caches
                for name, make_path in kinds.items():
                    for clients in (1, args.clients):
                        elapsed, ms, sample = run_load(base, token, clients, args.requests, make_path)
                        print(
                            f"{name:<22} {clients} client(s): {fmt(len(ms) / elapsed)} req/s, "
                            f"p50 {percentile(ms, 0.5):.2f} ms, p99 {percentile(ms, 0.99):.2f} ms (n={len(ms):,})"
                        )
                        ok = _verify(sample, n, root)
                        if not ok:
                            raise SystemExit(f"{name}: a returned proof does not verify")
                print("every sampled proof verifies: True")
            finally:
                process.terminate()
                process.wait(timeout=15)
    return 0


def _verify(sample: list[httpx.Response], n: int, root: bytes) -> bool:
    for response in sample:
        if not response.url.path.startswith("/v1/"):
            continue
        body = response.json()
        if "inclusion_path" in body:
            path = [bytes.fromhex(h[2:]) for h in body["inclusion_path"]]
            leaf = bytes.fromhex(body["leaf_hash"][2:])
            if not verify_inclusion(leaf, body["leaf_index"], n, path, root):
                return False
        else:
            proof = [bytes.fromhex(h[2:]) for h in body["consistency_path"]]
            old_root = bytes.fromhex(body["old_root"][2:])
            if not verify_consistency(body["old_size"], n, old_root, root, proof):
                return False
    return True


if __name__ == "__main__":
    sys.exit(main())
