"""Compaction: rewriting the journal without erased content, against SQLite's VACUUM (issue #23).

For each size (``--sizes``, records of ``--payload`` bytes of JSON text each), one store is built
and a share of its records (``--share``, 10 %: every tenth record, spread over the whole journal)
is erased with ``purge(prefix=..., compact=False)``; then, ``--runs`` times, a copy of that store
is compacted with ``Sovseal.compact()`` while a writer in another process stores one record every
``1/--rate`` seconds into the same store. Reported, medians over the runs: the journal size before
and after, the rewrite's seconds (``CompactionReport.seconds``) and the whole ``compact()`` call's
(which also drops the erased records from the catalog and writes a checkpoint), throughput (journal
bytes before / rewrite seconds), the writer-lock pause (``CompactionReport.paused``), the peak
memory the compaction added to its process, and the writer's store latency (p50 / p99 / max) in
three windows: the ``--before`` seconds before the compaction, the calls started during it, and
those started in the ``--after`` seconds from the end of the writer's first call that returned
after it (a call blocked by the compaction returns after it; the writer, finding the journal
replaced, reads the new one from its start), and how long after the compaction that return was.

The records are stored with ``index=False`` (no embedding, no vector, no keywords): compaction
rewrites the journal, which holds the same sealed bytes whatever the embedder, so the benchmark is
about the journal alone. The payload text is drawn from a fixed vocabulary (``--seed``).

The peer: SQLite (the standard library's module), a table of the same records (one row each, the
same payload bytes, ``journal_mode=WAL`` and the default ``synchronous=FULL``, as an app that wants
each write durable), the same share deleted (``DELETE``, then a WAL checkpoint), then ``VACUUM``
(what gives the space back to the file system; a ``DELETE`` alone keeps the file's size) followed
by ``wal_checkpoint(TRUNCATE)``, tried again until it completes (in WAL mode the vacuumed pages
go through the WAL first, and the file shrinks only once they are checkpointed). Its
writer inserts one row per transaction at the same rate with ``busy_timeout`` 60 s, so it waits
for the lock instead of failing. Both systems take turns in each run on copies of their files;
the copies are in the page cache, for both.

Run: python bench/bench_compaction.py [--sizes 20000,100000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MB = 1e6
DOOMED = "user3/"  # paths are user{i % 10}/note{i}: this prefix is every tenth record
WORDS = [f"w{i}" for i in range(5000)] + ["memory", "user", "likes", "coffee", "tea", "paris", "berlin", "meeting", "project"]


def payload_text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def items(n: int, size: int, seed: int, start: int = 0, count: int | None = None) -> list[tuple[str, str]]:
    """(path, payload JSON) of records ``start .. start + count`` of ``n``; the same for both systems."""
    rng = random.Random(f"{seed}:{start}")
    end = n if count is None else min(n, start + count)
    return [(f"user{i % 10}/note{i}", json.dumps({"text": payload_text(rng, size)})) for i in range(start, end)]


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p99 / max in ms (and how many calls)."""
    if not samples:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"n": len(ordered), "p50": statistics.median(ordered) * 1000, "p99": p99 * 1000, "max": ordered[-1] * 1000}


