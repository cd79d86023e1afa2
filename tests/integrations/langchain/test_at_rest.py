"""Nothing a LangChain user stores reaches the disk in the clear: document text, metadata, ids,
collection names, byte-store keys and values, chat messages and session ids, and the key itself."""

from __future__ import annotations

import base64
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage
from langchain_sovseal import SovsealByteStore, SovsealChatMessageHistory, SovsealVectorStore

from sovseal import Sovseal


def _every_file(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_nothing_stored_is_on_disk_in_the_clear(store_dir: Path, key: bytes) -> None:
    secrets = {
        "content": "QuokkaSecretContent unique page text",
        "metadata": "PangolinMetadataValue",
        "metadata_key": "AxolotlMetadataKey",
        "doc_id": "NarwhalDocumentId",
        "collection": "OcelotCollection",
        "kv_key": "TapirByteStoreKey",
        "kv_value": "CapybaraByteStoreValue",
        "session": "WombatSessionId",
        "message": "KakapoChatMessage",
        "reply": "DugongAssistantReply",
    }
    embed = DeterministicFakeEmbedding(size=8)
    with Sovseal(store_dir, key=key, embedder=embed.embed_documents) as mem:
        store = SovsealVectorStore(embed, client=mem, collection=secrets["collection"])
        store.add_documents(
            [
                Document(
                    id=secrets["doc_id"], page_content=secrets["content"], metadata={secrets["metadata_key"]: secrets["metadata"]}
                )
            ]
        )
        store.add_documents([Document(id=secrets["doc_id"], page_content=secrets["content"] + " v2")])  # an upsert
        SovsealByteStore(mem).mset([(secrets["kv_key"], secrets["kv_value"].encode())])
        history = SovsealChatMessageHistory(secrets["session"], client=mem)
        history.add_messages([HumanMessage(secrets["message"]), AIMessage(secrets["reply"])])
        assert store.similarity_search(secrets["content"], k=1)  # the index is built and used
        store.delete([secrets["doc_id"]])
    files = _every_file(store_dir)
    assert files, "the store wrote nothing?"
    needles: dict[str, bytes] = {}
    for name, text in secrets.items():
        raw = text.encode()
        needles[name] = raw
        needles[name + " (utf-16)"] = text.encode("utf-16-le")
        needles[name + " (base64)"] = base64.b64encode(raw)[: len(raw) // 3 * 4 - 4]
    needles["the key"] = key
    needles["the key (hex)"] = key.hex().encode()
    needles["the key (base64)"] = base64.b64encode(key)[:40]
    leaks = [
        (name, str(path.relative_to(store_dir)))
        for path, data in files.items()
        for name, needle in needles.items()
        if needle in data
    ]
    assert leaks == []
    # ...and yet everything is there for the key holder.
    with Sovseal(store_dir, key=key, embedder=embed.embed_documents) as mem:
        assert [m.content for m in SovsealChatMessageHistory(secrets["session"], client=mem).messages] == [
            secrets["message"],
            secrets["reply"],
        ]
        assert SovsealByteStore(mem).mget([secrets["kv_key"]]) == [secrets["kv_value"].encode()]
