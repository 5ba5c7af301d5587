"""One model call the way every stage makes it: cache first, then the limiter, retries and the backend."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from egoeval.backends import Backend, ChatRequest, ModelEntry, Reply, make_backend, request_key
from egoeval.backends.limiter import AdaptiveLimiter, call_with_retries
from egoeval.backends.usage import usage_counts
from egoeval.cache import CACHE_MISS, ResponseCache
from egoeval.core.errors import CallFailed, EndpointDown, EndpointError, Interrupted, RequestRejected

FIRST_CALLS = 8  # when the first calls that reach an endpoint are all rejected alike, every call would be: stop


def token_cost(prompt_tokens: float, completion_tokens: float, price: tuple[float, float]) -> float:
    """USD for these tokens at ``price`` (USD per million prompt tokens, per million completion tokens)."""
    return round((prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6, 6)


@contextmanager
def call_pool(workers: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """Threads for model calls. Leaving the block cancels the calls not yet started and waits for those in flight
    (each bounded by ``timeout_s``), so the client and the response cache they use are never closed under them; an
    interrupted stage (SIGINT, SIGTERM) waits for nothing."""
    pool = ThreadPoolExecutor(workers, name)
    try:
        yield pool
    except Interrupted:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@dataclass(frozen=True)
class CallUsage:
    """The endpoint's ``usage`` for the call that made an answer, as the response cache stored it when the reply came
    (a cached answer carries its first call's counts; None where the backend reported none). What depends on the run
    rather than the reply (retries, latency, cache hits) is the run's ``ModelClient.ledger``."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> CallUsage:
        counts = usage_counts(meta, "the response cache")
        return cls(counts.get("prompt_tokens"), counts.get("completion_tokens"))


@dataclass(frozen=True)
class Completion:
    response: str | None  # None when the call failed
    error: str  # "" when it succeeded
    key: str  # the request key (the cache key)
    served_model: str = ""  # the model the endpoint named as serving the reply ("" when none is named)
    usage: CallUsage | None = None  # what the call that made the reply took (None: no reply)


class ModelClient:
    """A backend plus its pacing (AIMD limiter, retries with jittered backoff) and the shared response cache.

    A key found in the cache is never sent again; only successes are stored. With ``cache_only`` a miss is
    an error and nothing is sent. A failed call is returned as a Completion with its error, except when every call
    would fail alike, which is raised and stops the client: an EndpointError (a wrong key, URL or model; also the
    first FIRST_CALLS calls all rejected the same way, e.g. every request answered 400) or an EndpointDown
    (nothing answers at the address).
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache,
        *,
        concurrency: int,
        max_retries: int,
        base_delay: float,
        max_delay: float,
        seed: int = 0,
        cache_only: bool = False,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.concurrency = concurrency  # the most calls in flight (the limiter's ceiling; the caller's threads)
        self.limiter = AdaptiveLimiter(concurrency)
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.cache_only = cache_only
        self._rng = random.Random(seed)  # backoff jitter only; never shapes an answer
        self._lock = threading.Lock()
        self.calls = 0  # completed calls that reached the backend (successes and failures)
        self.hits = 0
        self.retries = 0  # attempts beyond each call's first
        self.latencies: list[float] = []  # seconds per completed call that reached the backend, retries included
        self.prompt_tokens = 0  # the endpoint's ``usage`` summed over this run's answered calls
        self.completion_tokens = 0
        self.without_usage = 0  # this run's answered calls whose reply reported no (believable) usage
        self.served: Counter[str] = Counter()  # the model each reply (sent or cached) names as serving it
        self._batched: set[str] = set()  # keys answered through the Batch API this run: sent, not cache hits
        self._first: list[str] = []  # per call of the first FIRST_CALLS: the kind of its rejection, "" if none
        self.broken: EndpointError | EndpointDown | None = None  # once every call would fail, nothing more is sent

    @classmethod
    def from_spec(cls, spec: ModelEntry, cache: ResponseCache, *, cache_only: bool = False) -> ModelClient:
        """Backend, pacing and retry settings from a model entry of the settings (``concurrency``, ``max_retries``,
        ``retry_base_s``, ``retry_max_s``): the one place they are declared is the settings model."""
        return cls(
            make_backend(spec),
            cache,
            concurrency=spec.concurrency,
            max_retries=spec.max_retries,
            base_delay=spec.retry_base_s,
            max_delay=spec.retry_max_s,
            cache_only=cache_only,
        )

    def complete(self, request: ChatRequest) -> Completion:
        key = request_key(self.backend.cache_name, self.backend.model, request)
        cached = self.cache.entry(key)
        if cached is not None:
            with self._lock:
                self.hits += key not in self._batched
            return self._done(key, *cached)
        if self.cache_only:
            return Completion(None, f"{CACHE_MISS} (cache-only mode)", key)
        if self.broken is not None:
            raise self.broken
        start = time.monotonic()
        rejected = ""
        attempts = 0

        def attempt() -> Reply:
            nonlocal attempts
            attempts += 1
            return self.backend.complete(request)

        try:
            reply = call_with_retries(
                attempt,
                max_retries=self.max_retries,
                base_delay=self.base_delay,
                max_delay=self.max_delay,
                rng=self._rng,
                limiter=self.limiter,
            )
        except (EndpointError, EndpointDown) as error:
            self.broken = error
            raise  # every call would fail alike: the stage stops
        except RequestRejected as error:
            rejected = error.kind
            self._note_first(error)
            return Completion(None, str(error), key)
        except CallFailed as error:
            return Completion(None, str(error) or type(error).__name__, key)
        finally:
            with self._lock:
                self.calls += 1
                self.retries += max(attempts - 1, 0)
                self.latencies.append(time.monotonic() - start)
            if not rejected:
                self._note_first(None)
        with self._lock:
            self.prompt_tokens += reply.prompt_tokens or 0
            self.completion_tokens += reply.completion_tokens or 0
            self.without_usage += reply.prompt_tokens is None or reply.completion_tokens is None
        meta = {
            "backend": self.backend.name,
            "model": self.backend.model,
            "served_model": reply.served_model,
            "seconds": time.monotonic() - start,
            **{
                name: n
                for name, n in (("prompt_tokens", reply.prompt_tokens), ("completion_tokens", reply.completion_tokens))
                if n is not None
            },
        }
        return self._done(key, *self.cache.put(key, reply.text, meta))

    def count_batched(self, key: str, meta: dict[str, Any]) -> None:
        """A call this run answered through the Batch API (``meta`` as cached): in the ledger as sent, its tokens
        counted, and its answer, read from the cache afterwards, not counted as a cache hit."""
        usage = CallUsage.from_meta(meta)
        with self._lock:
            if key in self._batched:
                return
            self._batched.add(key)
            self.calls += 1
            self.prompt_tokens += usage.prompt_tokens or 0
            self.completion_tokens += usage.completion_tokens or 0
            self.without_usage += usage.prompt_tokens is None or usage.completion_tokens is None

    def _done(self, key: str, response: str, meta: dict[str, Any]) -> Completion:
        served = str(meta.get("served_model", ""))
        with self._lock:
            self.served[served] += 1
        return Completion(response, "", key, served, CallUsage.from_meta(meta))

    def _note_first(self, rejection: RequestRejected | None) -> None:
        """Count one of the first FIRST_CALLS calls; when they were all rejected alike, stop (raise EndpointError)."""
        with self._lock:
            if len(self._first) >= FIRST_CALLS or self.broken is not None:
                return
            self._first.append("" if rejection is None else rejection.kind)
            if rejection is None or len(self._first) < FIRST_CALLS or set(self._first) != {rejection.kind}:
                return
            self.broken = EndpointError(
                f"{rejection.where} rejected the first {FIRST_CALLS} calls alike ({rejection}), so it would reject "
                f"every call; {rejection.fix}"
            )
        raise self.broken

    def ledger(self, price: tuple[float, float] | None = None) -> dict[str, Any]:
        """What this client's calls cost in this run: calls sent, cache hits, retries, the endpoint's ``usage``
        tokens and how many answered calls reported none, latency p50 / p95 (seconds; None without calls) and, at
        ``price`` (USD per million prompt and completion tokens), the cost: a lower bound (``cost_is_lower_bound``)
        when some calls reported no usage."""
        with self._lock:
            latencies = sorted(self.latencies)
            prompt, completion = self.prompt_tokens, self.completion_tokens
            entry: dict[str, Any] = {"calls": self.calls, "cache_hits": self.hits, "retries": self.retries}
            without = self.without_usage
        entry |= {"prompt_tokens": prompt, "completion_tokens": completion, "calls_without_usage": without}
        for name, q in (("latency_p50_s", 0.5), ("latency_p95_s", 0.95)):
            entry[name] = round(float(np.quantile(latencies, q)), 4) if latencies else None
        entry["cost_usd"] = None if price is None else token_cost(prompt, completion, price)
        entry["cost_is_lower_bound"] = entry["cost_usd"] is not None and without > 0
        return entry

    def served_note(self) -> str | None:
        """A line saying which other models the endpoint named as serving the replies, or None when none did."""
        others = {name: n for name, n in self.served.items() if name and name != self.backend.model}
        if not others:
            return None
        named = ", ".join(f"{name!r} ({n})" for name, n in sorted(others.items()))
        total = sum(self.served.values())
        return (
            f"{self.backend.model}: the endpoint named another model as serving {sum(others.values())} of {total} "
            f"replies: {named} (recorded per answer in served_model)"
        )

    def close(self) -> None:
        self.backend.close()
