"""The on-device embedder: tokenize, run the ONNX encoder, mean-pool, L2-normalise.

It reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline: WordPiece with truncation at 256
tokens ([CLS] and [SEP] included), mean pooling of the last hidden state over the attention mask,
L2 normalisation (eps 1e-12). Bulk calls tokenize everything first, sort by token count and run
batches of similar length, because padding every text to the longest one in a batch wastes most of
the compute on short memories; results are returned in the caller's order.

Threads: onnxruntime gets ``threads`` intra-op threads (2 by default: all of a 2-core machine, for the
shortest latency), one inter-op thread and sequential execution, and its workers stop spinning at the
end of each run so an idle embedder does not burn the caller's cores. Runs are serialized by a lock:
two concurrent runs on two cores would only slow each other down.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sovseal.embed.resolve import resolve_model
from sovseal.errors import InvalidInputError, ModelUnavailableError

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

DIM = 384
MAX_TOKENS = 256
BATCH_SIZE = 16
QUERY_CACHE_SIZE = 256
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Embedder:
    """all-MiniLM-L6-v2 on onnxruntime, offline by default. Any callable ``embed(texts) -> vectors`` works
    for the engine; this one is also what ``embed_query``/``embed_documents`` callers expect."""

    dim: int = DIM

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        allow_download: bool = False,
        threads: int | None = None,
    ) -> None:
        if threads is not None and threads < 1:
            raise InvalidInputError(f"threads must be >= 1, got {threads}")
        self._model_dir = model_dir
        self._allow_download = allow_download
        self._threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._feeds: tuple[str, ...] = ()
        self._id_dtype: type[np.integer] = np.int64
        self.origin: str | None = None  # where the model was loaded from, once ready
        self.model_sha256: str | None = None  # identifies the vectors: a different digest means re-embed

    def ready(self) -> None:
        """Resolve, verify and load the model, then run it once so the first real call is not slow."""
        if self._session is not None:
            return
        with self._load_lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            files = resolve_model(self._model_dir, allow_download=self._allow_download)
            tokenizer = Tokenizer.from_str(files.tokenizer.decode("utf-8"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.add_session_config_entry("session.force_spinning_stop", "1")
            options.log_severity_level = 3
            session = ort.InferenceSession(files.model, options, providers=["CPUExecutionProvider"])
            inputs = {i.name: i.type for i in session.get_inputs()}
            unknown = set(inputs) - {"input_ids", "attention_mask", "token_type_ids"}
            if unknown or "input_ids" not in inputs or "attention_mask" not in inputs:
                raise ModelUnavailableError(f"{files.origin}: model.onnx takes inputs {sorted(inputs)}, not a BERT encoder's")
            self._feeds = tuple(inputs)
            self._id_dtype = np.int32 if inputs.get("input_ids") == "tensor(int32)" else np.int64
            self._tokenizer = tokenizer
            self._run(session, [tokenizer.encode("").ids])
            self.origin, self.model_sha256 = files.origin, files.model_sha256
            self._session = session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: an (n, 384) float32 array of unit vectors, in the order given."""
        texts = _check_texts(texts)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        self.ready()
        assert self._session is not None and self._tokenizer is not None
        ids = [e.ids for e in _encode(self._tokenizer, texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._run(self._session, [ids[i] for i in batch])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: a (384,) float32 unit vector. The last 256 distinct queries are cached."""
        if not isinstance(text, str):
            raise InvalidInputError(f"embed_query takes a str, got {type(text).__name__}")
        with self._cache_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached.copy()
        vector = self.embed_documents([text])[0]
        with self._cache_lock:
            self._query_cache[text] = vector
            if len(self._query_cache) > QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        return vector.copy()

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_documents` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> np.ndarray:
        """:meth:`embed_query` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.embed_query, text)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def _run(self, session: onnxruntime.InferenceSession, ids: list[list[int]]) -> np.ndarray:
        """Pad one batch on the right, run the encoder, mean-pool over the mask and normalise."""
        input_ids = np.zeros((len(ids), max(map(len, ids))), dtype=self._id_dtype)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
        mask = (np.arange(input_ids.shape[1]) < np.array([len(s) for s in ids])[:, None]).astype(self._id_dtype)
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        with self._run_lock:
            hidden = session.run(["last_hidden_state"], {name: feed[name] for name in self._feeds})[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InvalidInputError("embed_documents takes a sequence of str; for a single text use embed_query")
    try:
        items = list(texts)
    except TypeError:
        raise InvalidInputError(f"embed_documents takes a sequence of str, got {type(texts).__name__}") from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"text {i} is a {type(text).__name__}, not a str")
    return items


def _encode(tokenizer: tokenizers.Tokenizer, texts: list[str]) -> list[tokenizers.Encoding]:
    """Tokenize; lone surrogates (valid in a Python str, not in UTF-8) become U+FFFD instead of failing."""
    try:
        return tokenizer.encode_batch(texts)
    except TypeError:
        return tokenizer.encode_batch([_LONE_SURROGATE.sub("\ufffd", t) for t in texts])
