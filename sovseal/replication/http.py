"""The client side of the wire: one httpx client, and the rule that turns a response into a decision.

The decision table is the whole retry policy (DESIGN.md §6, seed 001):

- 2xx: the server has the batch durably: acknowledge it locally.
- 408, 425, 429 and 5xx, and any network error (refused, reset, timeout): *ambiguous or
  transient*. The batch may or may not have landed, so it is resent unchanged later; the
  server deduplicates byte-identical items, so resending is always safe (an ambiguous outcome
  is never taken for a success, the MongoDB lesson in research/reliability.md §2).
- any other 4xx: this request will never succeed as is. It is surfaced, never retried blindly.

Headers carry the bearer key and the server-blind project id; nothing else about the user.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ..errors import ReplicationError
from .config import ReplicationConfig, Target, log_bodies
from .protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH

log = logging.getLogger("sovseal.replication")
_TRANSIENT_4XX = frozenset({408, 425, 429})


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Literal["ok", "retry", "rejected"]
    status: int | None
    code: str = ""
    message: str = ""
    ids: list[str] = field(default_factory=list)  # items the server named (item-level rejections)
    body: dict[str, Any] = field(default_factory=dict)


def _decode(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except (ValueError, RecursionError):  # RecursionError: nesting past the JSON parser's limit
        return {}
    return data if isinstance(data, dict) else {}


def classify(response: httpx.Response) -> Outcome:
    """Turn one response into ok / retry / rejected."""
    status = response.status_code
    data = _decode(response)
    code = str(data.get("error", ""))
    message = str(data.get("message", "")) or response.reason_phrase
    ids = [str(i) for i in data.get("ids", []) if isinstance(i, str)] if isinstance(data.get("ids"), list) else []
    if 200 <= status < 300:
        return Outcome("ok", status, body=data)
    if status >= 500 or status in _TRANSIENT_4XX:
        return Outcome("retry", status, code, message)
    return Outcome("rejected", status, code or f"http_{status}", message, ids)


class Transport:
    """HTTP to one replication server for one project."""

    def __init__(self, target: Target, project_blind: str, config: ReplicationConfig) -> None:
        self.target = target
        self.project_blind = project_blind
        timeout = httpx.Timeout(config.request_timeout, connect=config.connect_timeout)
        headers = {
            "Authorization": f"Bearer {target.api_key}",
            PROJECT_HEADER: project_blind,
            "User-Agent": "sovseal-replication/1",
        }
        self._client = httpx.Client(base_url=target.endpoint, headers=headers, timeout=timeout, follow_redirects=False, trust_env=False)

    def push(self, body: bytes) -> Outcome:
        """POST one batch body exactly as given."""
        if log_bodies():
            log.info("POST %s%s body (%d bytes): %s", self.target.endpoint, PUSH_PATH, len(body), body.decode("ascii"))
        try:
            response = self._client.post(PUSH_PATH, content=body, headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            return Outcome("retry", None, "network", f"{type(exc).__name__}: {exc}")
        return classify(response)

    def pull(self, cursor: int, limit: int) -> dict[str, Any]:
        """One page of accepted items after ``cursor``; raises ReplicationError on any failure."""
        if log_bodies():
            log.info("GET %s%s?cursor=%d&limit=%d (no body)", self.target.endpoint, PULL_PATH, cursor, limit)
        try:
            response = self._client.get(PULL_PATH, params={"cursor": cursor, "limit": limit})
        except httpx.HTTPError as exc:
            raise ReplicationError(
                f"could not reach {self.target.endpoint} to pull ({type(exc).__name__}: {exc}); check the endpoint and retry",
                code="network",
                retryable=True,
            ) from None
        outcome = classify(response)
        if outcome.verdict != "ok":
            raise ReplicationError(
                f"pull from {self.target.endpoint} failed with HTTP {outcome.status} ({outcome.code}): {outcome.message}",
                status=outcome.status,
                code=outcome.code,
                retryable=outcome.verdict == "retry",
            )
        try:
            data = json.loads(response.content)
        except (ValueError, RecursionError):
            raise ReplicationError(
                f"{self.target.endpoint} answered a pull with something that is not JSON", status=response.status_code
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("records"), list):
            raise ReplicationError(f"{self.target.endpoint} answered a pull without 'records'", status=response.status_code)
        previous = cursor
        for raw in data["records"]:  # every page must move forward, or a pull could loop forever
            seq = raw.get("seq") if isinstance(raw, dict) else None
            if not isinstance(seq, int) or isinstance(seq, bool) or seq <= previous:
                raise ReplicationError(
                    f"{self.target.endpoint} answered a pull with a record without a sequence number above {previous}; "
                    "is it a sovseal replication server?",
                    status=response.status_code,
                )
            previous = seq
        return data

    def close(self) -> None:
        self._client.close()
