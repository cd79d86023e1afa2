"""Issue #23 ("Forget for real"): LangGraph's delete_thread and prune free the thread's bytes.

A thread's records are erased for good once no branch reaches them: after ``delete_thread`` the
store directory holds neither their sealed bytes nor (decrypting everything the key still opens)
their plaintext, the store verifies, and other threads are untouched; ``prune`` erases the
checkpoints it let go and keeps the latest readable; a thread made with ``copy_thread`` shares
records with its source, which stay while it reaches them.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._layout import thread_prefixes
from langgraph.graph import END, START, StateGraph

from tests.erasure_scan import every_file, plaintexts


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]


def _graph(saver: SovsealSaver) -> Any:
    graph = StateGraph(Notes)
    graph.add_node("remember", lambda state: {"notes": [f"note {len(state['notes'])}"]})
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    return graph.compile(checkpointer=saver)


def _run(app: Any, thread: str, first: str, turns: int) -> None:
    config = {"configurable": {"thread_id": thread}}
    app.invoke({"notes": [first]}, config)
    for _ in range(turns - 1):
        app.invoke({"notes": []}, config)


def _sealed(saver: SovsealSaver, thread: str) -> list[bytes]:
    """The sealed bytes of every record the thread has (any version, any branch)."""
    from sovseal.storage import frames as fr

    store = saver.sovseal._store
    prefixes = tuple(thread_prefixes(thread))
    out = []
    with store.reading() as lineage:
        for node in lineage.nodes:
            if not node.redacted and store.open(node.idx).entry.path.startswith(prefixes):
                frame = store.decode(store.recheck(node.idx))
                assert isinstance(frame, fr.RecordFrame)
                out.append(frame.sealed_entry)
    return out


def test_delete_thread_erases_the_thread_and_nothing_else(saver_dir: Path, key: bytes) -> None:
    with SovsealSaver.open(saver_dir, key=key) as saver:
        app = _graph(saver)
        _run(app, "secret-thread", "my card is 4111 1111 1111 1111", 4)
        _run(app, "other-thread", "an ordinary note", 2)
        sealed = _sealed(saver, "secret-thread")
        assert sealed
        saver.delete_thread("secret-thread")
        assert saver.get_tuple({"configurable": {"thread_id": "secret-thread"}}) is None
        assert list(saver.list({"configurable": {"thread_id": "secret-thread"}})) == []
        other = saver.get_tuple({"configurable": {"thread_id": "other-thread"}})
        assert other is not None and other.checkpoint["channel_values"]["notes"][0] == "an ordinary note"
        report = saver.sovseal.verify()
        assert report.ok and report.erased >= len(sealed)
        saver.sovseal.compact()  # delete_thread defers the rewrite: the bytes leave the disk here
        _run(app, "secret-thread", "a new start", 1)  # the thread can be used again
        assert saver.get_tuple({"configurable": {"thread_id": "secret-thread"}}).checkpoint["channel_values"]["notes"][0] == "a new start"
    data = every_file(saver_dir)
    assert not any(s in data for s in sealed)
    assert b"4111 1111 1111 1111" not in plaintexts(saver_dir, key)


def test_prune_erases_what_it_let_go_and_keeps_the_latest(saver_dir: Path, key: bytes) -> None:
    with SovsealSaver.open(saver_dir, key=key) as saver:
        app = _graph(saver)
        _run(app, "t", "first secret note", 5)
        config = {"configurable": {"thread_id": "t"}}
        latest = saver.get_tuple(config)
        assert latest is not None
        before = _sealed(saver, "t")
        saver.prune(["t"], strategy="keep_latest")
        kept = saver.get_tuple(config)
        assert kept is not None and kept.checkpoint["channel_values"] == latest.checkpoint["channel_values"]
        assert len(list(saver.list(config))) == 1
        assert saver.sovseal.verify().ok and saver.sovseal.erasures() > 0
        saver.sovseal.compact()
        app.invoke({"notes": []}, config)  # the thread goes on from the kept checkpoint
        assert len(saver.get_tuple(config).checkpoint["channel_values"]["notes"]) == len(latest.checkpoint["channel_values"]["notes"]) + 1
    data = every_file(saver_dir)
    assert sum(s in data for s in before) < len(before)  # the let-go checkpoints' bytes are gone
    with SovsealSaver.open(saver_dir, key=key) as saver:
        assert saver.sovseal.verify().ok


def test_a_copied_thread_keeps_the_records_it_shares_when_the_source_is_deleted(saver_dir: Path, key: bytes) -> None:
    with SovsealSaver.open(saver_dir, key=key) as saver:
        app = _graph(saver)
        _run(app, "source", "shared history", 3)
        saver.copy_thread("source", "copy")
        expected = saver.get_tuple({"configurable": {"thread_id": "copy"}}).checkpoint["channel_values"]
        history = len(list(saver.list({"configurable": {"thread_id": "copy"}})))
        saver.delete_thread("source")
        assert saver.get_tuple({"configurable": {"thread_id": "source"}}) is None
        copy = saver.get_tuple({"configurable": {"thread_id": "copy"}})
        assert copy is not None and copy.checkpoint["channel_values"] == expected
        assert len(list(saver.list({"configurable": {"thread_id": "copy"}}))) == history
        assert saver.sovseal.verify().ok
        saver.delete_thread("copy")  # now nothing reaches them: erased
        assert saver.sovseal.erasures() > 0 and saver.sovseal.verify().ok


def test_the_store_erases_on_delete_when_asked_and_keeps_history_otherwise(tmp_path: Path, key: bytes) -> None:
    from langgraph.store.sovseal import SovsealStore

    from tests.erasure_scan import sealed_under
    from tests.fakes import fake_embed

    with SovsealStore.open(tmp_path / "kept", key=key, embedder=fake_embed) as store:
        store.put(("users", "ada"), "card", {"number": "4111 1111 1111 1111"})
        store.delete(("users", "ada"), "card")
        assert store.get(("users", "ada"), "card") is None
        assert store._h.erasures() == 0
    with SovsealStore.open(tmp_path / "erased", key=key, embedder=fake_embed, erase_on_delete=True) as store:
        store.put(("users", "ada"), "card", {"number": "4111 1111 1111 1111"})
        store.put(("users", "ada"), "card", {"number": "4111 1111 1111 1112", "note": "x" * 600_000})  # in parts
        store.put(("users", "ada"), "name", {"name": "Ada"})
        card = next(p for p in store._h.state() if p.endswith("card"))
        sealed = [s for versions in sealed_under(store._h, card).values() for s in versions]
        assert len(sealed) > 2
        store.delete(("users", "ada"), "card")
        assert store.get(("users", "ada"), "card") is None and store.get(("users", "ada"), "name").value == {"name": "Ada"}
        assert store._h.verify().ok and store._h.erasures() >= len(sealed)
    data = every_file(tmp_path / "erased")
    assert not any(s in data for s in sealed)
    assert b"4111 1111 1111 111" not in plaintexts(tmp_path / "erased", key)
