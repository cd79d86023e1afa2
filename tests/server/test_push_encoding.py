"""A push body must be UTF-8 JSON without a byte order mark (docs/replication.md: 400 otherwise).

``json.loads`` on bytes sniffs UTF-16/32 and skips a UTF-8 BOM; the server decodes strictly first.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from sovseal.replication.protocol import PROJECT_HEADER, PUSH_PATH
from sovseal.server import ServerThread
from sovseal.server.validate import decode_push

EMPTY = json.dumps({"records": [], "after": ""})
BODIES = {
    "utf-16": EMPTY.encode("utf-16"),
    "utf-16-le without BOM": EMPTY.encode("utf-16-le"),
    "utf-32": EMPTY.encode("utf-32"),
    "utf-8 with BOM": b"\xef\xbb\xbf" + EMPTY.encode(),
    "latin-1": json.dumps({"records": [], "after": "é"}, ensure_ascii=False).encode("latin-1"),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_decode_push_refuses_what_is_not_utf8(name: str) -> None:
    with pytest.raises(ValueError, match=r"not (UTF-8 )?JSON"):
        decode_push(BODIES[name], 10)


def test_decode_push_takes_plain_utf8() -> None:
    assert decode_push(EMPTY.encode(), 10) == ([], "")


def test_the_server_answers_400_for_utf16_and_bom_bodies(tmp_path: Path) -> None:
    with ServerThread(str(tmp_path / "server.sqlite3")) as srv:
        headers = {PROJECT_HEADER: "ab" * 32, "Authorization": f"Bearer {srv.storage.create_api_key()}"}
        with httpx.Client(base_url=srv.url, headers=headers, timeout=10) as c:
            for name in ("utf-16", "utf-8 with BOM"):
                r = c.post(PUSH_PATH, content=BODIES[name])
                assert r.status_code == 400 and r.json()["error"] == "malformed", (name, r.text)
            assert c.post(PUSH_PATH, content=EMPTY.encode()).status_code == 200
