"""Opening the store a command acts on (its key and where the key came from, the embedder), and
saying when its replication is failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sovseal import settings
from sovseal.cli import hooks
from sovseal.cli.errors import _ORIGIN, _KeyOrigin, _one_line
from sovseal.cli.interrupts import _WRITE, _watch
from sovseal.cli.options import STDIN, _key_text
from sovseal.cli.output import _count, _human, _note
from sovseal.errors import (
    InvalidInputError,
    StoreNotFoundError,
)
from sovseal.paths import store_dir, store_exists
from sovseal.sdk.opening import ENV_KEY, open_store, resolve_key
from sovseal.sdk.views import jsonable

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.sdk.client import EmbedFn, Sovseal


def _store_key(directory: Path, key_file: str | None, *, create: bool = False) -> tuple[bytes, _KeyOrigin]:
    """The store's key (:func:`resolve_key`), and where it came from, which is also left in
    click's ``ctx.meta`` so that a key error raised later in the command can say what to fix."""
    given: str | None
    if key_file is not None:
        given = "--key-file - (stdin)" if key_file == STDIN else f"--key-file {key_file}"
    else:
        given = ENV_KEY if settings.KEY.is_set() else None
    origin = _KeyOrigin(directory, given, create)
    click.get_current_context().meta[_ORIGIN] = origin
    try:
        key, origin.backend = resolve_key(directory, key_text=_key_text(key_file), create=create)
    except InvalidInputError as exc:  # a malformed key: say which option or variable held it
        if given is None or given in str(exc):
            raise
        raise InvalidInputError(f"{given}: {exc}") from None
    return key, origin


@contextmanager
def _open(
    path: str | None, branch: str = "main", key_file: str | None = None, *, create: bool = False, embedder: EmbedFn | None = None
) -> Iterator[tuple[Sovseal, _KeyOrigin]]:
    """The store at ``path`` (created with ``create``) and where its key came from."""
    directory = store_dir(path)
    exists = store_exists(directory)
    if not (exists or create):
        raise StoreNotFoundError.at(directory)  # before any key lookup: the store is what is missing
    key, origin = _store_key(directory, key_file, create=create and not exists)
    mem, _ = open_store(directory, branch=branch, key=key, create=create, embedder=embedder or hooks.embedder())
    with mem:
        _watch(mem, directory, key)
        yield mem, origin
        write = click.get_current_context().meta.get(_WRITE)
        if write is not None and write.done is not None and mem.replication is not None:
            _warn_if_failing(replication_state(mem))


def replication_state(mem: Sovseal) -> dict[str, Any] | None:
    """Replication as ``Sovseal.status()`` reports it once the worker has tried to send what is
    queued (what ``close`` would do anyway), plus ``queued`` (items in the outbox) and ``since``
    (when the oldest of them was written); None when replication is off.

    A command is a fresh process: read at once, the worker has not tried yet and would say
    ``sending`` with no error while the server is down; after the attempt it says ``backoff``
    with the error, as a long-running SDK process does.
    """
    if mem.replication is None:
        return None
    mem.replication.flush(mem.replication.config.drain_on_close, stop_on_failure=True)
    status = mem.status()
    info: dict[str, Any] = jsonable(getattr(status, "replication", None)) or {}
    info["queued"] = status.outbox_records
    info["since"] = jsonable(status.outbox_since)
    return info


def _warn_if_failing(info: dict[str, Any] | None) -> None:
    """Warn on stderr that the write is not replicated yet because replication is failing."""
    if info is None or (info.get("state") not in ("backoff", "paused") and not info.get("last_error")):
        return
    since = f" since {_human(info['since'])}" if info.get("since") else ""
    _note(
        f"warning: replication to {info.get('endpoint')} is failing ({info.get('state')}): {_one_line(str(info.get('last_error')))}; "
        f"{_count(info['queued'], 'item')} queued{since} stay in the outbox and are sent once it answers (see `sovseal status`)"
    )


@contextmanager
def _model_loading() -> Iterator[EmbedFn | None]:
    """The on-device model, loading in a thread from now on: a command that embeds a query loads
    it while the store opens (both take a few hundred milliseconds) instead of after.

    Leaving the block waits for the thread, also when the command fails first: an interpreter that
    exits while the thread is inside onnxruntime's native code aborts the process (SIGABRT, exit
    134) instead of exiting with the command's code.
    """
    if (hooked := hooks.embedder()) is not None:
        yield hooked
        return
    import threading

    from sovseal.embed import Embedder

    embedder = Embedder()
    loader = threading.Thread(target=_load_quietly, args=(embedder,), name="sovseal-model", daemon=True)
    loader.start()
    try:
        yield embedder
    finally:
        loader.join()


def _load_quietly(embedder: Any) -> None:
    """Load ``embedder`` ahead of its first use. A failure is left for that use to raise again, in
    the command's thread, where it becomes one line and an exit code (here it would be a traceback)."""
    try:
        embedder.ready()
    except Exception:  # noqa: BLE001 - the first embed loads again and reports the error properly
        return
