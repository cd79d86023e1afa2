"""The options every command shares (where, which branch, which key, --json) and reading secrets
off the command line (``-`` reads a value from stdin, once).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sovseal import settings
from sovseal.cli.output import _note
from sovseal.errors import InvalidInputError
from sovseal.paths import ENV_HOME
from sovseal.sdk.opening import ENV_BRANCH

F = TypeVar("F", bound=Callable[..., Any])


def path_option(f: F) -> F:
    return click.option(
        "--path",
        type=click.Path(file_okay=False),
        envvar=ENV_HOME,
        default=None,
        help="Store directory.  [env: SOVSEAL_HOME; default: ~/.sovseal]",
    )(f)


def key_option(f: F) -> F:
    return click.option(
        "--key-file",
        type=click.Path(dir_okay=False, exists=True, allow_dash=True),
        envvar=settings.KEY_FILE.name,
        default=None,
        help="Read the store's key from this file (as printed by `sovseal key export`) instead of the "
        "OS keychain / key file; `-` reads it from stdin (its first line).  "
        "[env: SOVSEAL_KEY_FILE; or the key itself in SOVSEAL_KEY]",
    )(f)


def branch_option(f: F) -> F:
    return click.option(
        "--branch",
        "-b",
        envvar=ENV_BRANCH,
        default="main",
        show_default=True,
        help="Branch to act on.  [env: SOVSEAL_BRANCH]",
    )(f)


def store_options(f: F) -> F:
    return path_option(branch_option(key_option(f)))


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of the human view.")(f)


STDIN = "-"


_STDIN_KEY = "sovseal.stdin_key"  # the key read for `--key-file -`, kept in ctx.meta: stdin is read once


def _stdin_key() -> str:
    """The key given as ``--key-file -``: stdin's first line, or a hidden prompt on a terminal.

    Cached in the command's context: some commands look their key up twice, and stdin can be read
    only once.
    """
    meta = click.get_current_context().meta
    if _STDIN_KEY not in meta:
        meta[_STDIN_KEY] = click.prompt("key", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()
    return str(meta[_STDIN_KEY])


def _from_stdin(value: str, key_file: str | None, what: str, *, line: bool = False) -> str:
    """``value``, or when it is ``-`` the next value on stdin: one line (``line``, without its line
    ending) or all that is left. A key given as ``--key-file -`` comes first on stdin, so it is
    read before anything else. Either way it must be UTF-8 text (``what`` names it in the error)."""
    if value != STDIN:
        return _utf8_text(value, what)
    if key_file == STDIN:
        _stdin_key()
    try:
        text = sys.stdin.readline().rstrip("\r\n") if line else sys.stdin.read()
    except UnicodeDecodeError as exc:  # a stdin decoded strictly
        raise _not_utf8(what, exc.object[exc.start], exc.start) from None
    return _utf8_text(text, what)


def _utf8_text(text: str, what: str) -> str:
    """``text``, refused when it holds a byte that is not UTF-8: Python hands such bytes from argv
    and stdin over as lone surrogates (U+DC80-U+DCFF), which would be reported as invalid Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(text[exc.start])
        raise _not_utf8(what, char - 0xDC00 if 0xDC80 <= char <= 0xDCFF else None, exc.start) from None
    return text


def _not_utf8(what: str, byte: int | None, offset: int) -> InvalidInputError:
    shown = f"byte 0x{byte:02x}" if byte is not None else "a character that is not"
    return InvalidInputError(
        f"{what} is not UTF-8 text ({shown} at offset {offset}); convert it first, e.g. with `iconv -f latin1 -t utf-8`"
    )


def _warn_inline(name: str, what: str, instead: str) -> None:
    """Warn on stderr when the secret option ``name`` was typed on the command line (not taken from
    the environment), where every local user can read it in the process list."""
    if click.get_current_context().get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
        _note(f"warning: {what} is visible to other local users in the process list; {instead}")


def _key_text(key_file: str | None) -> str | None:
    if key_file is None:
        return None
    if key_file == STDIN:
        return _stdin_key().strip()
    try:
        return Path(key_file).read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidInputError(f"--key-file {key_file} is not text: pass the file `sovseal key export` wrote") from None
