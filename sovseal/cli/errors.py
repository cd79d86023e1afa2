"""Errors in command-line words: each error's message and ``cli_advice`` on one line, and OS and usage
errors said the same way (the exit codes are the catalogue's, :mod:`sovseal.errors`).
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import click

from sovseal import settings
from sovseal.errors import (
    EXIT_ERROR,
    PASS_KEY_CLI,
    KeyUnavailableError,
    SovsealError,
)
from sovseal.sdk.opening import ENV_KEY


def exit_code(exc: BaseException) -> int:
    """The exit code for an error (see ``EXIT_CODES``): a sovseal error's class carries it."""
    return exc.exit_code if isinstance(exc, SovsealError) else EXIT_ERROR


def _one_line(text: str) -> str:
    return " ".join(str(text).split())




@dataclass
class _KeyOrigin:
    """How the CLI got, or looked for, a store's key: what a key error has to tell the user to fix."""

    directory: Path
    given: str | None  # "--key-file FILE" or "SOVSEAL_KEY": a key the user passed; None: looked up
    create: bool = False  # a new key may be made (a new store)
    backend: str | None = None  # where the key was found; None while it has not been

    def shown(self) -> str:
        """Where the key came from, for humans: the option or variable, else the backend."""
        return self.given or self.backend or "-"

    def advice(self) -> str:
        if self.backend is not None:  # a key was found, and it did not open the store
            if self.given == ENV_KEY:
                return (
                    f"the key came from {ENV_KEY}: set it to this store's exported key, "
                    "or unset it to use the key saved for the store"
                )
            if self.given:
                return f"the key came from {self.given}: pass the file `sovseal key export` wrote for this store"
            kind, _, where = self.backend.partition(":")
            if kind == "file":
                return f"the key came from the key file {where}: restore the store's own key file from a backup, or {PASS_KEY_CLI}"
            return f"the key came from the OS keychain ({self.backend}): {PASS_KEY_CLI}"
        from sovseal.crypto.keychain import FALLBACK_ENV, key_file_path

        fallback_on = settings.KEY_FALLBACK.get()
        if not fallback_on and key_file_path(self.directory).exists():
            return f"set {FALLBACK_ENV}=file to use the store's key file, or {PASS_KEY_CLI}"
        if self.create:
            return (
                f"set {FALLBACK_ENV}=file to keep the key in a 0600 file inside the store, pass --key-file FILE or "
                "SOVSEAL_KEY with a key from `sovseal key export`, or install and unlock an OS keychain"
            )
        where = "" if fallback_on else f" (and set {FALLBACK_ENV}=file on a machine without an OS keychain)"
        return f"save the store's exported key with `sovseal key import --path {self.directory}`{where}, or {PASS_KEY_CLI}"


_ORIGIN = "sovseal.key_origin"  # where commands leave their _KeyOrigin in click's shared ctx.meta


def _advice(exc: SovsealError, origin: _KeyOrigin | None) -> str | None:
    """What to do next about ``exc`` in CLI words, or None when the CLI has nothing to add: its
    ``cli_advice``, said for the key this command used when it is about passing the key."""
    if isinstance(exc, KeyUnavailableError) and exc.cli_advice and origin is not None:
        return origin.advice()
    return exc.cli_advice or None


def _cli_message(exc: SovsealError, advice: str | None) -> str:
    """``exc``'s message on one line, without its Python advice, followed by ``advice`` (CLI words)."""
    text = _one_line(exc.message)
    if not advice:
        return text
    return f"{text} {advice}" if text.endswith(":") else f"{text.rstrip(' .;')}; {advice}"


#: click's "no arguments: here is the help" (click >= 8.2) is a UsageError too, and must stay the help.
_HELP_INSTEAD = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_failure(exc: click.UsageError) -> NoReturn:
    """Exit 2 with click's usage error as one line and the help to read, instead of click's
    multi-line block (usage, hint, then "Error: ..."), so every error has the documented form."""
    if isinstance(exc, _HELP_INSTEAD):
        raise exc
    message = _one_line(exc.format_message()).rstrip(".")
    if message[:1].isupper() and message[1:2].islower():  # "Missing argument", not "PATH ..."
        message = message[0].lower() + message[1:]
    click.echo(f"error: {message} (see '{_command_words(exc.ctx)} --help')", err=True)
    sys.exit(exc.exit_code)


def _command_words(ctx: click.Context | None) -> str:
    """``sovseal key rotate``: the command as the user types it, whatever name the program ran under
    (``python -m sovseal``, a test runner's)."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["sovseal", *names])


#: What to do about an OS error, by errno (the path it names is given before it).
_OS_ADVICE = {
    errno.EACCES: "check the permissions of that path and of its directory, or pick another path",
    errno.EPERM: "check the permissions of that path and of its directory, or pick another path",
    errno.EROFS: "that file system is read-only: pick a path on a writable one",
    errno.ENOSPC: "the disk is full: free some space, then run the command again",
    errno.EDQUOT: "the disk quota is used up: free some space, then run the command again",
    errno.ENOENT: "check the path: a directory on the way to it does not exist",
    errno.EISDIR: "that is a directory: pass a file",
    errno.ENAMETOOLONG: "pick a shorter path",
    errno.ELOOP: "a symlink on that path loops: fix or remove it",
}


def _os_error_message(exc: OSError) -> str:
    """An OS error as the path it concerns, what went wrong and what to do next, on one line
    (instead of Python's "[Errno 20] Not a directory: '...'", which says neither)."""
    what = (exc.strerror or _one_line(str(exc))).lower()
    if exc.filename is None:
        return f"{what}; check the paths given (--path, FILE) and the disk, then run the command again"
    path = os.fsdecode(exc.filename)
    if exc.errno == errno.ENOTDIR:
        blocking = _first_file_on(Path(path))
        if blocking is not None:
            return f"cannot use {path}: {blocking} is a file, not a directory; pick another path, or move that file away"
    advice = _OS_ADVICE.get(exc.errno or 0, "check that path and the disk, then run the command again")
    return f"cannot use {path}: {what}; {advice}"


def _first_file_on(path: Path) -> Path | None:
    """The first component of ``path`` that exists and is not a directory (what ENOTDIR is about)."""
    for part in reversed(path.parents):
        if part.exists() and not part.is_dir():
            return part
    return None