def vm(field: str) -> float:
    """A VmRSS/VmHWM line of this process's status, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / MB
    return float("nan")


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0), so the next peak is this step's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


# -- building ----------------------------------------------------------------------------------------


def build_sovseal(root: Path, n: int, size: int, seed: int) -> dict[str, float]:
    from sovseal import Sovseal

    key = os.urandom(32)
    (root / "sovseal.key").write_bytes(key)
    started = time.perf_counter()
    with Sovseal(root / "sovseal", key=key) as mem:
        for start in range(0, n, 2000):
            batch = items(n, size, seed, start, 2000)
            mem.store_many([{"path": p, "payload": json.loads(body), "index": False} for p, body in batch])
    built = time.perf_counter() - started
    journal = (root / "sovseal" / "journal.log").stat().st_size
    started = time.perf_counter()
    with Sovseal(root / "sovseal", key=key) as mem:
        erased = len(mem.purge(prefix=DOOMED, reason="benchmark", compact=False).erased)
    purged = time.perf_counter() - started
    return {
        "build_s": built,
        "purge_s": purged,
        "erased": erased,
        "journal_mb_built": journal / MB,
        "journal_mb_purged": (root / "sovseal" / "journal.log").stat().st_size / MB,  # with the redaction frames
    }


def sqlite_connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=60)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=60000")
    return db


def build_sqlite(root: Path, n: int, size: int, seed: int) -> dict[str, float]:
    path = root / "sqlite.db"
    started = time.perf_counter()
    db = sqlite_connect(path)
    db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, path TEXT NOT NULL, payload BLOB NOT NULL)")
    db.execute("CREATE INDEX records_path ON records (path)")
    for start in range(0, n, 2000):
        db.execute("BEGIN")
        rows = [(p, body.encode()) for p, body in items(n, size, seed, start, 2000)]
        db.executemany("INSERT INTO records (path, payload) VALUES (?, ?)", rows)
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    built = time.perf_counter() - started
    size_built = path.stat().st_size
    started = time.perf_counter()
    erased = db.execute("DELETE FROM records WHERE path >= ? AND path < ?", (DOOMED, DOOMED[:-1] + chr(ord("/") + 1))).rowcount
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    deleted = time.perf_counter() - started
    db.close()
    return {"build_s": built, "purge_s": deleted, "erased": erased, "db_mb_built": size_built / MB}


# -- the writer in another process ---------------------------------------------------------------------


def writer(system: str, target: Path, rate: float, size: int) -> None:
    """Store one record every 1/rate s; print the (start, seconds) samples when done.

    Done: once stdin gives ``t1 after`` (the monotonic time the operation ended and a number of
    seconds), ``after`` s after the first call that returned after ``t1``: a call blocked by the
    operation, then that many seconds of the writer back at work."""
    rng = random.Random(99)
    body = json.dumps({"text": payload_text(rng, size)})
    if system == "sovseal":
        from sovseal import Sovseal

        mem = Sovseal(target, key=(target.parent / "sovseal.key").read_bytes())

        def write(i: int) -> None:
            mem.store(f"writer/{i}", {"text": body, "i": i}, index=False)

        close = mem.close
    else:
        db = sqlite_connect(target)

        def write(i: int) -> None:
            db.execute("INSERT INTO records (path, payload) VALUES (?, ?)", (f"writer/{i}", body.encode()))

        close = db.close
    write(-1)  # the first call opens what it needs
    request: list[float] = []
    threading.Thread(target=lambda: request.extend(map(float, sys.stdin.readline().split())), daemon=True).start()
    print("ready", flush=True)
    samples: list[tuple[float, float]] = []
    interval = 1 / rate
    due = time.monotonic()
    i = 0
    resumed: float | None = None
    while True:
        if request:
            t1, after = request
            if resumed is None:
                resumed = next((s + d for s, d in samples if s + d >= t1), None)
            if resumed is not None and time.monotonic() >= resumed + after:
                break
        start = time.monotonic()
        write(i)
        samples.append((start, time.monotonic() - start))
        i += 1
        due = max(due + interval, time.monotonic() - interval)  # a steady rate; no burst after a stall
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    close()
    print(json.dumps(samples), flush=True)


class Writer:
    """The writer process, started on ``target``; ``stop()`` returns its samples."""

    def __init__(self, system: str, target: Path, rate: float, size: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--writer", system, str(target), str(rate), str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "ready":
            self.process.kill()
            raise RuntimeError(f"the {system} writer did not start: {line!r}")

    def stop(self, t1: float = 0.0, after: float = 0.0) -> list[tuple[float, float]]:
        """Samples up to ``after`` s past the writer's first call that returned after ``t1``."""
        out, _ = self.process.communicate(f"{t1} {after}\n", timeout=120)
        if self.process.returncode != 0:
            raise RuntimeError(f"the writer failed (exit {self.process.returncode})")
        return [tuple(x) for x in json.loads(out.strip().splitlines()[-1])]


def windows(samples: list[tuple[float, float]], t0: float, t1: float, before: float, after: float) -> dict[str, dict[str, float]]:
    """The writer's latency before, during and after the operation that ran from t0 to t1.

    "after": the calls started in the ``after`` s from the end of the first call that returned
    after t1 (one blocked by the operation returns after it); "resumed_s": how long after t1 that was.
    """

    def pick(lo: float, hi: float) -> list[float]:
        return [d for s, d in samples if lo <= s < hi]

    resumed = min((s + d for s, d in samples if s + d >= t1), default=t1)
    return {
        "before": percentiles(pick(t0 - before, t0)),
        "during": percentiles(pick(t0, t1)),
        "after": percentiles(pick(resumed, resumed + after)),
        "during_or_after": percentiles(pick(t0, resumed + after)),
        "resumed_s": {"s": resumed - t1},
    }


