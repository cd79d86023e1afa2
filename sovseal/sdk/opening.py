"""Opening a store as the front ends do: the key looked up in the documented order, the branch from
the environment, and no store (and no key) created by a mere open."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sovseal import settings
from sovseal.errors import StoreNotFoundError
from sovseal.paths import store_dir, store_exists

if TYPE_CHECKING:  # the store, the keychain and the ciphers load when used: `sovseal --help` needs none
    from .client import EmbedFn, Sovseal

ENV_BRANCH = settings.BRANCH.name
ENV_KEY = settings.KEY.name  # an exported key (``sovseal-key-v1:...``) given through the environment


def resolve_key(path: Path, *, key_text: str | None = None, create: bool = False) -> tuple[bytes, str]:
    """The store's master key and where it came from (:func:`sovseal.crypto.keychain.resolve_key`,
    which ``Sovseal()`` uses too, imported when a key is looked up: ``sovseal --help`` needs no keychain).

    Order: ``key_text`` (an exported key, e.g. read from ``--key-file``), then ``$SOVSEAL_KEY``, then
    the OS keychain or the key file. A key is created only with ``create``: opening an existing store
    never makes a new key, which would not open it.
    """
    from sovseal.crypto.keychain import resolve_key as resolve

    return resolve(path, key_text=key_text, create=create)


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
    branch = branch or settings.BRANCH.get()
    from .client import Sovseal

    return Sovseal(directory, key=key, branch=branch, embedder=embedder), backend
