"""Fixtures for the consolidation tests: a store holding a few days' worth of chat episodes."""

from __future__ import annotations

import pytest

from sovseal import Sovseal

#: (path, payload, type): episodes carry facts for the rule model; one semantic fact exists already.
EPISODES = [
    ("chat.1", "We set up the laptop. fact:user.editor=The user edits code in neovim; ok", "episodic"),
    ("chat.2", "Talked tests. fact:user.testing=The user tests with pytest; fact:project.ci=CI runs on GitHub Actions;", "episodic"),
    ("chat.3", "Small talk about the weather.", "episodic"),
    ("chat.4", "Again: fact:user.shell=The user runs zsh; and fact:user.pet=The user has a dog named Biscuit;", "episodic"),
    ("chat.5", "Deploy talk. fact:project.deploy=Deploys need a manual approval;", "episodic"),
    ("chat.6", "Pets again. fact:user.pet=The user has a dog named Biscuit;", "episodic"),
]
KNOWN = ("user.pet", "The user has a dog named Biscuit", "semantic")


def fill(mem: Sovseal) -> None:
    mem.store(*KNOWN[:2], type=KNOWN[2])
    for path, payload, kind in EPISODES:
        mem.store(path, payload, type=kind)


@pytest.fixture
def filled(mem: Sovseal) -> Sovseal:
    fill(mem)
    return mem
