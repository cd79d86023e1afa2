"""Replication: push throughput, store-to-ack lag under a steady load, and restore time.

Everything runs on this machine: the real server (``sovseal serve``: uvicorn + SQLite, or
PostgreSQL with ``--database postgresql://…``) in its own process on loopback, as deployed, the
real worker, real fsyncs on both sides. Three figures (targets from issue 5):

1. throughput: N records written offline, then the worker drains them (records/s, >= 2,000);
2. lag: stores at a steady rate while replicating; time from ``store`` returning to the server's
   acknowledgement reaching the client (p50/p95, p95 <= 1 s);
3. restore: a second device pulls the N records, verifies and imports them, then embeds them
   with the on-device model (``--fake-embedder`` to skip the model); the embedding share shows
   that restore is bounded by embedding throughput.

Run: python bench/bench_replication.py [--n 10000] [--rate 200] [--seconds 10] [--database URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from sovseal import Sovseal
from sovseal.replication.protocol import HEALTH_PATH
from sovseal.server import open_storage
from tests.fakes import fake_embed


class Server:
    """``sovseal serve`` in a subprocess on a free loopback port."""

    def __init__(self, database: str) -> None:
        storage = open_storage(database)
        self.backend = storage.backend
        self.keys = [storage.create_api_key() for _ in range(2)]
        storage.close()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        cli = "from sovseal.cli import run; run()"
        command = [sys.executable, "-c", cli, "serve", "--database", database, "--port", str(port), "--log-level", "warning"]
        self.process = subprocess.Popen(command)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + HEALTH_PATH, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("sovseal serve did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Timed:
    """Wraps an embedder and adds up the time spent in it."""

    def __init__(self, inner: Callable[[Sequence[str]], Any]) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> Any:
        t = time.perf_counter()
        out = self.inner(texts)
        self.seconds += time.perf_counter() - t
        self.texts += len(texts)
        return out


def text(i: int) -> str:
    return f"memory {i}: the user mentioned detail number {i} about their week, their plans and their preferences"


def throughput(tmp: Path, key: bytes, server: Server, api: str, n: int) -> float:
    with Sovseal(tmp / "one", key=key, embedder=fake_embed, endpoint="") as offline:
        for i in range(n):
            offline.store(f"bench.{i}", text(i))
    with Sovseal(tmp / "one", key=key, embedder=fake_embed, endpoint=server.url, api_key=api) as one:
        assert one.replication is not None
        t = time.perf_counter()
        assert one.replication.flush(600)
        elapsed = time.perf_counter() - t
    print(f"throughput: {n + 1} items drained in {elapsed:.2f} s = {(n + 1) / elapsed:,.0f} records/s")
    return elapsed


def lag(tmp: Path, key: bytes, server: Server, api: str, rate: int, seconds: float) -> dict[str, Any]:
    acked: dict[str, float] = {}
    lock = threading.Lock()

    def on_replicated(ids: list[str]) -> None:
        now = time.perf_counter()
        with lock:
            for i in ids:
                acked.setdefault(i, now)

    stored: list[tuple[str, float]] = []
    store_ms: list[float] = []
    with Sovseal(tmp / "lag", key=key, embedder=fake_embed, endpoint=server.url, api_key=api) as mem:
        mem.on("replicated", on_replicated)
        mem.ready()
        start = time.perf_counter()
        total = int(rate * seconds)
        for i in range(total):
            due = start + i / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t = time.perf_counter()
            sid = mem.store(f"steady.{i}", text(i)).snapshot_id
            done = time.perf_counter()
            store_ms.append((done - t) * 1000)
            stored.append((mem._store.wire_id(sid).hex(), done))
        achieved = total / (time.perf_counter() - start)
        assert mem.replication is not None and mem.replication.flush(60)
    lags = [acked[w] - t for w, t in stored]
    p50, p95 = statistics.median(lags), pct(lags, 0.95)
    print(
        f"lag at {achieved:.0f} stores/s for {seconds:.0f} s ({len(stored)} stores): p50 {p50 * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms; store() itself p50 {statistics.median(store_ms):.2f} ms, "
        f"p95 {pct(store_ms, 0.95):.2f} ms"
    )
    return {
        "achieved_rate": achieved,
        "stores": len(stored),
        "lag_ms": {"p50": p50 * 1000, "p95": p95 * 1000, "max": max(lags) * 1000},
        "store_ms": {"p50": statistics.median(store_ms), "p95": pct(store_ms, 0.95)},
        "samples": {"lag_ms": [round(x * 1000, 3) for x in lags], "store_ms": [round(x, 4) for x in store_ms]},
    }


def restore(tmp: Path, key: bytes, server: Server, api: str, n: int, fake: bool) -> dict[str, Any]:
    if fake:
        embedder = Timed(fake_embed)
    else:
        from sovseal.embed import Embedder

        model = Embedder()
        model(["warm up"])
        embedder = Timed(model)
    with Sovseal(tmp / "two", key=key, embedder=embedder, endpoint=server.url, api_key=api) as two:
        embedder.seconds, embedder.texts = 0.0, 0
        t = time.perf_counter()
        result = two.pull()
        total = time.perf_counter() - t
        assert result.waiting == 0 and two.status().visible == n
    share = embedder.seconds / total
    rate = embedder.texts / embedder.seconds if embedder.seconds else float("inf")
    print(
        f"restore of {n} records: {total:.1f} s in all; pull + verify + import {total - embedder.seconds:.1f} s, "
        f"embedding {embedder.seconds:.1f} s ({share:.0%}, {rate:,.0f} texts/s, {'fake' if fake else 'on-device model'})"
    )
    return {
        "records": n,
        "total_s": total,
        "pull_verify_import_s": total - embedder.seconds,
        "embedding_s": embedder.seconds,
        "embedding_share": share,
        "embedding_texts_per_s": rate if embedder.seconds else None,
        "embedder": "fake" if fake else "on-device model",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000, help="records for throughput and restore")
    parser.add_argument("--rate", type=int, default=200, help="stores per second for the lag run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the lag run")
    parser.add_argument("--database", default=None, help="server database: a postgresql:// URL (default: SQLite in a temp dir)")
    parser.add_argument("--fake-embedder", action="store_true", help="restore with the fake embedder instead of the model")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures (and the lag samples) here")
    args = parser.parse_args()
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        server = Server(args.database or str(tmp / "server.sqlite3"))
        try:
            print(f"server: sovseal serve ({server.backend}) on {server.url}; client batches of 32, linger 250 ms")
            key = os.urandom(32)
            elapsed = throughput(tmp, key, server, server.keys[0], args.n)
            steady = lag(tmp, os.urandom(32), server, server.keys[1], args.rate, args.seconds)  # a project of its own
            restored = restore(tmp, key, server, server.keys[0], args.n, args.fake_embedder)
        finally:
            server.stop()
    if args.json:
        report = {
            "backend": server.backend,
            "n": args.n,
            "rate": args.rate,
            "seconds": args.seconds,
            "throughput": {"items": args.n + 1, "drain_s": elapsed, "records_per_s": (args.n + 1) / elapsed},
            "lag": steady,
            "restore": restored,
        }
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
