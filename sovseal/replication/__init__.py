"""Write-behind replication of sealed items to a blind server, and pull/restore on another device.

:func:`start` is what ``Sovseal.__init__`` calls: it resolves the target from arguments and the
environment and, when there is one, starts a :class:`Replicator` (the worker thread). The store
itself knows nothing of the network: its outbox is the journal's unacknowledged frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sovseal.crypto.primitives import project_blind_id
from sovseal.storage.store import LocalStore

from ..errors import InvalidInputError
from .config import DEFAULT_MAX_OUTBOX_BYTES, ReplicationConfig, Target, resolve_target
from .status import Rejected, ReplicatedStatus, ReplicationStatus

if TYPE_CHECKING:  # the worker and restore pull in httpx: loaded only when replication is on, or a pull runs
    from .restore import PullResult
    from .worker import Replicator

__all__ = [
    "DEFAULT_MAX_OUTBOX_BYTES",
    "PullResult",
    "Rejected",
    "ReplicatedStatus",
    "ReplicationConfig",
    "ReplicationStatus",
    "Replicator",
    "Target",
    "start",
]


def __getattr__(name: str) -> object:
    if name == "Replicator":
        from .worker import Replicator

        return Replicator
    if name == "PullResult":
        from .restore import PullResult

        return PullResult
    raise AttributeError(name)


def start(
    store: LocalStore,
    master: bytes,
    emit: Callable[..., None],
    *,
    has_listener: Callable[[str], bool] | None = None,
    endpoint: str | None,
    api_key: str | None,
    project: str | None,
    max_outbox_bytes: int = DEFAULT_MAX_OUTBOX_BYTES,
    backpressure_timeout: float | None = None,
    config: ReplicationConfig | None = None,
) -> Replicator | None:
    """A running worker for ``store``, or None when no endpoint is configured."""
    if isinstance(max_outbox_bytes, bool) or not isinstance(max_outbox_bytes, int) or max_outbox_bytes < 1:
        raise InvalidInputError(f"max_outbox_bytes must be a positive integer, got {max_outbox_bytes!r}")
    if backpressure_timeout is not None and (not isinstance(backpressure_timeout, (int, float)) or backpressure_timeout < 0):
        raise InvalidInputError(f"backpressure_timeout must be None or seconds >= 0, got {backpressure_timeout!r}")
    target = resolve_target(endpoint, api_key, project)
    if target is None:
        return None
    from .worker import Replicator

    return Replicator(
        store,
        target,
        project_blind_id(target.project, master),
        emit,
        has_listener=has_listener,
        config=config,
        max_outbox_bytes=max_outbox_bytes,
        backpressure_timeout=backpressure_timeout,
    )
