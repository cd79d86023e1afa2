"""The identity layer's facts: what the user stored about themselves, as sovseal memories.

The third detection layer (identity facts as custom entities) finds the user's own name, employer,
address, handles, ... even where no pattern or NER model would. They are ordinary memories under
the path prefix ``identity.`` (store them as ``type="semantic"``, the type for facts)::

    mem.store("identity.name", ["Jane Doe", "Jane", "J. Doe"], type="semantic")
    mem.store("identity.employer", "Acme Corp", type="semantic")
    mem.store("identity.profile", {"city": "Lisbon", "github": "janedoe42"}, type="semantic")

Each string in the payload (a string, a list, or an object's values, at any depth; numbers too) is
one fact. Its label is the object key holding it, else the first path segment after the prefix,
upper-cased: ``NAME``, ``EMPLOYER``, ``CITY``, ``GITHUB``; the placeholders read ``<NAME_1>``.
A fact matches as a whole word, in any case, with any whitespace between its words.

Facts are read from the handle's current branch with a filtered recall (``path_prefix``), which
opens only those records (a few milliseconds even in a large store), and cached by HEAD snapshot
id: a snapshot id fixes the whole visible state, so the cache is exact and is re-read only after a
write. At most :data:`MAX_FACT_RECORDS` identity memories are read.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal

IDENTITY_PREFIX = "identity."
#: recall's largest ``k``: identity memories past this many are not read.
MAX_FACT_RECORDS = 1000
#: Shorter facts would match inside ordinary prose too often ("a", "I").
MIN_FACT_LENGTH = 2


def label_for(name: str) -> str:
    """A placeholder label from a path segment or key: upper-case letters, digits and underscores."""
    label = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "IDENTITY"
    return label if label[0].isalpha() else f"ID_{label}"


def facts_from_state(state: dict[str, Any], prefix: str = IDENTITY_PREFIX) -> dict[str, list[str]]:
    """``{label: [fact, ...]}`` from a ``{path: payload}`` mapping (the SDK's ``state()``)."""
    facts: dict[str, list[str]] = {}
    for path, payload in state.items():
        if path.startswith(prefix) and len(path) > len(prefix):
            _collect(payload, label_for(path[len(prefix) :].split(".", 1)[0]), facts)
    return facts


def _collect(value: Any, label: str, into: dict[str, list[str]]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _collect(item, label_for(str(key)), into)
    elif isinstance(value, list):
        for item in value:
            _collect(item, label, into)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        fact = " ".join(str(value).split())
        if len(fact) >= MIN_FACT_LENGTH and fact not in into.setdefault(label, []):
            into[label].append(fact)


class IdentityFacts:
    """Reads a store's identity facts, re-reading only when the branch's HEAD moved."""

    def __init__(self, prefix: str = IDENTITY_PREFIX) -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self._cached: tuple[str | None, dict[str, list[str]]] = (None, {})

    def of(self, mem: Sovseal) -> dict[str, list[str]]:
        head = mem.snapshot()
        if head is None:
            return {}
        with self._lock:
            if self._cached[0] == head:
                return self._cached[1]
        found = mem.recall("identity", k=MAX_FACT_RECORDS, filter={"path_prefix": self.prefix})
        facts = facts_from_state({m.path: m.payload for m in sorted(found, key=lambda m: m.path)}, self.prefix)
        with self._lock:
            self._cached = (head, facts)
        return facts
