"""The handle an adapter works on, and the names it builds record paths from.

Every framework component (a vector store, a chat history, a byte store, a checkpointer) takes
either an open ``Sovseal`` to share with the rest of the application or what it needs to open one.
The rule is written once so that every adapter refuses the same mistakes with the same words and
closes only the handles it opened itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Self

from sovseal.errors import InvalidArgumentTypeError, InvalidInputError
from sovseal.sdk.client import EmbedFn, Sovseal


def open_handle(
    client: Sovseal | None,
    *,
    path: str | os.PathLike[str] | None = None,
    key: bytes | str | None = None,
    embedder: EmbedFn | None = None,
    branch: str | None = None,
    client_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Sovseal, bool]:
    """The handle to use, and whether the caller opened it (and so must close it).

    ``client`` is shared as it is: a component given one never closes it, and ``path``, ``key``,
    ``branch`` and ``client_kwargs`` would describe another store, so passing both is refused
    rather than half-applied. Without ``client`` a handle is opened with ``Sovseal(path, key=key,
    branch=branch, embedder=embedder, **client_kwargs)`` (an ``embedder`` in ``client_kwargs`` too).
    """
    kwargs = dict(client_kwargs or {})
    if client is not None:
        if path is not None or key is not None or branch is not None or kwargs:
            raise InvalidInputError("pass either client= (an open Sovseal) or path=/key=/branch=/... to open one, not both")
        if not isinstance(client, Sovseal):
            raise InvalidArgumentTypeError(f"client must be a sovseal.Sovseal, got {type(client).__name__}")
        return client, False
    if branch is not None:
        kwargs["branch"] = branch
    if embedder is not None:
        if kwargs.get("embedder") is not None:
            raise InvalidInputError("the embedder was given twice: pass embedder= once")
        kwargs["embedder"] = embedder
    return Sovseal(path, key=key, **kwargs), True


class HandleOwner:
    """The lifecycle every adapter component shares: it works on ``self._client`` and closes it only
    if it opened it (``self._owns_client``, from :func:`open_handle`); a handle passed in stays open
    for the rest of the application. Mixed into framework classes (pydantic models too), so it
    declares no fields of its own: the component sets the two attributes.
    """

    _client: Sovseal
    _owns_client: bool

    @property
    def client(self) -> Sovseal:
        """The ``sovseal.Sovseal`` handle underneath (for anything the framework surface does not cover)."""
        return self._client

    def close(self) -> None:
        """Close the sovseal handle if this component opened it (a handle passed as ``client=`` stays open)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_segment(value: object, what: str) -> str:
    """A path segment an adapter builds prefixes from (a collection, a namespace): a non-empty
    string without ``/`` or NUL, so that one collection's prefix never covers another's records."""
    if not isinstance(value, str) or not value or "/" in value or "\x00" in value:
        raise InvalidInputError(f"{what} must be a non-empty string without '/' or NUL characters; got {value!r}")
    return value


def check_key(value: object, what: str) -> str:
    """A caller's id that ends a record path (a document id, a key): any string without NUL, which
    sovseal paths cannot hold. Checked before any write, so a bad id in a batch stores nothing."""
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(f"{what} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError(f"{what} must not contain NUL characters")
    return value


def batch_id() -> str:
    """A unique name for one call's batch of records: the time in ns (16 hex digits), then 8 random.

    Chat stores name each message after the batch that added it, so two devices (or processes) that
    append to one conversation at once never write the same record, and after a sync both batches
    sort the same way everywhere, by time first.
    """
    return f"{time.time_ns():016x}{os.urandom(4).hex()}"
