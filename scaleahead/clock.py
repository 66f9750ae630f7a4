"""A clock that can be replaced, so the replay simulator and the tests drive virtual time.

Only the composition root (CLI, control loop) reads the real clock; everything below takes ``now``.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        """Seconds on a clock that never steps (``time.monotonic``): for durations, where the
        wall clock (``now``) may be stepped by NTP or by hand (the Lease election's timing)."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock:
    """Time that moves only when told to (``sleep`` advances it instantly)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        """Virtual time never steps: durations are measured on ``now`` itself."""
        return self._now

    def sleep(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    def advance_to(self, t: float) -> None:
        self._now = max(self._now, t)
