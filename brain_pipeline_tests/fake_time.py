"""One fake clock for tests: time moves only when the code under test sleeps."""

from __future__ import annotations


class FakeTime:
    """`clock()` and `sleep()` to inject; `sleeps` records every wait asked for."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
