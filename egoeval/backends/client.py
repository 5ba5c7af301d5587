"""One model call the way every stage makes it: cache first, then the limiter, retries and the backend."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from egoeval.backends import Backend, BackendError, ChatRequest, EndpointError, make_backend, request_key
from egoeval.cache import ResponseCache
from egoeval.limiter import AdaptiveLimiter, call_with_retries


@dataclass(frozen=True)
class Completion:
    response: str | None  # None when the call failed
    error: str  # "" when it succeeded
    key: str  # the request key (the cache key)


class ModelClient:
    """A backend plus its pacing (AIMD limiter, retries with jittered backoff) and the shared response cache.

    A key found in the cache is never sent again; only successes are stored. With ``cache_only`` a miss is
    an error and nothing is sent. A failed call is returned as a Completion with its error, except an
    EndpointError (a wrong key, URL or model: every call would fail alike), which is raised.
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache,
        *,
        max_retries: int = 6,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        seed: int = 0,
        cache_only: bool = False,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.limiter = AdaptiveLimiter(backend.concurrency)
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.cache_only = cache_only
        self._rng = random.Random(seed)  # backoff jitter only; never shapes an answer
        self._lock = threading.Lock()
        self.calls = 0  # completed calls that reached the backend (successes and failures)
        self.hits = 0
        self.broken: EndpointError | None = None  # once the endpoint is known wrong, nothing more is sent

    @classmethod
    def from_spec(cls, spec: dict[str, Any], cache: ResponseCache, *, cache_only: bool = False) -> ModelClient:
        """Backend and retry settings from a params model entry (``max_retries``, ``retry_base_s``, ``retry_max_s``)."""
        return cls(
            make_backend(spec),
            cache,
            max_retries=int(spec.get("max_retries", 6)),
            base_delay=float(spec.get("retry_base_s", 0.5)),
            max_delay=float(spec.get("retry_max_s", 30.0)),
            cache_only=cache_only,
        )

    def complete(self, request: ChatRequest) -> Completion:
        key = request_key(self.backend.name, self.backend.model, request)
        cached = self.cache.get(key)
        if cached is not None:
            with self._lock:
                self.hits += 1
            return Completion(cached, "", key)
        if self.cache_only:
            return Completion(None, "not in the response cache (cache-only mode)", key)
        if self.broken is not None:
            raise self.broken
        start = time.monotonic()
        try:
            text = call_with_retries(
                lambda: self.backend.complete(request),
                max_retries=self.max_retries,
                base_delay=self.base_delay,
                max_delay=self.max_delay,
                rng=self._rng,
                limiter=self.limiter,
            )
        except EndpointError as error:
            self.broken = error
            raise  # every call would fail alike: the stage stops (exit 2)
        except BackendError as error:
            return Completion(None, str(error) or type(error).__name__, key)
        finally:
            with self._lock:
                self.calls += 1
        meta = {"backend": self.backend.name, "model": self.backend.model, "seconds": time.monotonic() - start}
        return Completion(self.cache.put(key, text, meta), "", key)

    def close(self) -> None:
        self.backend.close()
