"""Convergence soak (issue #19): many devices, many seeds, against a real ``sovseal serve``.

Each seed runs the simulation of tests/replication/test_convergence.py at a larger size (devices
storing, deleting, reinforcing, forking and rolling back, syncing in random order, offline for a
while, restarted with a full outbox) and then checks that every device holds the same state,
heads and log on every branch and that no acknowledged write vanished. It reports how long the
devices took to converge once all were online, and how pulling 10,000 items from another device
compares with embedding them (the bound the issue sets: pulling is embedding-bound).

    python bench/bench_convergence.py --seeds 20 --devices 6 --steps 300 --pull 10000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sovseal import Sovseal  # noqa: E402
from sovseal.server import ServerThread  # noqa: E402
from tests.replication.test_convergence import World, _simulate  # noqa: E402


def soak(seeds: int, devices: int, steps: int) -> dict[str, Any]:
    """Run ``seeds`` simulations; every one must converge (an AssertionError stops the benchmark)."""
    settle: list[float] = []
    total: list[float] = []
    snapshots: list[int] = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp, ServerThread(str(Path(tmp) / "server.sqlite3")) as server:
            world = World(Path(tmp), os.urandom(32), server.url, server.storage.create_api_key())
            started = time.perf_counter()
            original = world.settle

            def timed_settle(original: Any = original) -> None:
                t0 = time.perf_counter()
                original()
                settle.append(time.perf_counter() - t0)

            world.settle = timed_settle  # type: ignore[method-assign]
            try:
                final = _simulate(world, seed, devices=devices, steps=steps)
            finally:
                world.close()
            total.append(time.perf_counter() - started)
            snapshots.append(sum(len(b["log"]) for b in final.values()))
    return {
        "seeds": seeds,
        "devices": devices,
        "steps": steps,
        "converged": seeds,
        "snapshots_p50": statistics.median(snapshots),
        "settle_s_p50": statistics.median(settle),
        "settle_s_max": max(settle),
        "run_s_p50": statistics.median(total),
    }


def pull_vs_embed(n: int) -> dict[str, Any]:
    """Device A stores ``n`` memories; device B pulls them all and indexes them with the real model.

    Compared with embedding the same texts alone, in the same process: the difference is what
    pulling, verifying and merging cost on top of the embedding every new device must do.
    """
    texts = [f"note {i}: the meeting about project {i % 97} moved to room {i % 13}" for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp, ServerThread(str(Path(tmp) / "server.sqlite3")) as server:
        api = server.storage.create_api_key()
        key = os.urandom(32)
        with Sovseal(Path(tmp) / "a", key=key, endpoint=server.url, api_key=api) as a:
            for start in range(0, n, 500):
                a.store_many([{"path": f"notes.{i}", "payload": texts[i]} for i in range(start, min(n, start + 500))])
            assert a.replication is not None and a.replication.flush(600)
            embedder = a._embed_fn()  # the same on-device model a pull uses
            t0 = time.perf_counter()
            for start in range(0, n, 256):
                embedder(texts[start : start + 256])
            embed_s = time.perf_counter() - t0
        with Sovseal(Path(tmp) / "b", key=key, endpoint=server.url, api_key=api) as b:
            b.ready()
            t0 = time.perf_counter()
            result = b.pull()
            pull_s = time.perf_counter() - t0
            assert len(b.state()) == n, "the pull did not bring everything"
    return {"items": result.received, "records": n, "pull_s": pull_s, "embed_s": embed_s, "pull_over_embed": pull_s / embed_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--devices", type=int, default=6)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--pull", type=int, default=10_000, help="records for the pull-versus-embedding run (0: skip)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {"soak": soak(args.seeds, args.devices, args.steps)}
    print(json.dumps(results["soak"], indent=2))
    if args.pull:
        results["pull"] = pull_vs_embed(args.pull)
        print(json.dumps(results["pull"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
