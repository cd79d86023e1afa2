"""One pull page, checked before anything in it is believed.

An honest server (``sovseal/server/app.py``) answers ``GET pull?cursor=C&limit=L`` with
``{"records": [...], "cursor", "last", "more", "held"}``: at most L records numbered C+1, C+2, …
without a gap (it numbers accepted items consecutively and never deletes one), none above
``last``, which is at most 2^63-1. A page that breaks any of these is refused here, before the
store sees a single item, so a server cannot move a device's cursor to a number an honest
server refuses (the 2^70 cursor that made every later pull fail), make a pull loop, or skip
items it would rather the device never had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sovseal.storage.wire import WireItem

from ..errors import InvalidInputError, ServerMisbehaviourError
from .protocol import MAX_SEQ


@dataclass(frozen=True, slots=True)
class Page:
    items: list[tuple[int, WireItem]]  # (sequence number, item), numbered after+1, after+2, …
    last: int  # the server's newest sequence number when it answered
    more: bool


def _last(data: dict[str, Any], endpoint: str) -> int:
    value = data.get("last")
    if type(value) is not int or not 0 <= value <= MAX_SEQ:
        raise ServerMisbehaviourError(
            f"{endpoint} answered a pull with last={str(value)[:40]!r}, not a sequence number in 0..2^63-1; "
            "is it a sovseal replication server?",
            code="bad_page",
        )
    return value


def parse_page(body: bytes, after: int, limit: int, endpoint: str) -> Page:
    """The page in ``body``, the answer to a pull of ``limit`` items after ``after``; raises
    :class:`ServerMisbehaviourError` for anything an honest server would not have sent."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting past the parser's limit
        raise ServerMisbehaviourError(f"{endpoint} answered a pull with something that is not JSON", code="not_json") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list) or not isinstance(data.get("more"), bool):
        raise ServerMisbehaviourError(f"{endpoint} answered a pull without 'records' and 'more'", code="bad_page")
    last = _last(data, endpoint)
    records: list[Any] = data["records"]
    if len(records) > limit:
        raise ServerMisbehaviourError(f"{endpoint} answered a pull for {limit} items with {len(records)}", code="bad_page")
    if data["more"] and not records:
        raise ServerMisbehaviourError(f"{endpoint} answered a pull with no records but 'more': it would never end", code="bad_page")
    items: list[tuple[int, WireItem]] = []
    for expected, raw in enumerate(records, start=after + 1):
        seq = raw.get("seq") if isinstance(raw, dict) else None
        if type(seq) is not int or seq != expected or seq > last:  # type(): 2.0 == 2 and True == 1
            raise ServerMisbehaviourError(
                f"{endpoint} answered a pull with sequence number {str(seq)[:40]} where {expected} (at most last={last}) "
                "was due; a sovseal server numbers items consecutively and never past its last",
                code="bad_sequence",
            )
        try:
            items.append((expected, WireItem.from_json(raw)))
        except InvalidInputError as exc:
            raise ServerMisbehaviourError(f"{endpoint} answered a pull with a malformed item: {exc}", code="bad_item") from None
    return Page(items, last, data["more"])
