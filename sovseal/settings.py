"""Every ``SOVSEAL_*`` environment variable, in one registry: its type, default, validation and meaning.

A module that needs one asks its :class:`Setting` here (``settings.SYNC_INTERVAL.get()``) instead of
reading ``os.environ`` itself, so each variable is parsed one way, has one default, fails with one
kind of error (:class:`~sovseal.errors.InvalidInputError` naming the variable, the value and what
is accepted) and is listed once in docs/operations.md ("Environment variables", checked against
:data:`REGISTRY` by tests/core/test_settings.py).

Values are read from the environment each time they are asked for, never cached: a long-lived
process, or a test, can change one between two calls and be heard. An unset variable and one set to
nothing but whitespace both mean "use the default".

Why a registry of our own rather than ``pydantic-settings`` (which is installed): a settings model
reads and validates all of its fields when it is built, so one malformed variable (say a server
port) would break every caller, even ``Sovseal()`` which never reads it; here a variable is parsed
only by the code that uses it. Its errors are pydantic's ``ValidationError``, which every caller
would have to translate into :class:`~sovseal.errors.InvalidInputError`, and a secret must never
be echoed in one. And importing it takes longer than the whole command line's start-up, which
reads ``SOVSEAL_HOME`` before any command runs (tests/cli/test_startup.py keeps that start-up lean).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from .errors import InvalidInputError

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """One environment variable: how it is parsed, what it means, and what it is when unset."""

    name: str
    #: The type as docs/operations.md shows it: text, path, URL, flag, integer, seconds, ...
    kind: str
    default: T
    #: One line: what the variable does (the docs table's "Meaning").
    doc: str
    #: Text to value; raises ValueError (or InvalidInputError with its own advice) for a bad value.
    parse: Callable[[str], T]
    #: What a valid value looks like, for error messages: "a number of seconds > 0".
    accepted: str
    #: Never echoed in an error message (keys, API keys, database URLs with passwords).
    secret: bool = False

    def raw(self) -> str | None:
        """The text in the environment now, or None when unset or blank."""
        text = os.environ.get(self.name)
        return text if text is not None and text.strip() else None

    def is_set(self) -> bool:
        return self.raw() is not None

    def given(self) -> T | None:
        """The parsed value when the variable is set, else None (the caller's own default applies)."""
        return self.read(self.parse)

    def get(self) -> T:
        """The parsed value when the variable is set, else :attr:`default`."""
        value = self.given()
        return self.default if value is None else value

    def read(self, parse: Callable[[str], U]) -> U | None:
        """The value parsed by ``parse``, for a format owned by a layer above this module (the
        exported key format lives with the key custody); None when unset; errors as :meth:`get`'s."""
        text = self.raw()
        if text is None:
            return None
        try:
            return parse(text)
        except InvalidInputError as exc:  # a parser's own advice, which never echoes a secret
            raise InvalidInputError(f"{self.name}: {exc}") from None
        except ValueError:
            shown = "its value (not shown: it is secret)" if self.secret else repr(text)
            raise InvalidInputError(f"{self.name}: {shown} is not {self.accepted}; set it to {self.accepted}, or unset it") from None


# --- parsers ------------------------------------------------------------------------------------


def _text(text: str) -> str:
    return text


_TRUE = ("1", "true", "yes", "on")


def _flag(text: str) -> bool:
    """On for 1 (or true, yes, on); any other value is off, as it always was: these flags only
    ever loosen a safety default, so a value that is not understood must leave it in place."""
    return text.strip().lower() in _TRUE


def _file_opt_in(text: str) -> bool:
    """On only for the explicit opt-in ``file``; any other value leaves the key in the keychain."""
    return text.strip().lower() == "file"


def _integer(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value

    return parse


def _seconds(text: str) -> float:
    value = float(text.strip())
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


def http_url(text: str) -> str:
    """``text`` when it is an http(s) URL with a host (raises ValueError otherwise)."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(text)
    return text


def _postgres_url(text: str) -> str:
    if not text.startswith(("postgresql://", "postgres://")):
        raise ValueError(text)
    return text


def _factory(text: str) -> str:
    module, colon, factory = text.strip().partition(":")
    if not (colon and module and factory):
        raise ValueError(text)
    return text.strip()


# --- the registry ------------------------------------------------------------------------------

HOME: Setting[str] = Setting(
    "SOVSEAL_HOME", "path", "~/.sovseal",
    "The store directory when no path is given; the embedding model cache is its `models/` folder.",
    _text, "a directory path",
)
BRANCH: Setting[str] = Setting(
    "SOVSEAL_BRANCH", "text", "main",
    "The branch the command line and the MCP server act on when none is given.",
    _text, "a branch name",
)
KEY: Setting[str | None] = Setting(
    "SOVSEAL_KEY", "secret", None,
    "The store's master key as `sovseal key export` prints it (for `Sovseal()`, the command line and the MCP server): "
    "used instead of the keychain, saved nowhere.",
    _text, "an exported key (sovseal-key-v1:<key>:<checksum>)", secret=True,
)
KEY_FILE: Setting[str | None] = Setting(
    "SOVSEAL_KEY_FILE", "path", None,
    "A file holding the store's exported key (the command line's `--key-file`; `-` reads standard input).",
    _text, "a file path, or - for standard input",
)
KEY_FALLBACK: Setting[bool] = Setting(
    "SOVSEAL_KEY_FALLBACK", "opt-in", False,
    "`file`: keep the key in a 0600 file inside the store when no OS keychain is usable (servers, CI); any other value: off.",
    _file_opt_in, "file",
)
ENDPOINT: Setting[str | None] = Setting(
    "SOVSEAL_ENDPOINT", "URL", None,
    "The replication server's base URL; replication is on when it is set (`endpoint=` wins).",
    http_url, "an http(s) URL like https://sync.example.com",
)
API_KEY: Setting[str | None] = Setting(
    "SOVSEAL_API_KEY", "secret", None,
    "The API key replication sends to the server (`sovseal serve --create-key` makes one).",
    _text, "an API key (sov_...)", secret=True,
)
PROJECT: Setting[str] = Setting(
    "SOVSEAL_PROJECT", "text", "default",
    "The server project this store replicates to.",
    _text, "a project name",
)
ALLOW_INSECURE_HTTP: Setting[bool] = Setting(
    "SOVSEAL_ALLOW_INSECURE_HTTP", "flag", False,
    "`1`: accept a plain http:// endpoint on a non-loopback host (the API key then travels in the clear); any other value: off.",
    _flag, "1 (or true, yes, on) to turn it on",
)
LOG_REPLICATION_BODIES: Setting[bool] = Setting(
    "SOVSEAL_LOG_REPLICATION_BODIES", "flag", False,
    "`1`: log every replication request body, exactly as sent (ciphertext and keyed ids), at INFO; any other value: off.",
    _flag, "1 (or true, yes, on) to turn it on",
)
SYNC_INTERVAL: Setting[float | None] = Setting(
    "SOVSEAL_SYNC_INTERVAL", "seconds", None,
    "With replication on, pull in the background this often (`sync_interval=` wins); unset: no background pull.",
    _seconds, "a number of seconds > 0",
)
MODEL_DIR: Setting[str | None] = Setting(
    "SOVSEAL_MODEL_DIR", "path", None,
    "A directory holding the embedding model (model.onnx and tokenizer.json), used as is instead of the cache.",
    _text, "a directory path",
)
NER_MODEL: Setting[str | None] = Setting(
    "SOVSEAL_NER_MODEL", "text", None,
    "The anonymizer's spaCy pipeline: an installed package or a saved directory; `none`: no NER; unset: the best one installed.",
    _text, "a spaCy package name, a pipeline directory, or none",
)
CONSOLIDATE_MODEL: Setting[str | None] = Setting(
    "SOVSEAL_CONSOLIDATE_MODEL", "MODULE:FACTORY", None,
    "The language model `sovseal consolidate` uses (its `--model`); unset: only the passes that need none run.",
    _factory, "MODULE:FACTORY, e.g. mypkg.models:make",
)
SERVER_HOST: Setting[str] = Setting(
    "SOVSEAL_SERVER_HOST", "text", "127.0.0.1",
    "The address `sovseal serve` listens on (its `--host`).",
    _text, "a host name or IP address",
)
SERVER_PORT: Setting[int] = Setting(
    "SOVSEAL_SERVER_PORT", "integer", 8765,
    "The port `sovseal serve` listens on (its `--port`); `0`: any free port.",
    _integer(0, 65535), "a TCP port, 0 to 65535",
)
SERVER_DATABASE: Setting[str] = Setting(
    "SOVSEAL_SERVER_DATABASE", "path or URL", "~/.sovseal-server/replication.sqlite3",
    "The server's database (its `--database`): a SQLite file or a postgresql:// URL (with the role URLs below, the owner's).",
    _text, "a SQLite file path or a postgresql:// URL", secret=True,
)
SERVER_WRITER_URL: Setting[str | None] = Setting(
    "SOVSEAL_SERVER_WRITER_URL", "URL", None,
    "PostgreSQL least privilege: the role pushes and key changes connect as (set both role URLs, or neither).",
    _postgres_url, "a postgresql:// URL", secret=True,
)
SERVER_READER_URL: Setting[str | None] = Setting(
    "SOVSEAL_SERVER_READER_URL", "URL", None,
    "PostgreSQL least privilege: the role pulls and API key look-ups connect as.",
    _postgres_url, "a postgresql:// URL", secret=True,
)
SERVER_MAX_HELD_ITEMS: Setting[int] = Setting(
    "SOVSEAL_SERVER_MAX_HELD_ITEMS", "integer", 10_000,
    "Items one project may park on the server while they wait for what they depend on.",
    _integer(0), "an integer >= 0",
)
SERVER_MAX_HELD_BYTES: Setting[int] = Setting(
    "SOVSEAL_SERVER_MAX_HELD_BYTES", "integer", 64 * 1024 * 1024,
    "Bytes one project may park on the server while they wait for what they depend on.",
    _integer(0), "an integer >= 0",
)
SERVER_HEADER_TIMEOUT: Setting[float] = Setting(
    "SOVSEAL_SERVER_HEADER_TIMEOUT", "seconds", 10.0,
    "Seconds a connection gets to send a request's line and headers before it is closed.",
    _seconds, "a number of seconds > 0",
)
SERVER_BODY_TIMEOUT: Setting[float] = Setting(
    "SOVSEAL_SERVER_BODY_TIMEOUT", "seconds", 30.0,
    "Seconds a push gets to send its whole body before the server answers 408.",
    _seconds, "a number of seconds > 0",
)
SERVER_MAX_CONNECTIONS: Setting[int] = Setting(
    "SOVSEAL_SERVER_MAX_CONNECTIONS", "integer", 1000,
    "Open connections the server accepts (lowered at start-up to fit the open-file limit).",
    _integer(1), "an integer >= 1",
)

#: Every variable, in the order docs/operations.md lists them.
REGISTRY: tuple[Setting[Any], ...] = (
    HOME, BRANCH, KEY, KEY_FILE, KEY_FALLBACK, ENDPOINT, API_KEY, PROJECT, ALLOW_INSECURE_HTTP,
    LOG_REPLICATION_BODIES, SYNC_INTERVAL, MODEL_DIR, NER_MODEL, CONSOLIDATE_MODEL, SERVER_HOST,
    SERVER_PORT, SERVER_DATABASE, SERVER_WRITER_URL, SERVER_READER_URL, SERVER_MAX_HELD_ITEMS,
    SERVER_MAX_HELD_BYTES, SERVER_HEADER_TIMEOUT, SERVER_BODY_TIMEOUT, SERVER_MAX_CONNECTIONS,
)


def by_name(name: str) -> Setting[Any]:
    """The setting called ``name`` (``SOVSEAL_...``); KeyError for a name sovseal does not read."""
    for setting in REGISTRY:
        if setting.name == name:
            return setting
    raise KeyError(name)


def shown_default(setting: Setting[Any]) -> str:
    """A default as the docs table shows it: ``unset`` for None, ``off`` for a flag, whole numbers bare."""
    value = setting.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def docs_table() -> str:
    """The "Environment variables" table of docs/operations.md, generated from :data:`REGISTRY`
    (tests/core/test_settings.py checks that the page holds exactly this)."""
    rows = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.kind} | {shown_default(s)} | {s.doc} |" for s in REGISTRY]
    return "\n".join(rows) + "\n"
