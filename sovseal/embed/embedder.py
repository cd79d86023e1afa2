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

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from cachetools import LRUCache

from sovseal.embed.model_dir import sha256
from sovseal.embed.resolve import resolve_model
from sovseal.errors import InvalidInputError, ModelUnavailableError

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

def _import_onnxruntime() -> Any:
    """Import onnxruntime with its telemetry off.

    Since 1.2x its Linux and macOS builds start a telemetry uploader at import that writes a device
    id and an event cache under ``~/.cache/Microsoft`` and a ``.ses`` file in the temporary
    directory. sovseal sends nothing anywhere and writes nothing outside the store and the model
    cache, so ``ORT_DISABLE_TELEMETRY=1`` is set first, unless the user set it themselves.
    """
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime


MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
BATCH_SIZE = 16
QUERY_CACHE_SIZE = 256
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class _Model:
    """A loaded session and what feeding it needs."""

    session: onnxruntime.InferenceSession
    tokenizer: tokenizers.Tokenizer
    id_dtype: type[np.integer]  # int32 for sovseal's graph, int64 for the usual exports
    token_types: bool  # whether the graph takes token_type_ids (exports do; sovseal's folds them)


class Embedder:
    """all-MiniLM-L6-v2 on onnxruntime, offline by default; loads on first use or on :meth:`ready`."""

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
        self._model: _Model | None = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._query_cache: LRUCache[str, np.ndarray] = LRUCache(QUERY_CACHE_SIZE)  # under _cache_lock
        self.origin: str | None = None  # where the model was loaded from, once ready
        self.model_sha256: str | None = None  # identifies the vectors: a different digest means re-embed
        self.tokenizer_sha256: str | None = None

    def ready(self) -> None:
        """Resolve, verify and load the model, then run it once so the first real call is not slow."""
        self._loaded()

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this embedder's vectors (loads the model first): a store records it with its
        index and refuses recall with another (see :mod:`sovseal.embed.fingerprint`).

        ``origin`` (where the files were read from) is informational; the digests of the model and
        tokenizer files actually run, the dimension, pooling, normalisation and truncation are compared.
        """
        self._loaded()
        return {
            "model": MODEL_NAME,
            "origin": self.origin,
            "model_sha256": self.model_sha256,
            "tokenizer_sha256": self.tokenizer_sha256,
            "dim": DIM,
            "pooling": "mean",
            "normalize": "l2",
            "max_tokens": MAX_TOKENS,
        }

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: an (n, 384) float32 array of unit vectors, in the order given."""
        texts = _check_texts(texts)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        model = self._loaded()
        ids = _encode(model.tokenizer, texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = self._run(model, [ids[i] for i in batch])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: a (384,) float32 unit vector. The last 256 distinct queries are cached."""
        if not isinstance(text, str):
            raise InvalidInputError(f"embed_query takes a str, got {type(text).__name__}")
        with self._cache_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                return cached.copy()
        vector: np.ndarray = self.embed_documents([text])[0]
        with self._cache_lock:
            self._query_cache[text] = vector  # the least recently used query goes when it is full
        return vector.copy()

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_documents` in a worker thread, so the event loop keeps running."""
        import asyncio  # only the async API needs it: keeps the cold start short

        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> np.ndarray:
        """:meth:`embed_query` in a worker thread, so the event loop keeps running."""
        import asyncio

        return await asyncio.to_thread(self.embed_query, text)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def _loaded(self) -> _Model:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> _Model:
        ort = _import_onnxruntime()
        from tokenizers import Tokenizer

        files = resolve_model(self._model_dir, allow_download=self._allow_download)
        tokenizer = Tokenizer.from_str(files.tokenizer.decode("utf-8"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # The built graph is already fused; BASIC only folds constants, and starts faster than ALL.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        # Workers spin while a run is going (low latency) and stop when it returns (idle costs nothing).
        options.add_session_config_entry("session.force_spinning_stop", "1")
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(files.model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's Fail, InvalidGraph, ... share no public base class
            raise ModelUnavailableError(f"onnxruntime cannot load the model from {files.origin}: {exc}") from exc
        inputs = {i.name: i.type for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= set(inputs) <= {"input_ids", "attention_mask", "token_type_ids"}:
            raise ModelUnavailableError(f"{files.origin}: model.onnx takes inputs {sorted(inputs)}, not a BERT encoder's")
        model = _Model(
            session,
            tokenizer,
            id_dtype=np.int32 if inputs["input_ids"] == "tensor(int32)" else np.int64,
            token_types="token_type_ids" in inputs,
        )
        self._run(model, [tokenizer.encode("").ids])  # warm-up: the first run allocates and initialises kernels
        self.origin, self.model_sha256 = files.origin, files.model_sha256
        self.tokenizer_sha256 = sha256(files.tokenizer)
        return model

    def _run(self, model: _Model, ids: list[list[int]]) -> np.ndarray:
        """Pad one batch on the right, run the encoder, mean-pool over the mask and normalise."""
        lengths = np.array([len(seq) for seq in ids])
        input_ids = np.zeros((len(ids), int(lengths.max())), dtype=model.id_dtype)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
        mask = (np.arange(input_ids.shape[1]) < lengths[:, None]).astype(model.id_dtype)
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if model.token_types:  # one text is all segment 0
            feed["token_type_ids"] = np.zeros_like(input_ids)
        with self._run_lock:
            hidden: np.ndarray = model.session.run(["last_hidden_state"], feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled: np.ndarray = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        unit: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return unit


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


def _encode(tokenizer: tokenizers.Tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids per text. Lone surrogates (valid in a Python str, not in UTF-8) become U+FFFD instead
    of failing. One text skips the batch call, whose thread-pool hand-off costs more than the work."""
    try:
        return _token_ids(tokenizer, texts)
    except TypeError:
        return _token_ids(tokenizer, [_LONE_SURROGATE.sub("\ufffd", t) for t in texts])


def _token_ids(tokenizer: tokenizers.Tokenizer, texts: list[str]) -> list[list[int]]:
    if len(texts) == 1:
        return [tokenizer.encode(texts[0]).ids]
    return [e.ids for e in tokenizer.encode_batch(texts)]
