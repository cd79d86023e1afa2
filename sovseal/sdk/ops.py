"""Operations shared by the ``sovseal`` command line and the MCP server.

The CLI and the MCP server only parse arguments and render results; everything they *do* is here,
as typed library functions on top of the public :class:`~sovseal.Sovseal` API, so no behaviour
exists only in one front end. Functions that need something the SDK does not expose yet say so
with an ``SDK gap`` note in their docstring; they are meant to move into the SDK.
"""

from __future__ import annotations

import base64
import dataclasses
import heapq
import io
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sovseal.errors import (
    IntegrityError,
    InvalidInputError,
    KeyUnavailableError,
    ReadOnlyStoreError,
    SovsealError,
    UnknownSnapshotError,
)
from sovseal.models import Memory
from sovseal.paths import ENV_HOME, store_dir, store_exists

if TYPE_CHECKING:  # the store, the keychain and the ciphers load when used: `sovseal --help` needs none
    from .client import EmbedFn, Sovseal

__all__ = [
    "ENV_BRANCH",
    "ENV_HOME",
    "ENV_KEY",
    "AmbiguousSnapshotError",
    "BackupInfo",
    "GraphNode",
    "MemoryNotFoundError",
    "Progress",
    "RotationResult",
    "StoreNotFoundError",
    "branch_heads",
    "branch_table",
    "draw_graph",
    "envelope",
    "error_envelope",
    "export_backup",
    "import_backup",
    "jsonable",
    "open_store",
    "read_backup_header",
    "rebuild_index",
    "recurring_patterns",
    "require_memory",
    "resolve_key",
    "resolve_snapshot",
    "retire_old_project",
    "rotate_key",
    "snapshot_graph",
    "store_exists",
]

ENV_BRANCH = "SOVSEAL_BRANCH"
ENV_KEY = "SOVSEAL_KEY"  # an exported key (``sovseal-key-v1:...``) given through the environment

#: ``progress(done, total)``: called as work advances; ``total`` is fixed for one run.
Progress = Callable[[int, int], None]
log = logging.getLogger(__name__)


class StoreNotFoundError(SovsealError):
    """The directory holds no sovseal store (``sovseal init`` creates one)."""

    @classmethod
    def at(cls, directory: Path) -> StoreNotFoundError:
        """The error for ``directory``, saying how to create a store there or point at another."""
        return cls(
            f"no sovseal store at {directory}; create one with `sovseal init --path {directory}` "
            f"(or point --path / {ENV_HOME} at an existing store)"
        )


