"""SovsealSaver.delete_thread against SqliteSaver.delete_thread, side by side in one run: disk given
back, time taken, and whether the deleted threads' data is gone.

    pip install -e "integrations/langgraph-checkpoint-sovseal[bench]"
    python integrations/langgraph-checkpoint-sovseal/bench/bench_langgraph_delete.py [--threads 200] [--turns 10] [--json PATH]

Both savers are file-backed in a fresh temporary directory (SQLite in WAL mode, as SqliteSaver sets
it up, synchronous=FULL; sovseal fsyncs each put and put_writes). A small real LangGraph graph (one
node, ``agent``, appending a reply of about ``--text`` bytes of text to an append-only ``log``
field, so the state grows by about 1 KB a turn, as a chat history does) runs ``--turns`` turns on
each of ``--threads`` threads, the two savers taking turns thread by thread. Then every other thread
(half of them, spread over the whole file) is deleted with ``delete_thread``, the savers taking
turns delete by delete.

Sizes are the sum of the store's files: for sovseal every file under its directory (the journal,
``state/checkpoint``, ``index/``), for SQLite the database file and its ``-wal`` and ``-shm``. They
are taken before the deletes with both savers closed (at rest: sovseal has written its
``state/checkpoint``, SQLite has folded its WAL into the file), then both are opened again and the
deletes run; right after them (savers open), and, for SQLite, after ``PRAGMA wal_checkpoint(TRUNCATE)``
and then after ``VACUUM`` (and another checkpoint: in WAL mode the file shrinks only then). SqliteSaver's
``DELETE`` leaves the rows' pages free inside the file, which does not shrink; whether the deleted text
stays readable in those pages depends on ``PRAGMA secure_delete`` (off in SQLite's own default build, on in some distributions' builds; the
result records it), and old images of the pages stay in the WAL until it is checkpointed over: the
benchmark counts the deleted threads whose marker string is still in the file's or the WAL's bytes.

"Gone" is checked per saver: ``get_tuple`` and ``list`` return nothing for every deleted thread and
the kept threads still hold all their turns; for sovseal ``saver.sovseal.verify()`` is ok and counts
the erased records (each a skeleton named by an authentic redaction); for SQLite no row of a deleted
thread is left in ``checkpoints`` or ``writes``.

A sovseal ``delete_thread`` erases at once for every read and leaves the rewrite of the journal to
the next compaction, which the benchmark then runs once (timed, like SQLite's VACUUM); the benchmark
wraps the handle's ``compact`` to count the compactions and keep their reports. Last, sovseal only
(SqliteSaver has no ``prune``): ``prune(ids, strategy="delete")`` on ``--prune`` more threads in one
call, counting the compactions it runs.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

WORDS = (
    "agent memory thread journal record branch seal key tool answer question plan step result user "
    "context summary note file search query vector index local device server sync graph node state"
).split()


class ChatState(TypedDict):
    question: str
    log: Annotated[list[str], operator.add]


def chat_graph(text: int) -> StateGraph:
    def agent(state: ChatState) -> dict[str, Any]:
        turn = len(state["log"])
        return {"log": [reply(state["question"], turn, text)]}

    builder = StateGraph(ChatState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def marker(thread: int) -> str:
    """A string only this thread's text holds: is it still in the file after the delete?"""
    return f"mark{thread:05d}x"


def reply(question: str, turn: int, size: int) -> str:
    rng = random.Random(f"{question}/{turn}")
    words = [f"{question} turn {turn}:"]
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:size]


def store_bytes(directory: Path) -> dict[str, int]:
    """Every file under the sovseal store, grouped: journal, state/, index/, other."""
    parts = {"journal": 0, "state": 0, "index": 0, "other": 0}
    for path in directory.rglob("*"):
        if path.is_file():
            top = path.relative_to(directory).parts[0]
            key = "journal" if top.startswith("journal") else top if top in ("state", "index") else "other"
            parts[key] += path.stat().st_size
    return parts


def sqlite_bytes(db: Path) -> dict[str, int]:
    return {
        part: (p.stat().st_size if (p := Path(f"{db}{suffix}")).exists() else 0)
        for part, suffix in (("db", ""), ("wal", "-wal"), ("shm", "-shm"))
    }


def sqlite_markers(db: Path, threads: list[int]) -> dict[str, int]:
    """How many of these threads' marker strings are still in the database file, its WAL, either."""
    data = {
        part: Path(f"{db}{suffix}").read_bytes() if Path(f"{db}{suffix}").exists() else b""
        for part, suffix in (("db", ""), ("wal", "-wal"))
    }
    found = {part: {t for t in threads if marker(t).encode() in data[part]} for part in data}
    return {"db": len(found["db"]), "wal": len(found["wal"]), "either": len(found["db"] | found["wal"])}


def truncate(conn: sqlite3.Connection) -> None:
    while conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:  # busy: again until it completes
        time.sleep(0.01)


