"""The self-hostable replication server (``sovseal serve``): blind storage of sealed items.

It never needs or sees key material: it stores items by their keyed ids, holds early ones until
what they depend on arrives, and serves them back in acceptance order to any device of the same
project. SQLite by default, PostgreSQL when given a ``postgresql://`` URL.
"""

from .app import create_app
from .limits import LimitError, Limits
from .runner import ServerThread, open_storage, reserve_port, serve
from .storage import ConflictError, HeldQuota, PushOutcome, QuotaExceeded, Storage

__all__ = [
    "ConflictError",
    "HeldQuota",
    "LimitError",
    "Limits",
    "PushOutcome",
    "QuotaExceeded",
    "ServerThread",
    "Storage",
    "create_app",
    "open_storage",
    "reserve_port",
    "serve",
]
