"""The one clock and id adapter: the only module allowed to read the OS clock or entropy."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import time
from datetime import UTC, datetime


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def iso(self, ms: int | None = None) -> str:
        ms = self.now_ms() if ms is None else ms
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class SystemIds:
    """Opaque ids: ULID-like (time-ordered, 26 chars of Crockford base32) for runs; derived ids for events."""

    def __init__(self, clock: SystemClock | None = None) -> None:
        self._clock = clock or SystemClock()

    def ulid(self) -> str:
        ms = self._clock.now_ms()
        rand = int.from_bytes(os.urandom(10), "big")
        value = (ms << 80) | rand
        out = []
        for _ in range(26):
            out.append(_ALPHABET[value & 31])
            value >>= 5
        return "".join(reversed(out))

    def token(self, nbytes: int = 32) -> str:
        """An unguessable URL-safe token of ``nbytes`` random bytes (API keys, peppers)."""
        return base64.urlsafe_b64encode(os.urandom(nbytes)).decode("ascii").rstrip("=")

    def event_id(self, run_id: str, seq: int) -> str:
        """Deterministic per (run, sequence): a retried append mints the same id."""
        return "ev-" + hashlib.sha256(f"{run_id}#{seq}".encode()).hexdigest()[:29]

    def seeded(self, seed: str) -> random.Random:
        """A reproducible generator (Mersenne Twister seeded with the string): statistics, never secrets."""
        return random.Random(seed)


def iso_from_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def ms_from_iso(value: str) -> int:
    v = value.replace("Z", "+00:00")
    return int(datetime.fromisoformat(v).timestamp() * 1000)


def full_jitter_sleep(attempt: int, base_s: float = 0.025, cap_s: float = 1.0) -> float:
    """Sleep a "full jitter" backoff before retry ``attempt`` (1, 2, ...): uniform in [0, min(cap, base * 2^n)).

    The one place outside the ports allowed to draw randomness (entropy is banned elsewhere by ruff TID251).
    Returns the seconds slept.
    """
    delay = random.uniform(0.0, min(cap_s, base_s * (2 ** (attempt - 1))))
    time.sleep(delay)
    return delay
