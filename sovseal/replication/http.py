"""The client side of the wire: the pushing httpx client, and the rule that turns an answer into a decision.

Pulls run in their own bounded session (:mod:`.fetch`) with the same headers and the same rule.

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

from .config import ReplicationConfig, Target, log_bodies
from .protocol import PROJECT_HEADER, PUSH_PATH

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


def _decode(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):  # RecursionError: nesting past the JSON parser's limit
        return {}
    return data if isinstance(data, dict) else {}


def decide(status: int, reason: str, content: bytes) -> Outcome:
    """Turn one answer (status, reason phrase, body) into ok / retry / rejected."""
    data = _decode(content)
    code = str(data.get("error", ""))
    message = str(data.get("message", "")) or reason
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
        self.config = config
        self.headers = {
            "Authorization": f"Bearer {target.api_key}",
            PROJECT_HEADER: project_blind,
            "User-Agent": "sovseal-replication/1",
        }
        self._client = httpx.Client(
            base_url=target.endpoint, headers=self.headers, timeout=timeout, follow_redirects=False, trust_env=False
        )

    def push(self, body: bytes) -> Outcome:
        """POST one batch body exactly as given."""
        if log_bodies():
            log.info("POST %s%s body (%d bytes): %s", self.target.endpoint, PUSH_PATH, len(body), body.decode("ascii"))
        try:
            response = self._client.post(PUSH_PATH, content=body, headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            return Outcome("retry", None, "network", f"{type(exc).__name__}: {exc}")
        return decide(response.status_code, response.reason_phrase, response.content)

    def close(self) -> None:
        self._client.close()
