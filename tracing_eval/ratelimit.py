"""Pacing of judge calls: an adaptive concurrency cap (AIMD with a Retry-After pause) and retry timing.

The limiter knows nothing about HTTP: callers hold a slot per attempt and report how it went.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class Permit:
    """One held slot; `epoch` is the number of decreases seen when the call started."""

    epoch: int


class AdaptiveLimiter:
    """At most `limit` slots held at once, FIFO.

    The limit starts at `max_limit`, halves on a rate limit (floor 1) and grows by one after
    `limit` successes in a row (additive increase, multiplicative decrease). Only calls started
    after the last decrease can decrease it again, so a burst of 429s halves it once. A
    `Retry-After` pauses every new call until it has passed.
    """

    def __init__(self, max_limit: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_limit < 1:
            raise ValueError("max_limit must be at least 1")
        self.max_limit = max_limit
        self.decreases = 0
        self.increases = 0
        self._limit = max_limit
        self._clock = clock
        self._in_flight = 0
        self._epoch = 0
        self._streak = 0
        self._paused_until = 0.0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def pause_left(self) -> float:
        """Seconds until new calls may start (0 when not paused)."""
        return max(0.0, self._paused_until - self._clock())

    async def acquire(self) -> Permit:
        """Wait for a free slot, then for any pause to end; the slot is held while paused."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self.release()  # a slot was handed over just as we were cancelled: pass it on
                else:
                    self._waiters.remove(fut)
                raise
        try:
            while (wait := self.pause_left()) > 0:
                await asyncio.sleep(wait)
        except BaseException:
            self.release()
            raise
        return Permit(self._epoch)

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Permit]:
        permit = await self.acquire()
        try:
            yield permit
        finally:
            self.release()

    def succeeded(self, permit: Permit) -> None:
        """A call went through; after a run of `limit` such calls the limit grows by one."""
        if permit.epoch != self._epoch:
            return  # started before the last decrease: says nothing about the new limit
        self._streak += 1
        if self._streak >= self._limit and self._limit < self.max_limit:
            self._limit += 1
            self._streak = 0
            self.increases += 1
            self._wake()

    def failed(self, _permit: Permit) -> None:
        """A call failed for another reason (5xx, timeout): the run of successes starts over."""
        self._streak = 0

    def rate_limited(self, permit: Permit, retry_after: float | None = None) -> None:
        """A call was rate limited: halve the limit (once per burst) and pause for `retry_after` seconds."""
        if retry_after is not None and retry_after > 0:
            self._paused_until = max(self._paused_until, self._clock() + retry_after)
        self._streak = 0
        if permit.epoch == self._epoch:
            self._limit = max(1, self._limit // 2)
            self._epoch += 1
            self.decreases += 1

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self._in_flight += 1
                fut.set_result(None)


def backoff_delay(retry: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `retry` (1-based): base·2^(retry-1) up to `cap`, the upper
    half of it jittered, so retries of many callers spread out."""
    ceiling = min(cap, base * 2 ** max(0, retry - 1))
    return ceiling / 2 + (rng or random).random() * ceiling / 2


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for: `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    return value if math.isfinite(value) and value >= 0 else None
