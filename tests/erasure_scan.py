"""What an erasure test scans for (issue #23), shared by the core's and the adapters' erasure tests.

As tests/core/test_purge.py does: collect the sealed bytes of the records before they are erased,
then search every file of the store directory for them, and everything the key still opens (every
record's entry, every redaction's body, the checkpoint's arrays) for the plaintext.
"""

from __future__ import annotations

from pathlib import Path

from sovseal import Sovseal
from sovseal.storage import checkpoint as cp
from sovseal.storage import frames as fr
from sovseal.storage.store import CHECKPOINT
from tests.fakes import fake_embed


def sealed_under(mem: Sovseal, prefix: str) -> dict[str, list[bytes]]:
    """The sealed entry bytes of every version of every record under ``prefix`` (any branch, deleted too)."""
    store = mem._store
    out: dict[str, list[bytes]] = {}
    with store.reading() as lineage:
        for node in lineage.nodes:
            if node.redacted:
                continue
            opened = store.open(node.idx)
            if opened.entry.path.startswith(prefix):
                frame = store.decode(store.recheck(node.idx))
                assert isinstance(frame, fr.RecordFrame)
                out.setdefault(opened.entry.path, []).append(frame.sealed_entry)
    return out


def every_file(directory: Path) -> bytes:
    return b"\0".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def plaintexts(directory: Path, key: bytes) -> bytes:
    """Everything the key still opens: every record's entry, every redaction's body, the checkpoint."""
    out: list[bytes] = []
    with Sovseal(directory, key=key, embedder=fake_embed) as mem:
        store = mem._store
        with store.reading() as lineage:
            for node in lineage.nodes:
                if not node.redacted:
                    out.append(store.open(node.idx).entry.canonical())
        for item in mem.export_items():
            if item.kind == "redaction":
                frame = fr.RedactionFrame(round(item.created_at * 1e6), tuple((bytes.fromhex(w), s) for w, s in item.erased), item.sealed)
                out.append(repr(store._open_redaction_body(frame)).encode())
    if (directory / CHECKPOINT).exists():
        from sovseal.crypto.primitives import derive_subkeys

        _, arrays = cp.read(directory / CHECKPOINT, derive_subkeys(key).k_rest)
        out.extend(a.tobytes() for a in arrays.values())
    return b"\0".join(out)


def assert_gone(directory: Path, key: bytes, sealed: list[bytes], *needles: bytes) -> None:
    data = every_file(directory)
    assert sealed and not any(s in data for s in sealed)
    opened = plaintexts(directory, key)
    for needle in needles:
        assert needle not in opened
