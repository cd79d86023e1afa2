"""The replication wire protocol, shared by the client worker and the server.

Kept in one small module so that both sides agree on paths, headers and the push body byte
for byte. The body is ``{"records": [...]}`` plus ``after``: the id of the item the
sender pushed just before this batch (``""`` when it does not know). The server uses ``after``
to keep its acceptance order equal to the sender's journal order even when the network delivers
batches out of order, because a second device replays that order (branch moves are relative to
the records before them) and only the right order restores a byte-equal lineage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sovseal.storage.wire import WireItem

PUSH_PATH = "/v2/replicate/push"
PULL_PATH = "/v2/replicate/pull"
HEALTH_PATH = "/v2/health"
#: The server-blind project id (sha256(project_id ‖ ":" ‖ key), hex) travels in this header.
PROJECT_HEADER = "X-Sovseal-Project"
API_KEY_PREFIX = "sov_"
#: The largest sequence number (and pull cursor) there can be: the server's BIGINT, which it checks too.
MAX_SEQ = 2**63 - 1


def encode_push(items: Sequence[WireItem], after: str) -> bytes:
    """The exact bytes POSTed for one batch: compact JSON, items in journal order."""
    body = {"records": [item.to_json() for item in items], "after": after}
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")
