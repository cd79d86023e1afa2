"""The optional download: the Transformers.js model files from the Hugging Face hub.

Reached only when the caller passed ``allow_download=True`` and no local source had a model. It fetches
``Xenova/all-MiniLM-L6-v2`` at a pinned revision (the int8 ``onnx/model_quantized.onnx`` that
Transformers.js loads by default, and its ``tokenizer.json``), checks both against pinned sha256 digests
and stores them as a model directory in the cache. ``HF_ENDPOINT`` is honoured for mirrors.
Only the standard library is used, so the offline install carries no HTTP client for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from sovseal.embed.model_dir import MODEL, TOKENIZER, XENOVA_INT8, XENOVA_TOKENIZER, Pinned, check_pinned, write_model_dir
from sovseal.errors import ModelUnavailableError

REPO = "Xenova/all-MiniLM-L6-v2"
REVISION = "751bff37182d3f1213fa05d7196b954e230abad9"
FILES: dict[str, tuple[str, Pinned]] = {
    MODEL: ("onnx/model_quantized.onnx", XENOVA_INT8),
    TOKENIZER: ("tokenizer.json", XENOVA_TOKENIZER),
}
TIMEOUT_S = 30.0


def download(dest: Path, remedy: str) -> None:
    """Fetch, verify and store the pinned files as the model directory ``dest``."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    if not endpoint.startswith(("https://", "http://")):  # urlopen would also read file:// and other schemes
        raise ModelUnavailableError(f"HF_ENDPOINT must be an http(s) URL, got {endpoint!r}.", advice=remedy)
    files = {}
    for name, (remote, pin) in FILES.items():
        url = f"{endpoint}/{REPO}/resolve/{REVISION}/{remote}"
        data = _fetch(url, pin.size, remedy)
        check_pinned(data, pin, url, remedy)
        files[name] = data
    write_model_dir(dest, files, origin=f"{REPO}@{REVISION}")


def _fetch(url: str, limit: int, remedy: str) -> bytes:
    """Read ``url`` into memory, refusing bodies larger than the pinned size (a wrong file, not a slow one)."""
    import urllib.request  # only a download needs it: keeps the offline cold start short

    body = bytearray()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # nosec B310 -- http(s) only (checked in download); bytes are sha256-pinned
            while chunk := response.read(1 << 20):
                body += chunk
                if len(body) > limit:
                    raise ModelUnavailableError(f"{url} is larger than the pinned {limit} bytes.", advice=remedy)
    except OSError as exc:  # URLError, timeouts and refused connections are all OSErrors
        raise ModelUnavailableError(f"downloading {url} failed ({exc}).", advice=remedy) from exc
    return bytes(body)
