"""SovsealSaver against LangGraph's InMemorySaver on random operation sequences (Hypothesis).

Written from what ``BaseCheckpointSaver`` documents: ``put`` stores a checkpoint after the parent
named by the config, ``put_writes`` keeps the first write per (task, idx) except for the special
channels (upserted), ``get_tuple`` returns the named or newest checkpoint of a namespace with its
pending writes in ``writes_sort_key`` order, ``list`` returns checkpoints newest first, filtered by
metadata, ``before`` and ``limit``; ``delete_thread`` removes a thread, ``copy_thread`` copies every
checkpoint and write, ``prune("keep_latest")`` keeps the newest checkpoint per namespace. The
installed InMemorySaver has no ``copy_thread`` and no ``prune``: the reference applies them to its
storage dicts, as the docstrings describe. Thread ids and namespaces include unicode, dots,
slashes, colons, percent signs and 300 characters; values include empty ones and a 300 KB string
(stored in parts by the saver).
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sovseal import SovsealSaver

THREADS = ["t", "thé/ça", "a.b.c", "x:y%z", "🙂 space", "l" * 300]
NAMESPACES = ["", "sub:1", "sub:1|inner:2", "é/ü.x"]
BIG = "β" * 150_000  # 300 KB of UTF-8: more than a record holds
VALUES = st.one_of(
    st.sampled_from(["", 0, None, [], {}, "x", BIG]),
    st.integers(-5, 5),
    st.text(max_size=20),
    st.lists(st.integers(0, 3), max_size=3),
)
TASKS = ["task-a", "task-b", "task-c"]
#: Most operations go to one thread and namespace, so they meet: writes to one checkpoint, forks, re-puts.
thread_ids = st.sampled_from(["t"] * 6 + THREADS)
namespaces = st.sampled_from([""] * 6 + NAMESPACES)
CHANNELS = ["messages", "notes", "__error__", "__interrupt__"]

operations = st.one_of(
    st.tuples(
        st.just("put"),
        thread_ids,
        namespaces,
        st.integers(0, 3),
        st.dictionaries(st.sampled_from(["messages", "notes", "n"]), VALUES, max_size=3),
        st.sampled_from(["a", "b"]),
    ),
    st.tuples(
        st.just("put_writes"),
        thread_ids,
        namespaces,
        st.integers(0, 3),
        st.sampled_from(TASKS),
        st.lists(st.tuples(st.sampled_from(CHANNELS), VALUES), max_size=3),
        st.sampled_from(["", "~0", "~1"]),
    ),
    st.tuples(st.just("get"), thread_ids, namespaces, st.integers(-1, 3)),
    st.tuples(
        st.just("list"),
        st.sampled_from([None, *THREADS]),
        st.sampled_from([None, *NAMESPACES]),
        st.sampled_from([None, {"tag": "a"}, {"step": 1}, {"tag": "b", "source": "loop"}]),
        st.integers(-1, 3),
        st.sampled_from([None, 1, 2, 5]),
    ),
    st.tuples(st.just("delete"), thread_ids),
    st.tuples(st.just("copy"), thread_ids, thread_ids),
    st.tuples(st.just("prune"), thread_ids),
)


class Run:
    """Both savers, and the checkpoint ids each (thread, ns) holds, oldest first (the same on both)."""

    def __init__(self, mine: SovsealSaver) -> None:
        self.mine = mine
        self.ref = InMemorySaver()
        self.clock = 0

    def ids(self, thread: str, ns: str) -> list[str]:
        return sorted(self.ref.storage.get(thread, {}).get(ns, {}))

    def pick(self, thread: str, ns: str, i: int) -> str | None:
        ids = self.ids(thread, ns)
        return ids[-1 - i % len(ids)] if ids and i >= 0 else None

    def config(self, thread: str, ns: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    # -- the operations ---------------------------------------------------------------------------

    def put(self, thread: str, ns: str, parent_pick: int, values: dict[str, Any], tag: str) -> None:
        self.clock += 1
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=self.clock))
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict.fromkeys(values, f"{self.clock:032}.0")
        metadata = {"source": "loop", "step": self.clock % 3, "tag": tag}
        config = self.config(thread, ns, self.pick(thread, ns, parent_pick))  # 0: the newest; more: time travel
        got = self.mine.put(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))
        want = self.ref.put(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))
        assert got == want

    def put_writes(self, thread: str, ns: str, pick: int, task: str, writes: list[tuple[str, Any]], task_path: str) -> None:
        checkpoint_id = self.pick(thread, ns, pick)
        if checkpoint_id is None:
            return
        config = self.config(thread, ns, checkpoint_id)
        self.mine.put_writes(config, writes, task, task_path)
        self.ref.put_writes(config, writes, task, task_path)

    def get(self, thread: str, ns: str, pick: int) -> None:
        config = self.config(thread, ns, self.pick(thread, ns, pick))
        assert shape(self.mine.get_tuple(config)) == shape(self.ref.get_tuple(config))

    def list(self, thread: str | None, ns: str | None, flt: dict[str, Any] | None, before_pick: int, limit: int | None) -> None:
        config = None
        if thread is not None:
            config = {"configurable": {"thread_id": thread, **({} if ns is None else {"checkpoint_ns": ns})}}
        before = None
        if thread is not None and ns is not None and (before_id := self.pick(thread, ns, before_pick)):
            before = self.config(thread, ns, before_id)
        got = [shape(t) for t in self.mine.list(config, filter=flt, before=before, limit=limit)]
        everything = [shape(t) for t in self.ref.list(config, filter=flt, before=before)]
        if thread is not None and ns is not None:  # one namespace: newest first, exactly
            assert got == everything[:limit]
        else:  # several: the order across threads and namespaces is not documented
            assert len(got) == len(everything[:limit])
            assert all(g in everything for g in got)
            if limit is None:  # the same tuples, each as often
                rest = list(everything)
                for g in got:
                    rest.remove(g)
                assert rest == []

    def delete(self, thread: str) -> None:
        self.mine.delete_thread(thread)
        self.ref.delete_thread(thread)

    def copy(self, src: str, dst: str) -> None:
        if src == dst or not self.ref.storage.get(src):
            return
        if any(self.ref.storage.get(dst, {}).values()):  # a target with checkpoints is refused: empty it first
            self.delete(dst)
        self.mine.copy_thread(src, dst)
        ref = self.ref
        for ns, saved in ref.storage[src].items():
            ref.storage[dst][ns] = dict(saved)
        for (thread, ns, cid), writes in list(ref.writes.items()):
            if thread == src:
                ref.writes[(dst, ns, cid)] = dict(writes)
        for (thread, ns, ch, ver), blob in list(ref.blobs.items()):
            if thread == src:
                ref.blobs[(dst, ns, ch, ver)] = blob

    def prune(self, thread: str) -> None:
        self.mine.prune([thread], strategy="keep_latest")
        ref = self.ref
        for ns, saved in ref.storage.get(thread, {}).items():
            if saved:
                newest = max(saved)
                for cid in [c for c in saved if c != newest]:
                    del saved[cid]
                    ref.writes.pop((thread, ns, cid), None)


def shape(t: Any) -> Any:
    if t is None:
        return None
    return (
        t.config["configurable"],
        {k: v for k, v in t.checkpoint.items() if k != "ts"},
        t.metadata,
        t.parent_config and t.parent_config["configurable"],
        [tuple(w) for w in t.pending_writes or ()],
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(operations, min_size=4, max_size=40))
@example(  # a task writes one checkpoint twice: the first value per (task, idx) stays, __error__ is replaced
    ops=[
        ("put", "t", "", 0, {"n": 1}, "a"),
        ("put_writes", "t", "", 0, "task-a", [("notes", 1), ("__error__", "first")], ""),
        ("put_writes", "t", "", 0, "task-a", [("notes", 2), ("__error__", "second")], ""),
        ("put_writes", "t", "", 0, "task-b", [("notes", BIG)], "~1"),
        ("put", "t", "", 0, {"n": 2}, "b"),
        ("put", "t", "", 1, {"n": 3}, "a"),  # time travel: a fork from the first checkpoint
        ("get", "t", "", 2),
        ("copy", "t", "l" * 300),
        ("prune", "t"),
        ("list", None, None, {"tag": "a"}, -1, None),
    ]
)
def test_random_operations_match_in_memory_saver(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(prefix="sovseal-diff-") as d, SovsealSaver.open(d, key=os.urandom(32)) as mine:
        run = Run(mine)
        for kind, *args in ops:
            getattr(run, kind)(*args)
        for thread in THREADS:  # and the end state, everywhere
            for ns in NAMESPACES:
                run.get(thread, ns, -1)
                run.list(thread, ns, None, -1, None)


def test_threads_writing_at_once_match_a_serial_in_memory_saver() -> None:
    """Eight OS threads share one saver: each runs its own LangGraph thread, and four of them also
    write pending writes of parallel tasks to one shared checkpoint."""
    with tempfile.TemporaryDirectory(prefix="sovseal-conc-") as d, SovsealSaver.open(d, key=os.urandom(32)) as mine:
        ref = InMemorySaver()
        shared = empty_checkpoint()
        shared["id"] = str(uuid6(clock_seq=0))
        shared_cfg = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
        for saver in (mine, ref):
            shared_cfg_out = saver.put(shared_cfg, shared, {"source": "input", "step": -1}, {})
        plans: dict[int, list[dict[str, Any]]] = {}
        for w in range(8):
            plans[w] = []
            for i in range(6):
                cp = empty_checkpoint()
                cp["id"] = str(uuid6(clock_seq=w * 100 + i + 1))
                cp["channel_values"] = {"n": i, "who": f"worker {w}"}
                cp["channel_versions"] = {"n": f"{i + 1:032}.0", "who": f"{i + 1:032}.0"}
                plans[w].append(cp)
        errors: list[BaseException] = []

        def worker(w: int, saver: Any) -> None:
            try:
                cfg = {"configurable": {"thread_id": f"w{w}/é", "checkpoint_ns": ""}}
                for i, cp in enumerate(plans[w]):
                    cfg = saver.put(cfg, cp, {"source": "loop", "step": i}, dict(cp["channel_versions"]))
                    saver.put_writes(cfg, [("notes", f"{w}-{i}")], f"task-{w}")
                    assert saver.get_tuple(cfg).checkpoint["id"] == cp["id"]
                if w < 4:
                    saver.put_writes(shared_cfg_out, [("notes", w), ("messages", [w])], f"par-{w}", f"~{w}")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=worker, args=(w, mine)) for w in range(8)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert not errors, errors
        for w in range(8):
            worker(w, ref)
        for thread in ["shared", *(f"w{w}/é" for w in range(8))]:
            cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            assert [shape(t) for t in mine.list(cfg)] == [shape(t) for t in ref.list(cfg)]
        assert len(mine.get_tuple(shared_cfg).pending_writes) == 8
