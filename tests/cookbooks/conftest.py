"""The cookbooks run on the real model, built once per session in pytest's temp dir (as the CLI tests do)."""

from __future__ import annotations

import pytest

from tests.cli.support import set_model_base


@pytest.fixture(scope="session", autouse=True)
def _model_base(tmp_path_factory: pytest.TempPathFactory) -> None:
    set_model_base(tmp_path_factory.getbasetemp())