class MemoryNotFoundError(InvalidInputError, KeyError):
    """No memory is visible at a path on the branch's HEAD."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AmbiguousSnapshotError(InvalidInputError):
    """A snapshot id prefix matches more than one snapshot."""


# -- opening a store ----------------------------------------------------------------------------


def resolve_key(path: Path, *, key_text: str | None = None, create: bool = False) -> tuple[bytes, str]:
    """The store's master key and where it came from.

    Order: ``key_text`` (an exported key, e.g. read from ``--key-file``), then ``$SOVSEAL_KEY``, then
    the OS keychain or the key file (:func:`sovseal.crypto.keychain.load_master_key`). A key is created only
    with ``create``: opening an existing store never makes a new key, which would not open it.
    """
    from sovseal.crypto.keychain import import_key, load_master_key

    if key_text is not None:
        return import_key(key_text), "explicit"
    env = os.environ.get(ENV_KEY)
    if env:
        return import_key(env), f"env:{ENV_KEY}"
    return load_master_key(path, create=create)


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    branch: str | None = None,
    key_text: str | None = None,
    key: bytes | None = None,
    create: bool = False,
    embedder: EmbedFn | None = None,
) -> tuple[Sovseal, str]:
    """Open the store at ``path`` (default ``$SOVSEAL_HOME`` or ``~/.sovseal``); returns (handle, key backend).

    Without ``create``, a directory that holds no store raises :class:`StoreNotFoundError` instead of
    silently creating a store and a key. ``branch`` defaults to ``$SOVSEAL_BRANCH`` or ``main``.
    ``key`` (raw bytes) or ``key_text`` (an exported key) skip the key lookup.
    """
    directory = store_dir(path)
    if not create and not store_exists(directory):
        raise StoreNotFoundError.at(directory)
    if key is not None:
        backend = "explicit"
    else:
        key, backend = resolve_key(directory, key_text=key_text, create=create and not store_exists(directory))
    branch = branch or os.environ.get(ENV_BRANCH) or "main"
    from .client import Sovseal

    return Sovseal(directory, key=key, branch=branch, embedder=embedder), backend


# -- plain data ---------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, bytes and containers as JSON-ready values (datetimes in ISO 8601)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Path):
        return str(value)
    return value


def _now_ms() -> int:
    return int(time.time() * 1000)


def envelope(data: Any) -> dict[str, Any]:
    """The result shape of every MCP tool (seed 001): ``{success, data, timestamp}`` (ms since epoch)."""
    return {"success": True, "data": jsonable(data), "timestamp": _now_ms()}


def error_envelope(exc: BaseException) -> dict[str, Any]:
    """A failure in the same shape: ``{success: false, error: {type, message}, timestamp}``."""
    return {"success": False, "error": {"type": type(exc).__name__, "message": str(exc)}, "timestamp": _now_ms()}


# -- reading helpers ----------------------------------------------------------------------------


def require_memory(mem: Sovseal, path: str) -> Memory:
    """``mem.get(path)``, or :class:`MemoryNotFoundError` naming the branch when nothing is visible there."""
    found = mem.get(path)
    if found is None:
        raise MemoryNotFoundError(
            f"no memory at path {path!r} on branch {mem.branch!r}; search with recall to find the path"
        )
    return found


@contextmanager
def _on_branch(mem: Sovseal, branch: str) -> Iterator[None]:
    """Temporarily make ``branch`` the handle's branch (the caller serializes use of ``mem``)."""
    previous = mem.branch
    mem.checkout(branch)
    try:
        yield
    finally:
        mem.checkout(previous)


