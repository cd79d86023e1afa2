"""LangChain's own conformance suites (langchain-tests), unmodified: vector store (sync and async),
retriever, embeddings, and the byte store (sync and async)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_sovseal import SovsealByteStore, SovsealEmbeddings, SovsealRetriever, SovsealVectorStore
from langchain_tests.integration_tests import (
    BaseStoreAsyncTests,
    BaseStoreSyncTests,
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)

from sovseal import Sovseal

#: The suites' async tests are bare ``async def``: run them with pytest-asyncio without needing
#: ``asyncio_mode = "auto"`` in the root config. The mark makes pytest-asyncio warn about the suites'
#: sync tests; that warning says nothing about them and is silenced here.
ASYNC = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .* is not an async function:pytest.PytestWarning"),
]


class TestSovsealVectorStoreStandard(VectorStoreIntegrationTests):
    pytestmark = ASYNC

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[SovsealVectorStore]:  # type: ignore[override]
        store = SovsealVectorStore(self.get_embeddings(), path=tmp_path / "store", key=os.urandom(32))
        try:
            yield store
        finally:
            store.close()


class _SeededStore:
    """The retriever suite has no data fixture: its constructor params must point at a store that
    already holds documents. One store, seeded on first use, removed when the module is done."""

    def __init__(self) -> None:
        self.store: SovsealVectorStore | None = None
        self.directory: str | None = None

    def get(self) -> SovsealVectorStore:
        if self.store is None:
            self.directory = tempfile.mkdtemp(prefix="sovseal-retriever-")
            self.store = SovsealVectorStore(
                DeterministicFakeEmbedding(size=6), path=Path(self.directory) / "store", key=os.urandom(32)
            )
            self.store.add_documents(
                [
                    Document(page_content="sovseal seals every memory with AES-256-GCM", metadata={"topic": "crypto"}),
                    Document(page_content="the lineage is an append-only DAG of snapshots", metadata={"topic": "lineage"}),
                    Document(page_content="a fork creates a branch; a rollback moves HEAD", metadata={"topic": "lineage"}),
                    Document(page_content="replication sends ciphertext only", metadata={"topic": "replication"}),
                    Document(page_content="recall fuses dense and keyword candidates", metadata={"topic": "recall"}),
                ]
            )
        return self.store

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


_SEEDED = _SeededStore()


@pytest.fixture(scope="module", autouse=True)
def _close_seeded() -> Iterator[None]:
    yield
    _SEEDED.close()


class TestSovsealRetrieverStandard(RetrieversIntegrationTests):
    pytestmark = ASYNC

    @property
    def retriever_constructor(self) -> type[SovsealRetriever]:
        return SovsealRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": _SEEDED.get()}

    @property
    def retriever_query_example(self) -> str:
        return "how are memories encrypted?"


class TestSovsealEmbeddingsStandard(EmbeddingsIntegrationTests):
    pytestmark = ASYNC

    @property
    def embeddings_class(self) -> type[SovsealEmbeddings]:
        return SovsealEmbeddings


def _fake_client(directory: Path) -> Sovseal:
    return Sovseal(directory, key=os.urandom(32), embedder=DeterministicFakeEmbedding(size=6).embed_documents)


class TestSovsealByteStoreSync(BaseStoreSyncTests[bytes]):
    pytestmark = ASYNC

    @pytest.fixture
    def kv_store(self, tmp_path: Path) -> Iterator[SovsealByteStore]:  # type: ignore[override]
        with _fake_client(tmp_path / "store") as client:
            yield SovsealByteStore(client)

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return b"foo", b"\x00\xffbar", b"buzz" * 1000


class TestSovsealByteStoreAsync(BaseStoreAsyncTests[bytes]):
    pytestmark = ASYNC

    @pytest_asyncio.fixture
    async def kv_store(self, tmp_path: Path) -> AsyncIterator[SovsealByteStore]:  # type: ignore[override]
        with _fake_client(tmp_path / "store") as client:
            yield SovsealByteStore(client)

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return b"foo", b"\x00\xffbar", b"buzz" * 1000
