"""Replication settings: where to send, with which key, and how the worker paces itself.

Settings come from constructor arguments first and the environment second
(``SOVSEAL_ENDPOINT``, ``SOVSEAL_API_KEY``, ``SOVSEAL_PROJECT``), so an agent framework that
builds ``Sovseal()`` for you still replicates when the environment says so. An empty
``endpoint=""`` turns replication off even when the environment sets one.

A bearer API key must not cross a network in the clear: plain ``http://`` is accepted only for
loopback hosts (a server on this machine, or a local TLS-terminating proxy), unless
``SOVSEAL_ALLOW_INSECURE_HTTP=1`` says the operator knows better.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import settings
from ..errors import InvalidInputError

ENDPOINT_ENV = settings.ENDPOINT.name
API_KEY_ENV = settings.API_KEY.name
PROJECT_ENV = settings.PROJECT.name
INSECURE_ENV = settings.ALLOW_INSECURE_HTTP.name
LOG_BODIES_ENV = settings.LOG_REPLICATION_BODIES.name
DEFAULT_PROJECT = settings.PROJECT.default
DEFAULT_MAX_OUTBOX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """How the worker batches, retries and drains. The defaults are docs/replication.md's ("The worker")."""

    batch_items: int = 32  # items per push
    linger: float = 0.25  # send a partial batch once its oldest item is this old (seconds)
    max_batch_bytes: int = 4 * 1024 * 1024  # keep a push well below the server's body limit
    backoff_base: float = 0.25  # first retry delay after a 5xx or network error (seconds)
    backoff_max: float = 30.0  # retry delays grow exponentially up to this
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    poll_interval: float = 0.05  # how often an idle worker looks at the outbox
    drain_on_close: float = 5.0  # close() waits this long for a healthy worker to empty the outbox
    pull_page: int = 1000  # items per pull request (the server's limit is 1000)
    # A pull is bounded whatever the server sends (docs/reliability.md, "A hostile server"):
    max_page_bytes: int = 16 * 1024 * 1024  # one pull page's body; a full page of 1000 small items is ~1 MiB
    pull_deadline: float = 60.0  # one pull request, connect to last byte (request_timeout is per read)
    max_held_items: int = 10_000  # pulled items waiting for a parent, kept in memory during a pull
    max_held_bytes: int = 64 * 1024 * 1024  # ... and their size (sealed bytes + ~1 KiB each)
    pull_stall_timeout: float = 120.0  # a pull stops when its cursor has not moved for this long

    def __post_init__(self) -> None:
        if not 1 <= self.batch_items <= 1024:
            raise InvalidInputError(f"batch_items must be 1..1024, got {self.batch_items}")
        for name in ("linger", "backoff_base", "backoff_max", "connect_timeout", "request_timeout", "poll_interval", "drain_on_close"):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0")
        for name in ("pull_page", "max_page_bytes", "max_held_items", "max_held_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        for name in ("pull_deadline", "pull_stall_timeout"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be > 0 seconds")
        if self.backoff_base <= 0 or self.backoff_max < self.backoff_base:
            raise InvalidInputError("backoff_base must be > 0 and backoff_max >= backoff_base")


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved replication target."""

    endpoint: str  # base URL, no trailing slash
    api_key: str
    project: str  # the project name as the user knows it (never sent)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(endpoint: str) -> str:
    """Validate a base URL; returns it without a trailing slash."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"endpoint must be an http(s) URL like https://sync.example.com, got {endpoint!r}")
    if parts.scheme == "http" and not _loopback(parts.hostname) and not settings.ALLOW_INSECURE_HTTP.get():
        raise InvalidInputError(
            f"endpoint {endpoint!r} is plain http to a non-loopback host: the API key would travel in the clear. "
            f"Use https, or set {INSECURE_ENV}=1 if a trusted network or proxy protects it."
        )
    return endpoint.rstrip("/")


def resolve_target(endpoint: str | None, api_key: str | None, project: str | None) -> Target | None:
    """Arguments first, then the environment; None when replication is off."""
    endpoint = (settings.ENDPOINT.get() or "") if endpoint is None else endpoint
    if not endpoint:
        return None
    api_key = api_key if api_key is not None else settings.API_KEY.get() or ""
    if not api_key:
        raise InvalidInputError(
            f"replication to {endpoint} needs an API key:",
            advice=f"pass api_key=... or set {API_KEY_ENV} (create one on the server with `sovseal serve --create-key`)",
            cli_advice=f"set {API_KEY_ENV} (create one on the server with `sovseal serve --create-key`)",
        )
    project = project if project is not None else settings.PROJECT.get()
    if not isinstance(project, str) or not project:
        raise InvalidInputError("project must be a non-empty string")
    return Target(check_endpoint(endpoint), api_key, project)


def log_bodies() -> bool:
    return settings.LOG_REPLICATION_BODIES.get()
