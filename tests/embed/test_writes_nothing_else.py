"""A real embedding writes nothing outside the store and the model cache.

onnxruntime's Linux build starts a telemetry uploader at import, which writes a device id and an
event cache under ``~/.cache/Microsoft`` and a ``.ses`` file in the temporary directory; sovseal
turns it off (``ORT_DISABLE_TELEMETRY``) before importing it. Checked in a fresh process with its
own HOME and TMPDIR, since the telemetry state is process-wide.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def test_store_and_recall_with_the_real_model_write_only_the_store_and_the_model_cache(tmp_path: Path) -> None:
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    scratch.mkdir()
    script = textwrap.dedent(
        """
        import os
        from sovseal import Sovseal
        with Sovseal("~/notes", key=os.urandom(32)) as mem:
            mem.store("user.editor", "The user edits code in neovim.")
            assert mem.recall("which editor?", k=1)[0].path == "user.editor"
        print(os.environ["ORT_DISABLE_TELEMETRY"])
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SOVSEAL_HOME", "SOVSEAL_MODEL_DIR", "ORT_DISABLE_TELEMETRY")}
    env.update(HOME=str(home), TMPDIR=str(scratch))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    outside = [p for p in written if not p.startswith(("notes/", ".sovseal/models/"))]
    assert written and outside == []
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_a_users_own_telemetry_choice_is_kept(tmp_path: Path) -> None:
    script = (
        "import os\nfrom sovseal.embed.embedder import _import_onnxruntime\n_import_onnxruntime()\n"
        "print(os.environ['ORT_DISABLE_TELEMETRY'])"
    )
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "0", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
