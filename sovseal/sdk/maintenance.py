"""Rebuilding a store's vector index: how a store switches embedding model (docs/embedder.md)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sovseal.errors import ReadOnlyStoreError
from sovseal.models import Progress

from .opening import open_store

if TYPE_CHECKING:
    from .client import EmbedFn


def rebuild_index(
    path: str | os.PathLike[str] | None = None,
    *,
    key_text: str | None = None,
    embedder: EmbedFn | None = None,
    progress: Progress | None = None,
) -> int:
    """Drop the store's vector index and rebuild it by re-embedding the memories visible on every branch.

    The index is derived data (docs/design.md, "On disk"): the sealed journal is the source of truth, so
    this loses nothing. It is also how a store switches embedding model: the new index records the
    fingerprint of ``embedder`` (default: the on-device model, as ``SOVSEAL_MODEL_DIR`` selects it)
    in ``index/model.json``, and recall, refused with ``EmbedderMismatchError`` while the index
    held another model's vectors, works again (docs/embedder.md). Other processes should not have
    the store open meanwhile. Returns the number of branches indexed; progress is counted in
    branches.

    SDK gap: the SDK has no ``rebuild_index``; this removes ``<store>/index`` and lets the SDK
    re-embed what recall needs, one branch at a time. The old index is moved aside in one rename
    before it is deleted: a crash leaves the old index whole (its ``model.json`` with it) or none,
    never vectors without the record of their model. A process that still has the store open
    notices the rebuild and stops writing to the index (:meth:`VectorIndex.retired`).
    """
    mem, _ = open_store(path, key_text=key_text, embedder=embedder)
    with mem:
        if mem._store.read_only:
            raise ReadOnlyStoreError(
                f"the store {mem.path} is read-only (a read-only volume, or a mounted backup): its index cannot be "
                "rebuilt here. Copy the store to a writable place and rebuild the copy; reads and exports work as it is"
            )
        names = mem.branches()
        directory = mem.path
    from sovseal.recall.vector_index import discard_index

    discard_index(directory / "index")
    mem, _ = open_store(directory, key_text=key_text, embedder=embedder)
    with mem:
        mem.ready()  # loads the model and records its fingerprint, even in a store with nothing to embed
        if progress:
            progress(0, len(names))
        for done, name in enumerate(names, 1):
            mem.checkout(name)
            if mem.snapshot() is not None:
                mem.recall("sovseal index rebuild", k=1)  # embeds every visible record the index lacks
            if progress:
                progress(done, len(names))
    return len(names)
