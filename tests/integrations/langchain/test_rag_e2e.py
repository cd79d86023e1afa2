"""End to end: a small RAG chain (retriever | prompt | chat model) over documents ingested through
add_documents with sovseal's real on-device embedder. The chat model is a fake that answers with the
first context line it was given, so the test checks what retrieval put in front of the model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_sovseal import SovsealEmbeddings, SovsealRetriever, SovsealVectorStore

DOCS = [
    Document(
        id="tea", page_content="Green tea should be brewed with water at about 80 degrees Celsius.", metadata={"topic": "kitchen"}
    ),
    Document(
        id="bike", page_content="Bicycle tyres for road riding are usually pumped to 6 to 8 bar.", metadata={"topic": "sport"}
    ),
    Document(id="fern", page_content="Boston ferns like humid air and indirect light.", metadata={"topic": "garden"}),
    Document(
        id="rust", page_content="The Rust compiler is called rustc and its package manager is cargo.", metadata={"topic": "code"}
    ),
    Document(
        id="tide", page_content="Tides are caused mainly by the gravitational pull of the Moon.", metadata={"topic": "science"}
    ),
    Document(
        id="bread",
        page_content="Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
        metadata={"topic": "kitchen"},
    ),
]

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context only.\n\nContext:\n{context}"), ("human", "{question}")]
)


class FirstContextLineModel(BaseChatModel):
    """A fake chat model: replies with the first line of the context in its system message."""

    @property
    def _llm_type(self) -> str:
        return "first-context-line"

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        system = str(messages[0].content)
        first = system.split("Context:\n", 1)[1].splitlines()[0]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=first))])


def _format(docs: list[Document]) -> str:
    return "\n".join(d.page_content for d in docs)


@pytest.fixture
def store(tmp_path: Path, real_embeddings: SovsealEmbeddings) -> SovsealVectorStore:
    s = SovsealVectorStore(real_embeddings, path=tmp_path / "store", key=os.urandom(32))
    assert s.add_documents(DOCS) == [d.id for d in DOCS]
    yield s  # type: ignore[misc]
    s.close()


QUESTIONS = [
    ("How hot should the water be for green tea?", "tea"),
    ("What pressure do I put in my road bike tyres?", "bike"),
    ("What causes the ocean tides?", "tide"),
    ("Which tool manages Rust packages?", "rust"),
    ("How does sourdough rise?", "bread"),
]


@pytest.mark.parametrize("kind", ["vector search", "sovseal recall"])
def test_rag_chain_answers_from_the_right_document(store: SovsealVectorStore, kind: str) -> None:
    retriever = (
        store.as_retriever(search_kwargs={"k": 2}) if kind == "vector search" else SovsealRetriever(vectorstore=store, k=2)
    )
    chain = (
        {"context": retriever | _format, "question": RunnablePassthrough()} | PROMPT | FirstContextLineModel() | StrOutputParser()
    )
    by_id = {d.id: d.page_content for d in DOCS}
    for question, expected in QUESTIONS:
        assert chain.invoke(question) == by_id[expected], question


@pytest.mark.asyncio
async def test_rag_chain_async_with_a_filter(store: SovsealVectorStore) -> None:
    retriever = SovsealRetriever(vectorstore=store, k=1, filter={"topic": "kitchen"})
    chain = (
        {"context": retriever | _format, "question": RunnablePassthrough()} | PROMPT | FirstContextLineModel() | StrOutputParser()
    )
    assert await chain.ainvoke("How does sourdough rise?") == DOCS[5].page_content
    assert await chain.ainvoke("What causes the ocean tides?") in (DOCS[0].page_content, DOCS[5].page_content)


def test_default_embeddings_are_sovseals_own(tmp_path: Path) -> None:
    """No embedding given: the store embeds with sovseal's on-device model, documents and queries alike."""
    with SovsealVectorStore(path=tmp_path / "store", key=os.urandom(32)) as s:
        assert isinstance(s.embeddings, SovsealEmbeddings)
        s.add_documents(DOCS[:3])
        [(doc, score)] = s.similarity_search_with_score("brewing green tea", k=1)
        assert doc.id == "tea" and 0.3 < score <= 1.0
        assert len(s.embeddings.embed_query("x")) == 384
