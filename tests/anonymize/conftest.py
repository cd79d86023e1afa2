"""One Presidio analyzer for the whole anonymizer suite (building it takes seconds; a call, milliseconds),
and a fresh anonymizer with a clock the test moves by hand."""

from __future__ import annotations

import pytest

from sovseal.anonymize import Anonymizer, Detector


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def detector() -> Detector:
    built = Detector(ner_model="none")  # the blank pipeline, whatever models this machine has
    built.ready()
    return built


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def anonymizer(detector: Detector, clock: FakeClock) -> Anonymizer:
    return Anonymizer(detector=detector, clock=clock, ttl=60)