def branch_heads(mem: Sovseal) -> dict[str, str | None]:
    """Every branch and its HEAD snapshot id (None: no snapshot yet)."""
    return mem.heads()


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One snapshot of the lineage DAG, with the branches whose HEAD it is."""

    snapshot_id: str
    parent_id: str | None  # the parents' ids joined by "," (a merge has several), as log() gives it
    op: str
    path: str
    created_at: datetime
    branches: tuple[str, ...] = ()

    @property
    def parents(self) -> list[str]:
        return self.parent_id.split(",") if self.parent_id else []


def snapshot_graph(mem: Sovseal) -> list[GraphNode]:
    """The snapshots reachable from any branch HEAD, children before parents, newest first.

    Snapshots that no branch reaches any more (a branch rolled back past them) are left out, like
    ``git log --all``.
    """
    heads = mem.status().heads  # every head of every branch: a branch a pull left unmerged has several
    labels: dict[str, list[str]] = {}
    for name, sids in heads.items():
        for head in sids:
            if head is not None:
                labels.setdefault(head, []).append(name)
    nodes: dict[str, GraphNode] = {}
    for name in heads:
        with _on_branch(mem, name):
            for entry in mem.log():
                if entry.snapshot_id in nodes:
                    continue  # reached from another branch already
                nodes[entry.snapshot_id] = GraphNode(
                    entry.snapshot_id,
                    entry.parent_id,
                    entry.op,
                    entry.path,
                    entry.created_at,
                    tuple(sorted(labels.get(entry.snapshot_id, []))),
                )
    # Topological order, newest first: a snapshot comes after all of its children.
    children: dict[str, int] = dict.fromkeys(nodes, 0)
    for node in nodes.values():
        for parent in node.parents:
            if parent in children:
                children[parent] += 1
    ready = [(-n.created_at.timestamp(), n.snapshot_id) for n in nodes.values() if children[n.snapshot_id] == 0]
    heapq.heapify(ready)
    out: list[GraphNode] = []
    while ready:
        _, sid = heapq.heappop(ready)
        node = nodes[sid]
        out.append(node)
        for parent in node.parents:
            if parent in children:
                children[parent] -= 1
                if children[parent] == 0:
                    heapq.heappush(ready, (-nodes[parent].created_at.timestamp(), parent))
    return out


def draw_graph(nodes: list[GraphNode]) -> list[tuple[str, GraphNode | None]]:
    """Lay ``nodes`` (from :func:`snapshot_graph`) out in lanes like ``git log --graph``.

    Returns rows of (graph prefix, node); connector rows between snapshots have node None. Lanes
    join where branches forked, and a merge (several parents) opens a lane for each other parent.
    """
    lanes: list[str] = []  # the snapshot id each lane is waiting for
    rows: list[tuple[str, GraphNode | None]] = []
    for node in nodes:
        if node.snapshot_id in lanes:
            col = lanes.index(node.snapshot_id)
        else:
            lanes.append(node.snapshot_id)
            col = len(lanes) - 1
        rows.append((" ".join("*" if k == col else "|" for k in range(len(lanes))), node))
        parents = node.parents
        if not parents:
            lanes.pop(col)
            if col < len(lanes):  # lanes to the right shift left by one
                rows.append((_shift_row(len(lanes) + 1, col), None))
            continue
        lanes[col] = parents[0]
        for extra in parents[1:]:  # a merge: each other parent gets a lane of its own, to the right
            if extra not in lanes:
                lanes.insert(col + 1, extra)
                rows.append((_merge_row(len(lanes), col), None))
        while True:  # join lanes that now wait for the same parent (a fork point)
            dup = next((j for j in range(len(lanes)) if lanes[j] in lanes[:j]), None)
            if dup is None:
                break
            rows.append((_join_row(len(lanes), lanes.index(lanes[dup]), dup), None))
            lanes.pop(dup)
    return rows


def _join_row(width: int, into: int, lane: int) -> str:
    chars = [" "] * (2 * width)
    for k in range(width):
        if k < lane:
            chars[2 * k] = "|"
        else:
            chars[2 * k - 1] = "/"
    for k in range(into, lane - 1):
        chars[2 * k + 1] = "_"
    return "".join(chars).rstrip()


def _merge_row(width: int, col: int) -> str:
    """A connector row in which lane ``col`` opens a new lane to its right (a merge's other parent):
    ``|`` up to it, a backslash after it, lanes past it moved one to the right."""
    chars = [" "] * (2 * width)
    for k in range(width):
        if k <= col:
            chars[2 * k] = "|"
        else:
            chars[2 * k - 1] = "\\"
    return "".join(chars).rstrip()


def _shift_row(width: int, gone: int) -> str:
    chars = [" "] * (2 * width)
    for k in range(width):
        if k < gone:
            chars[2 * k] = "|"
        elif k > gone:
            chars[2 * k - 1] = "/"
    return "".join(chars).rstrip()


def resolve_snapshot(mem: Sovseal, text: str) -> str:
    """A full snapshot id from ``text``: a full id, or a unique prefix (``snap_4f3a``, ``4f3a``) of a
    snapshot reachable from some branch HEAD."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("a snapshot id looks like 'snap_<64 hex>' (a unique prefix such as snap_4f3ad8 works)")
    text = text.strip().lower()
    prefix = text if text.startswith("snap_") else "snap_" + text
    body = prefix[len("snap_") :]
    if not body or any(c not in "0123456789abcdef" for c in body):
        raise InvalidInputError(f"a snapshot id looks like 'snap_<64 hex>'; got {text!r}")
    if len(body) == 64:
        return prefix
    matches = sorted({n.snapshot_id for n in snapshot_graph(mem) if n.snapshot_id.startswith(prefix)})
    if not matches:
        raise UnknownSnapshotError(f"no snapshot starting with {prefix} on any branch; list snapshots with `sovseal log --graph`")
    if len(matches) > 1:
        raise AmbiguousSnapshotError(f"{prefix} matches {len(matches)} snapshots; give more characters of the id")
    return matches[0]


def branch_table(mem: Sovseal) -> list[dict[str, Any]]:
    """One row per branch: name, HEAD snapshot id, visible memory count, and whether it is ``mem``'s branch."""
    rows: list[dict[str, Any]] = []
    for name in mem.branches():
        with _on_branch(mem, name):
            status = mem.status()
        rows.append({"name": name, "head": status.head, "visible": status.visible, "current": name == mem.branch})
    return rows


def recurring_patterns(mem: Sovseal, *, min_count: int = 1) -> dict[str, list[Memory]]:
    """Reinforced memories visible at HEAD, grouped by type, most reinforced first (seed 002's
    "Recurring Patterns"). ``min_count`` is the least ``reinforce_count`` shown (0 shows everything)."""
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 0:
        raise InvalidInputError(f"min_count must be an integer >= 0; got {min_count!r}")
    groups: dict[str, list[Memory]] = {"semantic": [], "procedural": [], "episodic": []}
    for path in mem.state():
        found = mem.get(path)
        if found is not None and found.reinforce_count >= min_count:
            groups.setdefault(found.type, []).append(found)
    for items in groups.values():
        items.sort(key=lambda m: (-m.reinforce_count, -(m.last_reinforced or m.created_at).timestamp(), m.path))
    return groups


# -- long-running work with progress ------------------------------------------------------------


def rebuild_index(
    path: str | os.PathLike[str] | None = None,
    *,
    key_text: str | None = None,
    embedder: EmbedFn | None = None,
    progress: Progress | None = None,
) -> int:
    """Drop the store's vector index and rebuild it by re-embedding the memories visible on every branch.

    The index is derived data (DESIGN.md section 4): the sealed journal is the source of truth, so
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


# -- encrypted backup files -------------------------------------------------------------------

_BACKUP_MAGIC = b"sovseal-backup v1\n"
_BACKUP_INFO = b"sovseal/v1/backup"
_CHUNK = 1 << 20
_MAX_HEADER = 64 * 1024


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """What a backup file holds (everything but ``items`` is readable without the key)."""

    key_id: str
    items: int
    created_at: float
    source_branches: list[str] = field(default_factory=list)
    skipped_damaged: int = 0


def _backup_key(master: bytes, salt: bytes) -> bytes:
    from sovseal.crypto.primitives import hkdf_sha256

    return hkdf_sha256(master, salt=salt, info=_BACKUP_INFO, length=32)


def _nonce(index: int, last: bool) -> bytes:
    # STREAM construction (Hoang, Reyhanitabar, Rogaway, Vizár 2015): a per-file key from a random
    # salt, a chunk counter and a last-chunk flag, so chunks cannot be reordered, dropped or cut off.
    return index.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def _wire_items(mem: Sovseal) -> tuple[list[Any], int]:
    """Every replicable item of the store (records, branch and reinforce events), in journal order.

    SDK gap: reads the journal through the store's private handle. An SDK ``export_items()`` (the
    same items the replication worker sends, but all of them, acknowledged or not) replaces this.
    """
    from sovseal.storage import frames as fr

    store = mem._store  # see the SDK gap above
    items: list[Any] = []
    damaged = 0
    with store.reading():
        for frame in store._journal.scan(0).frames:
            if not frame.authentic:
                damaged += 1
                continue
            try:
                decoded = store.decode(frame.body)
            except ValueError:
                damaged += 1
                continue
            if isinstance(decoded, fr.AckFrame):
                continue
            items.append(store.wire_item(decoded))
    return items, damaged


def export_backup(mem: Sovseal, master: bytes, dest: IO[bytes], *, progress: Progress | None = None) -> BackupInfo:
    """Write the whole store (every branch, snapshot, reinforcement) to ``dest`` as an encrypted file.

    The items are the sealed bytes the store already holds; the file adds a second layer: AES-256-GCM
    under a key derived from ``master`` and a random salt, in 1 MiB chunks that cannot be reordered
    or truncated unnoticed. Only the key id, the item count and the creation time are in the clear.
    Restoring needs the same master key (``sovseal key export`` / ``key import``).
    """
    from sovseal.crypto.primitives import aead_encrypt, derive_subkeys

    key_id = derive_subkeys(master).key_id
    if key_id != mem.status().key_id:
        raise KeyUnavailableError("the key given is not this store's key; export with the store's own key")
    items, damaged = _wire_items(mem)
    total = len(items)
    salt = secrets.token_bytes(32)
    info = BackupInfo(key_id, total, time.time(), mem.branches(), damaged)
    header = json.dumps(
        {
            "format": 1,
            "key_id": info.key_id,
            "items": info.items,
            "created_at": info.created_at,
            "salt": base64.b64encode(salt).decode("ascii"),
            "cipher": "AES-256-GCM, HKDF-SHA256 per-file key, STREAM chunks",
        },
        sort_keys=True,
    ).encode("utf-8")
    aad = _BACKUP_MAGIC + header
    dest.write(_BACKUP_MAGIC + header + b"\n")
    file_key = _backup_key(master, salt)
    body = io.BytesIO()
    body.write(json.dumps({"branches": info.source_branches}).encode() + b"\n")
    for item in items:
        body.write(json.dumps(item.to_json(), separators=(",", ":")).encode("ascii") + b"\n")
    body.write(json.dumps({"end": total}).encode() + b"\n")
    data = body.getvalue()
    chunks = max(1, -(-len(data) // _CHUNK))
    for index in range(chunks):
        piece = data[index * _CHUNK : (index + 1) * _CHUNK]
        sealed = aead_encrypt(file_key, _nonce(index, index == chunks - 1), piece, aad)
        dest.write(len(sealed).to_bytes(4, "big") + sealed)
        if progress:
            progress(min(total, (index + 1) * total // chunks), total)
    dest.flush()
    return info


def read_backup_header(src: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    """Read and check a backup file's clear header; returns (header, the header's AAD bytes)."""
    magic = src.read(len(_BACKUP_MAGIC))
    if magic != _BACKUP_MAGIC:
        raise InvalidInputError("not a sovseal backup file (it does not start with the backup header)")
    line = src.readline(_MAX_HEADER)
    if not line.endswith(b"\n"):
        raise InvalidInputError("the sovseal backup header is truncated or damaged")
    raw = line[:-1]
    try:
        header = json.loads(raw)
        if header.get("format") != 1:
            raise ValueError(f"unsupported backup format {header.get('format')!r}")
        base64.b64decode(header["salt"], validate=True)
        str(header["key_id"])
        int(header["items"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"the sovseal backup header is damaged ({exc})") from None
    return header, _BACKUP_MAGIC + raw


def import_backup(mem: Sovseal, master: bytes, src: IO[bytes], *, progress: Progress | None = None) -> BackupInfo:
    """Import a file written by :func:`export_backup` into ``mem``'s store (usually a fresh one).

    Every chunk is authenticated, and every record is opened and its snapshot id re-derived before it
    is written; items already present are skipped, so importing twice is harmless. The vector index
    is then brought up to date for every branch.

    """
    from sovseal.crypto.primitives import aead_decrypt, derive_subkeys
    from sovseal.storage.wire import WireItem

    header, aad = read_backup_header(src)
    key_id = derive_subkeys(master).key_id
    if header["key_id"] != key_id:
        raise KeyUnavailableError(
            f"this backup was written by a store whose key id is {header['key_id']}, but the key for "
            f"{mem.path} has id {key_id}; import the source store's key first (`sovseal key export` on "
            "the source, `sovseal key import` into a fresh store directory)"
        )
    if header["key_id"] != mem.status().key_id:
        raise KeyUnavailableError("the store's key does not match the key given for the import")
    file_key = _backup_key(master, base64.b64decode(header["salt"]))
    total = int(header["items"])
    body = bytearray()
    index = 0
    while True:
        size_bytes = src.read(4)
        if len(size_bytes) < 4:
            raise IntegrityError("the backup file is truncated: its last chunk is missing; nothing was imported")
        sealed = src.read(int.from_bytes(size_bytes, "big"))
        try:
            body += aead_decrypt(file_key, _nonce(index, False), sealed, aad)
        except IntegrityError:
            body += _last_chunk(file_key, index, sealed, aad)
            if src.read(1):
                raise IntegrityError("the backup file has data after its last chunk; nothing was imported") from None
            break
        index += 1
    lines = bytes(body).split(b"\n")
    try:
        first = json.loads(lines[0])
        trailer = json.loads(lines[-2])
        items = [WireItem.from_json(json.loads(line)) for line in lines[1:-2]]
    except (ValueError, IndexError) as exc:
        raise IntegrityError(f"the backup file's contents are malformed ({exc}); nothing was imported") from None
    if trailer != {"end": total} or len(items) != total:
        raise IntegrityError(f"the backup file should hold {total} items but holds {len(items)}; nothing was imported")
    waiting: list[Any] = []
    batch = 512
    if progress:
        progress(0, total)
    for start in range(0, total, batch):
        waiting = mem.import_items(waiting + items[start : start + batch])
        if progress:
            progress(min(total, start + batch), total)
    if waiting:
        raise IntegrityError(
            f"{len(waiting)} items of the backup refer to snapshots it does not contain; the rest was imported"
        )
    previous = mem.branch
    for name in mem.branches():  # bring the vector index up to date on every branch
        mem.checkout(name)
        if mem.snapshot() is not None:
            mem.recall("sovseal backup import", k=1)
    mem.checkout(previous if previous in mem.branches() else "main")
    return BackupInfo(header["key_id"], total, float(header.get("created_at", 0.0)), list(first.get("branches", [])))


def _last_chunk(file_key: bytes, index: int, sealed: bytes, aad: bytes) -> bytes:
    from sovseal.crypto.primitives import aead_decrypt

    try:
        return aead_decrypt(file_key, _nonce(index, True), sealed, aad)
    except IntegrityError:
        raise IntegrityError(
            f"chunk {index} of the backup file failed authentication (the file was altered, truncated, or "
            "was written with another key); nothing was imported"
        ) from None



# -- key rotation (docs/design.md, "Key rotation") ------------------------------------------------

RETIRE_FILE = Path("rotation") / "retire.json"


@dataclass(frozen=True, slots=True)
class RotationResult:
    old_key_id: str
    new_key_id: str
    records: int
    seconds: float
    verified: bool  # verify() opened every record under the new key
    retired: bool | None  # the old server project was retired; None: no replication configured
    new_key: bytes | None  # the new key, when the caller passes keys explicitly (else it is in the key store)
    index_kept: bool


def rotate_key(
    path: str | os.PathLike[str] | None = None,
    *,
    key_text: str | None = None,
    new_key: bytes | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
) -> RotationResult:
    """Re-seal the store under a new master key, and retire its old server project.

    Without ``key_text`` (and ``$SOVSEAL_KEY``) the store's key comes from its key store (keychain or
    key file): the new key is made (or ``new_key`` used), staged there first and kept there in place
    of the old one at the end. With an explicit key, ``new_key`` is required and the caller keeps it.
    Running it again after a crash finishes the same rotation (with the staged key). Stop every other
    process that has the store open first. With replication configured (arguments or environment),
    the old server project's bodies are replaced by skeletons; if the server cannot be reached the
    retirement waits in ``rotation/retire.json`` (:func:`retire_old_project` sends it later). The new
    key's replica goes to a new server project, which needs its own API key.
    """
    from sovseal.crypto.keychain import promote_staged_key, stage_next_key, staged_key
    from sovseal.crypto.primitives import project_blind_id
    from sovseal.errors import KeyUnavailableError
    from sovseal.replication.config import resolve_target
    from sovseal.storage.rotation import retirement, rotate
    from sovseal.storage.store import LocalStore

    directory = store_dir(path)
    if not store_exists(directory):
        raise StoreNotFoundError.at(directory)
    explicit = key_text is not None or bool(os.environ.get(ENV_KEY))
    if explicit and new_key is None:
        raise InvalidInputError(
            "this store's key is passed explicitly (--key-file or SOVSEAL_KEY), so sovseal does not keep it: pass the "
            "new key too (--new-key-file), and keep it where you keep the old one"
        )
    old, _ = resolve_key(directory, key_text=key_text)
    staged = None if explicit else staged_key(directory)
    if new_key is not None and staged is not None and new_key != staged:
        raise InvalidInputError("another new key is staged by an unfinished rotation; run without a new key to finish it first")
    new = new_key or staged or os.urandom(32)
    if not explicit:
        stage_next_key(directory, new)
    target = resolve_target(endpoint, api_key, project)
    try:
        store = LocalStore(directory, old) if old != new else None  # equal: a crash while promoting the staged key
    except KeyUnavailableError:  # the journal is already under the new key: a crash after the switch
        store = None
    if store is None:
        LocalStore(directory, new).close()  # opening under it finishes the switch (store.json)
        report = None
    else:
        try:
            from sovseal.crypto.sealing import Sealing

            if target is not None and not (directory / RETIRE_FILE).exists():
                items = retirement(store, Sealing(new).key_id)
                _write_retirement(directory, target.endpoint, project_blind_id(target.project, old), items)
            report = rotate(store, new)
        finally:
            store.close()
    if not explicit:
        promote_staged_key(directory)
    from .client import Sovseal

    with Sovseal(directory, key=new) as mem:
        verified = mem.verify()
        records = verified.records
    retired = retire_old_project(directory, api_key=target.api_key) if target is not None else None
    from sovseal.crypto.sealing import Sealing

    new_id = Sealing(new).key_id
    return RotationResult(
        report.old_key_id if report else Sealing(old).key_id,
        new_id,
        records,
        report.seconds if report else 0.0,
        verified.ok,
        retired,
        new if explicit else None,
        report.index_kept if report else True,
    )


def _write_retirement(directory: Path, endpoint: str, project_blind: str, items: list[Any]) -> None:
    from sovseal.durable import atomic_write, make_dirs

    make_dirs(directory / RETIRE_FILE.parent)
    data = {"endpoint": endpoint, "project": project_blind, "items": [item.to_json() for item in items]}
    atomic_write(directory / RETIRE_FILE, json.dumps(data).encode())


def retire_old_project(path: str | os.PathLike[str] | None = None, *, api_key: str | None = None) -> bool:
    """Push a rotation's pending retirement to the old server project; True when none is left.

    The items are redactions sealed under the old key (ciphertext and keyed ids only); the API key is
    the one bound to the old project (default ``$SOVSEAL_API_KEY``).
    """
    from sovseal.replication.config import API_KEY_ENV, ReplicationConfig, Target
    from sovseal.replication.http import Transport
    from sovseal.replication.protocol import encode_push
    from sovseal.storage.wire import WireItem

    directory = store_dir(path)
    pending = directory / RETIRE_FILE
    if not pending.exists():
        return True
    data = json.loads(pending.read_text())
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    transport = Transport(Target(data["endpoint"], key, "retired"), data["project"], ReplicationConfig())
    try:
        for raw in data["items"]:
            outcome = transport.push(encode_push([WireItem.from_json(raw)], ""))
            if outcome.verdict != "ok":
                log.warning(
                    "retiring the old server project failed (%s %s); `sovseal key rotate --retire` retries", outcome.code, outcome.message
                )
                return False
    finally:
        transport.close()
    pending.unlink()
    return True
