"""What ``Sovseal.status()`` says about replication, and the record of a refused item.

``Status`` (sovseal/models.py) predates replication; :class:`ReplicatedStatus` extends it with
one ``replication`` field so every existing field and caller stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..models import Status


@dataclass(frozen=True, slots=True)
class Rejected:
    """An item the server refused with a 4xx: kept in the outbox, not sent again until you retry it."""

    id: str
    kind: str
    status: int
    code: str  # the server's error code: conflict, invalid_item, too_large, ...
    message: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ReplicationStatus:
    endpoint: str | None  # None: replication is off
    project: str | None  # the server-blind project id sent to the server
    state: str  # off | idle | sending | backoff | paused (a 4xx on the whole batch, e.g. 401) | stopped
    last_error: str | None  # the most recent failure, cleared by the next success
    last_error_at: datetime | None
    last_success_at: datetime | None
    replicated: int  # items acknowledged by the server since this handle opened
    rejected: int  # items refused with a 4xx, waiting for you (``replication.rejected()``)
    retry_in: float | None  # seconds until the next attempt while backing off
    pull_waiting: int = 0  # items the last pull left waiting for a parent the server has not sent
    pull_error: str | None = None  # why the last pull failed; None once a pull succeeds
    #: Pulled items set aside in this store, never applied: they did not authenticate (altered by a
    #: server, or forged by a holder of the project's API key), or depend on one that did not.
    set_aside: int = 0


@dataclass(frozen=True, slots=True)
class ReplicatedStatus(Status):
    replication: ReplicationStatus | None = None
