"""The one place that paces model calls: an adaptive (AIMD) concurrency limiter and retries with backoff.

The limiter starts at the configured concurrency, halves its limit (down to 1) when the server signals
overload (429/503), and grows it back by one after every ``limit`` successes, up to the maximum. Only
calls that *started* after the last decrease can trigger another one, so one burst of 429s halves once.
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from egoeval.core.errors import CallRetryable, RetriesExhausted

T = TypeVar("T")


class Outcome(enum.Enum):
    SUCCESS = "success"
    OVERLOAD = "overload"
    FAILURE = "failure"


class AdaptiveLimiter:
    """Bounded, thread-safe AIMD concurrency limit."""

    def __init__(self, max_limit: int) -> None:
        if max_limit < 1:
            raise ValueError(f"concurrency must be at least 1, got {max_limit}")
        self.max_limit = max_limit
        self._limit = max_limit
        self._in_flight = 0
        self._epoch = 0  # bumped at every decrease
        self._successes = 0
        self._peak = 0
        self._paused_until = 0.0  # time.monotonic() before which no call starts (the server asked to wait)
        self._condition = threading.Condition()

    @property
    def paused_until(self) -> float:
        return self._paused_until

    def pause_until(self, when: float) -> None:
        """Start no call before ``when`` (monotonic seconds): a Retry-After holds every call to that server."""
        with self._condition:
            self._paused_until = max(self._paused_until, when)

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def peak_in_flight(self) -> int:
        return self._peak

    def acquire(self) -> int:
        """Block until a slot is free; return the epoch to hand back to ``release``."""
        with self._condition:
            while self._in_flight >= self._limit:
                self._condition.wait()
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            return self._epoch

    def release(self, epoch: int, outcome: Outcome) -> None:
        with self._condition:
            self._in_flight -= 1
            if outcome is Outcome.OVERLOAD:
                if epoch == self._epoch:
                    self._limit = max(1, self._limit // 2)
                    self._epoch += 1
                    self._successes = 0
            elif outcome is Outcome.SUCCESS and self._limit < self.max_limit:
                self._successes += 1
                if self._successes >= self._limit:
                    self._limit += 1
                    self._successes = 0
            self._condition.notify_all()


def backoff_delay(attempt: int, base_delay: float, max_delay: float, rng: random.Random) -> float:
    """Equal-jitter exponential backoff: half of min(max, base * 2**attempt) plus a random half."""
    ceiling = min(max_delay, base_delay * 2**attempt)
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def call_with_retries(
    fn: Callable[[], T],
    *,
    max_retries: int,
    base_delay: float,
    max_delay: float,
    rng: random.Random,
    limiter: AdaptiveLimiter | None = None,
) -> T:
    """Call ``fn`` (holding a limiter slot while it runs); retry CallRetryable with jittered backoff.

    No wait is longer than ``max_delay``. A ``Retry-After`` is honoured (and holds the limiter's other calls too)
    when it is at most ``max_delay``; a longer one ends the call, and every call that would start before it ends,
    at once. CallRefused and any other exception propagate at once; a fault that outlasts the retries is
    raised as RetriesExhausted.
    """
    last: CallRetryable | None = None
    for attempt in range(max_retries + 1):
        held = (limiter.paused_until - time.monotonic()) if limiter else 0.0
        if held > max_delay:
            raise RetriesExhausted(
                f"{last or 'http 429'}: the server asks to wait {held:.0f} s more (Retry-After), longer than "
                f"retry_max_s ({max_delay:g} s): not waiting"
            )
        if held > 0:
            time.sleep(held)
        epoch = limiter.acquire() if limiter else 0
        outcome = Outcome.FAILURE
        try:
            result = fn()
            outcome = Outcome.SUCCESS
            return result
        except CallRetryable as error:
            outcome = Outcome.OVERLOAD if error.overload else Outcome.FAILURE
            last = error
        finally:
            if limiter:
                limiter.release(epoch, outcome)
        if attempt == max_retries:
            break
        if last.retry_after is not None:
            if limiter:
                limiter.pause_until(time.monotonic() + last.retry_after)
            if last.retry_after > max_delay:
                raise RetriesExhausted(
                    f"{last}: the server asks to wait {last.retry_after:g} s (Retry-After), longer than retry_max_s "
                    f"({max_delay:g} s): not waiting"
                ) from last
            delay = last.retry_after + rng.uniform(0, min(base_delay, max_delay - last.retry_after))
        else:
            delay = backoff_delay(attempt, base_delay, max_delay, rng)
        time.sleep(delay)
    assert last is not None
    raise RetriesExhausted(f"{last} after {max_retries} retries") from last