def timeline(samples: list[tuple[float, float]], t0: float, t1: float, step: float = 0.1) -> dict[str, Any]:
    """The writer's slowest call started in each ``step`` s, as (bin start - t0 in s, ms), and where
    the operation ended: what the plot shows, small enough to keep."""
    bins: dict[int, float] = {}
    for s, d in samples:
        b = int((s - t0) // step)
        bins[b] = max(bins.get(b, 0.0), d)
    return {
        "end_s": round(t1 - t0, 3),
        "step_s": step,
        "max_ms": [[round(b * step, 2), round(d * 1000, 2)] for b, d in sorted(bins.items())],
    }


# -- one run of each ------------------------------------------------------------------------------------


def time_lock_holds(store: Any) -> list[tuple[float, float]]:
    """Time every hold of ``store``'s writer lock from here on (waiting for it included, a store's
    worth at most): ``CompactionReport.paused`` starts after the catch-up with what other writers
    appended during the copy, which the lock is held for too."""
    holds: list[tuple[float, float]] = []  # (monotonic start, end)
    take = store.writing

    @contextlib.contextmanager
    def timed() -> Iterator[None]:
        started = time.monotonic()
        with take():
            yield
        holds.append((started, time.monotonic()))

    store.writing = timed
    return holds


def compactor(target: Path) -> None:
    """Open the store, say so, compact when a line arrives on stdin, print what it measured: in a
    process of its own, so that the memory the compaction adds is not hidden by what an earlier
    run's process already holds."""
    from sovseal import Sovseal

    mem = Sovseal(target, key=(target.parent / "sovseal.key").read_bytes())
    holds = time_lock_holds(mem._store)
    print("ready", flush=True)
    sys.stdin.readline()
    rss = vm("VmRSS")
    peak_ok = reset_peak_rss()
    t0 = time.monotonic()
    report = mem.compact()
    t1 = time.monotonic()
    peak = vm("VmHWM") - rss if peak_ok else float("nan")
    held = max(holds, key=lambda h: h[1] - h[0])
    mem.close()
    print(
        json.dumps(
            {
                "t0": t0,
                "t1": t1,
                "bytes_before": report.bytes_before,
                "bytes_after": report.bytes_after,
                "skeletons": report.skeletons,
                "seconds": report.seconds,
                "paused": report.paused,
                "lock_held_s": held[1] - held[0],
                "lock_held_at": held,
                "rss_before_mb": rss,
                "peak_rss_added_mb": peak,
            }
        ),
        flush=True,
    )


def run_sovseal(base: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    shutil.rmtree(work / "sovseal", ignore_errors=True)
    shutil.copytree(base / "sovseal", work / "sovseal")
    shutil.copy(base / "sovseal.key", work / "sovseal.key")
    os.sync()  # the copy's dirty pages are not flushed by the writer's first fsyncs
    child = subprocess.Popen(
        [sys.executable, __file__, "--compactor", str(work / "sovseal")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the compacting process did not start")
        w = Writer("sovseal", work / "sovseal", args.rate, args.payload)
        try:
            time.sleep(args.before)
            out, _ = child.communicate("go\n", timeout=600)
            if child.returncode != 0:
                raise RuntimeError(f"the compaction failed (exit {child.returncode})")
            c = json.loads(out.strip().splitlines()[-1])
            t0, t1 = c["t0"], c["t1"]
            samples = w.stop(t1, args.after)
        finally:
            if w.process.returncode is None:
                w.stop()
    finally:
        if child.returncode is None:
            child.kill()
            child.wait()
    return {
        "mb_before": c["bytes_before"] / MB,
        "mb_after": c["bytes_after"] / MB,
        "skeletons": c["skeletons"],
        "rewrite_s": c["seconds"],
        "call_s": t1 - t0,
        "mb_per_s": c["bytes_before"] / MB / c["seconds"],
        "pause_s": c["paused"],
        "lock_held_s": c["lock_held_s"],  # the longest hold of the writer lock during compact()
        "rss_before_mb": c["rss_before_mb"],
        "peak_rss_added_mb": c["peak_rss_added_mb"],
        "writer_ms": windows(samples, t0, t1, args.before, args.after),
        "timeline": {
            **timeline(samples, t0, t1),
            "lock_held_s": [round(c["lock_held_at"][0] - t0, 3), round(c["lock_held_at"][1] - t0, 3)],
        },
    }


def run_sqlite(base: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    path = work / "sqlite.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(base / "sqlite.db", path)
    os.sync()
    db = sqlite_connect(path)
    wal = Path(f"{path}-wal")
    try:
        w = Writer("sqlite", path, args.rate, args.payload)
        try:
            time.sleep(args.before)
            before = path.stat().st_size
            wal_before = wal.stat().st_size if wal.exists() else 0  # the writer's rows, not yet checkpointed
            t0 = time.monotonic()
            db.execute("VACUUM")
            t_vacuum = time.monotonic()
            # The vacuumed file is in the WAL until a checkpoint copies it back and truncates: a writer
            # that appends meanwhile makes it return busy, so it is tried again, as an app that wants
            # the space back would.
            attempts, busy = 0, 1
            while busy and time.monotonic() - t_vacuum < 30:
                if attempts:
                    time.sleep(0.01)
                attempts += 1
                busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            t1 = time.monotonic()
            after = path.stat().st_size
            samples = w.stop(t1, args.after)
        finally:
            if w.process.returncode is None:
                w.stop()
    finally:
        db.close()
    seconds = t1 - t0
    return {
        "mb_before": before / MB,  # the database file
        "wal_mb_before": wal_before / MB,
        "mb_after": after / MB,
        "checkpoint_complete": float(busy == 0),
        "checkpoint_attempts": attempts,
        "vacuum_s": t_vacuum - t0,
        "checkpoint_s": t1 - t_vacuum,
        "rewrite_s": seconds,
        "mb_per_s": before / MB / seconds,
        "pause_s": t_vacuum - t0,  # VACUUM holds the write lock throughout; a checkpoint that finds a writer returns busy
        "writer_ms": windows(samples, t0, t1, args.before, args.after),
        "timeline": timeline(samples, t0, t1),
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every figure over the runs (nested dicts alike); max latencies: the worst run."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = medians([r[key] for r in runs])
        elif key == "max":
            out[key] = max(r[key] for r in runs)
        elif key == "n":
            out[key] = sum(r[key] for r in runs)
        else:
            out[key] = statistics.median(r[key] for r in runs)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--compactor":
        compactor(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20000,100000", help="comma list of record counts")
    parser.add_argument("--payload", type=int, default=1000, help="bytes of payload text per record")
    parser.add_argument("--runs", type=int, default=3, help="compactions (and VACUUMs) per size, on fresh copies")
    parser.add_argument("--rate", type=float, default=200, help="the concurrent writer's stores per second")
    parser.add_argument("--before", type=float, default=2.0, help="seconds of writer latency measured before")
    parser.add_argument(
        "--after",
        type=float,
        default=1.0,
        help="seconds of writer latency measured once it is back (its first call returned after the operation)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None, help="where the stores go (default: a temporary folder, removed)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    root = args.workdir or Path(tempfile.mkdtemp(prefix="sovseal-compaction-"))
    root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "cpu": cpu(),
        "payload_bytes": args.payload,
        "share": 0.1,
        "runs": args.runs,
        "writer_rate": args.rate,
        "before_s": args.before,
        "after_s": args.after,
        "sqlite": sqlite3.sqlite_version,
        "load": os.getloadavg(),
        "sizes": {},
    }
    try:
        for n in sizes:
            base, work = root / f"base-{n}", root / f"work-{n}"
            for d in (base, work):
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
            print(f"building {n:,} records...", file=sys.stderr, flush=True)
            entry: dict[str, Any] = {
                "load": os.getloadavg(),
                "build": {
                    "sovseal": build_sovseal(base, n, args.payload, args.seed),
                    "sqlite": build_sqlite(base, n, args.payload, args.seed),
                },
            }
            runs: dict[str, list[dict[str, Any]]] = {"sovseal": [], "sqlite": []}
            for r in range(args.runs):
                order = ["sovseal", "sqlite"] if r % 2 == 0 else ["sqlite", "sovseal"]
                for system in order:
                    one = (run_sovseal if system == "sovseal" else run_sqlite)(base, work, args)
                    one["load"] = os.getloadavg()[0]
                    runs[system].append(one)
                    print(
                        f"{n:,} {system} run {r + 1}: {one['mb_before']:.1f} -> {one['mb_after']:.1f} MB in {one['rewrite_s']:.2f} s "
                        f"({one['mb_per_s']:.0f} MB/s), pause {one['pause_s']:.2f} s, "
                        f"writer max {one['writer_ms']['during_or_after']['max']:.0f} ms "
                        f"(load {one['load']:.2f})",
                        file=sys.stderr,
                        flush=True,
                    )
            if n == max(sizes):  # the last run's, for the plot
                entry["timeline"] = {s: v[-1]["timeline"] for s, v in runs.items()}
            for v in runs.values():
                for one in v:
                    one.pop("timeline", None)
            entry["runs"] = runs
            entry["median"] = {s: medians(v) for s, v in runs.items()}
            sov, lite = entry["median"]["sovseal"], entry["median"]["sqlite"]
            entry["ratio_sovseal_sqlite"] = {
                "rewrite_s": sov["rewrite_s"] / lite["rewrite_s"],
                "mb_per_s": sov["mb_per_s"] / lite["mb_per_s"],
                "pause_s": sov["pause_s"] / lite["pause_s"],
                "writer_max_ms": sov["writer_ms"]["during_or_after"]["max"] / lite["writer_ms"]["during_or_after"]["max"],
            }
            entry["load_after"] = os.getloadavg()
            result["sizes"][str(n)] = entry
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