def cfg(thread: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t{thread:05d}"}}


def mb(n: int) -> float:
    return round(n / 1e6, 3)


def check_gone(saver: Any, deleted: list[int], kept: list[int], turns: int) -> dict[str, Any]:
    """What the saver's own API shows: nothing of a deleted thread, every turn of a kept one."""
    leftover = sum(1 for t in deleted if saver.get_tuple(cfg(t)) is not None or next(iter(saver.list(cfg(t))), None) is not None)
    intact = 0
    for t in kept:
        tup = saver.get_tuple(cfg(t))
        intact += tup is not None and len(tup.checkpoint["channel_values"].get("log", [])) == turns
    return {"deleted_threads_still_readable": leftover, "kept_threads_intact": intact, "kept_threads": len(kept)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10, help="graph runs per thread")
    parser.add_argument("--text", type=int, default=1024, help="bytes of text the agent node adds to the state per turn")
    parser.add_argument("--prune", type=int, default=10, help="kept threads then erased with one prune(strategy='delete') call (sovseal)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    key = os.urandom(32)
    threads = list(range(args.threads))
    deleted, kept = threads[0::2], threads[1::2]
    pruned = kept[: args.prune]
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-delete-") as tmp:
        root = Path(tmp)
        db, store = root / "checkpoints.sqlite", root / "sovseal"
        build = {"sovseal": 0.0, "sqlite": 0.0}
        conn = sqlite3.connect(db, check_same_thread=False)
        with SovsealSaver.open(store, key=key) as mine:
            savers = {"sovseal": mine, "sqlite": SqliteSaver(conn)}
            graphs = {name: chat_graph(args.text).compile(checkpointer=saver) for name, saver in savers.items()}
            for t in threads:
                for name in savers if t % 2 == 0 else list(savers)[::-1]:
                    start = time.perf_counter()
                    for turn in range(args.turns):
                        graphs[name].invoke({"question": f"{marker(t)} q{turn}"}, cfg(t))
                    build[name] += time.perf_counter() - start
        conn.close()
        # "before" at rest: both closed (sovseal has written its state/checkpoint, SQLite folded its WAL in)
        sizes: dict[str, dict[str, Any]] = {"sovseal": {"before": store_bytes(store)}, "sqlite": {"before": sqlite_bytes(db)}}
        markers_before = sqlite_markers(db, deleted)

        conn = sqlite3.connect(db, check_same_thread=False)
        with SovsealSaver.open(store, key=key) as mine:
            theirs = SqliteSaver(conn)
            savers = {"sovseal": mine, "sqlite": theirs}
            handle = mine.sovseal
            records_before = handle.verify()
            compactions: list[tuple[Any, float]] = []
            compact = handle.compact

            def counted(*a: Any, **k: Any) -> Any:  # observe, do not change: each compaction, its report and its call's time
                start = time.perf_counter()
                report = compact(*a, **k)
                compactions.append((report, time.perf_counter() - start))
                return report

            handle.compact = counted  # type: ignore[method-assign]
            seconds: dict[str, list[float]] = {name: [] for name in savers}
            for i, t in enumerate(deleted):
                for name in savers if i % 2 == 0 else list(savers)[::-1]:
                    start = time.perf_counter()
                    savers[name].delete_thread(f"t{t:05d}")
                    seconds[name].append(time.perf_counter() - start)
            delete_compactions = list(compactions)
            sizes["sovseal"]["after"] = store_bytes(store)
            sizes["sqlite"]["after"] = sqlite_bytes(db)
            # delete_thread erases for every read at once and defers the rewrite: one compaction for all
            compactions.clear()
            start = time.perf_counter()
            handle.compact()
            compact_s = time.perf_counter() - start
            final_compactions = list(compactions)
            sizes["sovseal"]["compacted"] = store_bytes(store)
            markers_after = sqlite_markers(db, deleted)

            verify = handle.verify()
            gone = {name: check_gone(saver, deleted, kept, args.turns) for name, saver in savers.items()}
            marks = ",".join("?" * len(deleted))
            ids = [f"t{t:05d}" for t in deleted]
            gone["sqlite"].update(
                rows_left={
                    table: conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id IN ({marks})", ids).fetchone()[0]
                    for table in ("checkpoints", "writes")
                },
                rows_kept={table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("checkpoints", "writes")},
                free_pages=conn.execute("PRAGMA freelist_count").fetchone()[0],
                page_size=conn.execute("PRAGMA page_size").fetchone()[0],
                secure_delete=conn.execute("PRAGMA secure_delete").fetchone()[0],
                sqlite_version=sqlite3.sqlite_version,
                deleted_markers_in_file_before=markers_before,
                deleted_markers_in_file_after_delete=markers_after,
            )
            gone["sovseal"].update(
                verify_ok=verify.ok,
                records=verify.records,
                erased=verify.erased,
                records_before=records_before.records,
                erased_before=records_before.erased,
                problems=verify.problems[:5],
            )

            truncate(conn)  # the WAL folded into the file: its free pages are still there, their text?
            sizes["sqlite"]["checkpointed"] = sqlite_bytes(db)
            gone["sqlite"]["deleted_markers_in_file_after_wal_checkpoint"] = sqlite_markers(db, deleted)
            start = time.perf_counter()
            conn.execute("VACUUM")
            truncate(conn)
            vacuum_s = time.perf_counter() - start
            sizes["sqlite"]["vacuumed"] = sqlite_bytes(db)
            gone["sqlite"]["deleted_markers_in_file_after_vacuum"] = sqlite_markers(db, deleted)

            # prune(strategy="delete") with a list: one compaction, or one per thread?
            compactions.clear()
            sovseal_before_prune = store_bytes(store)
            start = time.perf_counter()
            mine.prune([f"t{t:05d}" for t in pruned], strategy="delete")
            prune_s = time.perf_counter() - start
            prune_compactions = list(compactions)
            prune_gone = sum(1 for t in pruned if mine.get_tuple(cfg(t)) is None)
            try:
                theirs.prune([f"t{t:05d}" for t in pruned], strategy="delete")
                sqlite_prune = "ran"
            except NotImplementedError:
                sqlite_prune = "NotImplementedError"
        conn.close()

    def total(parts: dict[str, int]) -> int:
        return sum(parts.values())

    result: dict[str, Any] = {
        "threads": args.threads,
        "turns": args.turns,
        "text": args.text,
        "deleted": len(deleted),
        "build_s": {name: round(s, 2) for name, s in build.items()},
        "sizes_mb": {
            name: {when: {**{k: mb(v) for k, v in parts.items()}, "total": mb(total(parts))} for when, parts in whens.items()}
            for name, whens in sizes.items()
        },
        "delete_s": {
            name: {
                "total": round(sum(s), 3),
                "per_thread_ms": {
                    "mean": round(statistics.mean(s) * 1000, 2),
                    "p50": round(statistics.median(s) * 1000, 2),
                    "first": round(s[0] * 1000, 2),
                    "last": round(s[-1] * 1000, 2),
                    "max": round(max(s) * 1000, 2),
                },
                "samples_ms": [round(x * 1000, 2) for x in s],
            }
            for name, s in seconds.items()
        },
        "vacuum_s": round(vacuum_s, 3),
        "compact_s": round(compact_s, 3),
        "compact_report": {
            "seconds": round(final_compactions[0][0].seconds, 3),
            "paused": round(final_compactions[0][0].paused, 3),
            "journal_mb": [mb(final_compactions[0][0].bytes_before), mb(final_compactions[0][0].bytes_after)],
        }
        if final_compactions
        else None,
        "compactions": {
            "count": len(delete_compactions),
            "call_s_total": round(sum(s for _, s in delete_compactions), 3),
            "rewrite_s_total": round(sum(r.seconds for r, _ in delete_compactions), 3),
            "paused_s_total": round(sum(r.paused for r, _ in delete_compactions), 3),
            "journal_mb_first": [mb(delete_compactions[0][0].bytes_before), mb(delete_compactions[0][0].bytes_after)]
            if delete_compactions
            else None,
            "journal_mb_last": [mb(delete_compactions[-1][0].bytes_before), mb(delete_compactions[-1][0].bytes_after)]
            if delete_compactions
            else None,
        },
        "gone": gone,
        "prune": {
            "threads": len(pruned),
            "seconds": round(prune_s, 3),
            "compactions": len(prune_compactions),
            "rewrite_s_total": round(sum(r.seconds for r, _ in prune_compactions), 3),
            "gone": prune_gone,
            "journal_mb_before": mb(total(sovseal_before_prune)),
            "sqlite": sqlite_prune,
        },
    }

    print(f"\n{args.threads} threads x {args.turns} turns (~{args.text} B of text a turn), {len(deleted)} deleted one by one\n")
    print(
        "| saver | before MB | after delete MB | after WAL checkpoint MB | after VACUUM MB | delete total s "
        "| per thread ms (mean / p50 / max) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in ("sovseal", "sqlite"):
        z, d = result["sizes_mb"][name], result["delete_s"][name]
        vac, ckpt = (z.get(when, {}).get("total", "—") for when in ("vacuumed", "checkpointed"))
        pt = d["per_thread_ms"]
        print(
            f"| {name} | {z['before']['total']} | {z['after']['total']} | {ckpt} | {vac} | {d['total']} "
            f"| {pt['mean']} / {pt['p50']} / {pt['max']} |"
        )
    print(f"\nbuild s: {result['build_s']}; compactions: {result['compactions']}")
    print(f"gone: {json.dumps(gone)}")
    print(f"prune: {result['prune']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
