"""The self-hostable replication server (``sovseal serve``): blind storage of sealed items.

It never needs or sees key material: it stores items by their keyed ids, holds early ones until
what they depend on arrives, and serves them back in acceptance order to any device of the same
project. SQLite by default, PostgreSQL when given a ``postgresql://`` URL.

It ships as the ``server`` extra (``pip install 'sovseal[server]'``): without it, importing this
package raises :class:`~sovseal.errors.MissingExtraError` naming that command.
"""

from sovseal.extras import require

require("server")

from .app import create_app  # noqa: E402 - only once the extra is known to be installed
from .limits import LimitError, Limits  # noqa: E402
from .runner import ServerThread, open_storage, reserve_port, serve  # noqa: E402
from .storage import ConflictError, HeldQuota, PushOutcome, QuotaExceeded, Storage  # noqa: E402

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
