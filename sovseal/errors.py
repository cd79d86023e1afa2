"""Typed errors raised by sovseal.

Every error a caller can act on has its own class, and every message says what to do next.
All of them derive from :class:`SovsealError`, so ``except SovsealError`` catches anything
sovseal raises on purpose.
"""

from __future__ import annotations

from pathlib import Path


class SovsealError(Exception):
    """Base class of every error sovseal raises on purpose."""


class InvalidInputError(SovsealError, ValueError):
    """The caller passed something sovseal cannot store or act on (bad path, payload, argument)."""


class CanonicalizationError(InvalidInputError):
    """A value has no RFC 8785 (JCS) form: NaN, infinity, a non-string key, bytes, a set, ..."""


class PayloadTooLargeError(InvalidInputError):
    """A payload is larger than the documented record limit: records are not blobs."""


class UnknownSnapshotError(InvalidInputError, KeyError):
    """A snapshot id given to fork, rollback or store(parent=...) does not exist in this store."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class UnknownBranchError(InvalidInputError, KeyError):
    """A branch name does not exist in this store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IntegrityError(SovsealError):
    """Stored bytes failed authentication or their snapshot id did not re-derive.

    Sovseal never returns such a record. Restore the store from a replica or backup, or run
    ``sovseal verify`` to list every damaged record.
    """


class ErasedError(SovsealError):
    """The record was erased by a purge: its content is gone for good (docs/design.md, "Redaction skeletons")."""


class UnknownPathError(InvalidInputError, KeyError):
    """No version of the path exists on any branch: nothing to purge."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class HeadMovedError(SovsealError):
    """``store(..., if_heads=...)`` found a branch's HEAD elsewhere: another writer appended to the
    branch or moved it since the caller read it. Nothing was stored; read the branch again and retry.
    """


class KeyUnavailableError(SovsealError):
    """No master key could be loaded (no OS keychain, no allowed fallback, or the wrong key)."""


class KeyRotatedError(KeyUnavailableError):
    """Another device rotated this store to a new key: what was sealed under this one is erased.

    ``new_key_id`` names the new key. Import it (``sovseal key import``) into a new store directory,
    set the new project's API key, and pull: the store comes back whole under the new key.
    """

    def __init__(self, message: str, *, new_key_id: str) -> None:
        super().__init__(message)
        self.new_key_id = new_key_id


class KeyExhaustedError(SovsealError):
    """A key has sealed so many records that random 96-bit nonces would no longer be safe."""


class LockTimeoutError(SovsealError, TimeoutError):
    """Another writer held the store's lock for longer than the configured timeout."""


class BackpressureTimeoutError(SovsealError, TimeoutError):
    """The replication outbox stayed over its byte limit for longer than the timeout."""


class ModelUnavailableError(SovsealError):
    """The embedding model could not be found or failed its integrity check."""


class StoreClosedError(SovsealError):
    """The store was used after ``close()``."""


class StorageError(SovsealError, OSError):
    """The disk refused a write or an fsync (full, read-only, I/O error); ``errno`` says which.

    Nothing half-written is left behind: the journal is cut back to its last durable frame, so the
    store reopens and verifies. Free space or fix the disk, then retry the call.
    """


class ReadOnlyStoreError(StorageError):
    """A write to a store opened read-only (a read-only volume, a mounted backup, ``read_only=True``).

    Reads, recall, verify and export work; to write, open a writable copy of the store.
    """


class JournalFormatError(SovsealError):
    """The journal was written in an on-disk format this version does not read (older or newer).

    Nothing was changed. Move the data with the version that wrote it: ``sovseal export`` there,
    then ``sovseal import`` into a new store here (backups hold wire items, not journal frames).
    """


class ReplicationError(SovsealError):
    """The replication server refused a request, or could not be reached for a pull.

    ``status`` is the HTTP status (None for a network error), ``code`` the server's error code,
    ``ids`` the items concerned and ``retryable`` whether the worker retries by itself (5xx and
    network errors) or waits for you (4xx: fix the cause, then ``replication.retry()``).
    """

    def __init__(
        self, message: str, *, status: int | None = None, code: str = "", ids: list[str] | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.ids = list(ids or [])
        self.retryable = retryable


class AnonymizerUnavailableError(SovsealError):
    """The anonymizer cannot run: Presidio is not installed, or a configured NER model cannot load.

    Install the extra with ``pip install "sovseal[anonymize]"``; for a NER model, install its wheel or
    point ``SOVSEAL_NER_MODEL`` at a saved spaCy pipeline (``none`` runs without NER).
    """


class UnknownSessionError(InvalidInputError, KeyError):
    """An anonymization session id is unknown, expired, or was already used by ``deanonymize``.

    Token maps live in memory only and are discarded after deanonymization or their time-to-live:
    anonymize the message again to start a new session.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ServerMisbehaviourError(ReplicationError):
    """A replication server answered a pull or a push with something an honest server never sends.

    A pull page too large, not JSON, of the wrong content type, with sequence numbers that skip, go
    back or pass the server's own ``last``, or more items already here than this store holds. The
    pull stops; everything verified and imported before it stays, and the cursor stays at the last
    item imported, so a later pull from an honest server carries on. A push answer that is
    compressed, too large or not JSON acknowledges nothing: the push is retried. Check the endpoint (is it
    your sovseal server, or a proxy in front of it?); ``code`` says which rule the answer broke.
    """


class EmbedderMismatchError(SovsealError):
    """The store's vector index was filled by another embedding model than this handle's embedder.

    Vectors of two models cannot be compared, so recall and recall_by_vector are refused; reads
    (get, state, log, verify, export) work, and store() still writes durably to the journal (the
    new record gets no vector until the rebuild). ``recorded`` and ``current`` are the two
    fingerprints (see :mod:`sovseal.embed.fingerprint`). Switch the store to the current model with
    ``sovseal rebuild-index`` (``sovseal.rebuild_index``), which re-embeds every memory and
    records it; or open the store with the model it was built with.
    """

    def __init__(self, message: str, *, recorded: dict[str, object] | None = None, current: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.recorded = recorded
        self.current = current


class DatabaseUnavailableError(SovsealError):
    """The replication server cannot reach its database (PostgreSQL down, wrong host, port or role).

    The message names the host, port, database and role, never a password. Start the database or
    fix the URL (``--database`` / ``SOVSEAL_SERVER_DATABASE``), then start the server again.
    """


class StoreNotFoundError(SovsealError):
    """The directory holds no sovseal store (``sovseal init`` creates one)."""

    @classmethod
    def at(cls, directory: Path) -> StoreNotFoundError:
        """The error for ``directory``, saying how to create a store there or point at another."""
        return cls(
            f"no sovseal store at {directory}; create one with `sovseal init --path {directory}` "
            f"(or point --path / SOVSEAL_HOME at an existing store)"
        )


class MemoryNotFoundError(InvalidInputError, KeyError):
    """No memory is visible at a path on the branch's HEAD."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AmbiguousSnapshotError(InvalidInputError):
    """A snapshot id prefix matches more than one snapshot."""


class MissingExtraError(SovsealError, ImportError):
    """A part of sovseal that ships as a pip extra (the replication server, the MCP server) is used
    without it: the message is one line naming the ``pip install`` to run (``sovseal.extras``)."""
