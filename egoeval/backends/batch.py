"""The OpenAI Batch API (``backend: openai_batch``): the same chat requests, sent as batches at about half the price.

A batch answers requests whose text is known before it is sent, so a conversation whose second call depends on the
first reply (EgoNormia's action, then its justification) takes one batch per round: ``run_batches`` runs every
conversation against the response cache, collects the calls it cannot answer yet (one per conversation at most,
the next call each conversation makes), sends them as one batch (or several, within ``batch_max_requests``),
merges the replies into the cache and repeats until no conversation has a call left to make. The stage's own pass
then replays every conversation from the cache, exactly as an online run would, and sends online (with the usual
retries) the few requests no batch answered: an expired batch's unfinished requests and any request that came back
with an error. Resubmitting those as a new batch would wait another completion window for what are mostly
transient faults; a request the endpoint rejects is rejected online too and recorded as that answer's failure.

Each batch's request file (JSONL, one line per request, exactly the body the online backend sends, with the key
redacted) is written to ``records`` before it is uploaded: the audit record of what was asked and paid for. The
ids of every batch are recorded in ``batches.json`` beside the response cache, atomically, before the batch is
created (its input file) and when it is (its id): a rerun after a crash resumes those batches instead of paying
again. The same request key as ``backend: openai`` is used, so the two backends share their cached replies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import httpx

from egoeval.backends.base import (
    BackendError,
    ChatRequest,
    EndpointDown,
    EndpointError,
    ModelEntry,
    TransientError,
    redact,
    request_key,
)
from egoeval.backends.openai import CONNECT_TIMEOUT_S, OpenAIBackend, _Answer, _cut, reply_byte_limit, request_body
from egoeval.errors import TransientFailure

CHAT_URL = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"  # the only one the Batch API offers
STATE_FILE = "batches.json"  # beside the response cache: the batches submitted and not yet merged
DONE = {"completed", "failed", "expired", "cancelled"}  # a batch in any of these states changes no more
API_BYTES = 1 << 20  # the most bytes kept of a Batch API answer other than a results file
LINE_ENVELOPE_BYTES = 4096  # a results line's JSON around the chat completion


class BatchEntry(ModelEntry, Protocol):
    """A model entry with the batch settings (validated by the settings)."""

    batch_poll_s: float
    batch_deadline_s: float
    batch_max_requests: int


class BatchError(TransientError, TransientFailure):
    """A Batch API call that failed in a way a later run may not (5xx, 429, a dropped connection): exit 75."""


class OpenAIBatchBackend(OpenAIBackend):
    """An OpenAI endpoint's Batch API; ``complete`` (inherited) is the online call for what no batch answered."""

    name: ClassVar[str] = "openai_batch"

    @property
    def cache_name(self) -> str:
        """The online backend's name: a batch reply is the endpoint's reply, one cache entry per request for both."""
        return OpenAIBackend.name

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str | None,
        timeout_s: float,
        concurrency: int = 8,
        *,
        poll_s: float = 30.0,
        deadline_s: float = 86_400.0,
        max_requests: int = 50_000,
    ) -> None:
        super().__init__(model, base_url, api_key_env, timeout_s, concurrency)
        self.poll_s = poll_s
        self.deadline_s = deadline_s
        self.max_requests = max_requests

    @classmethod
    def from_spec(cls, spec: BatchEntry) -> OpenAIBatchBackend:  # type: ignore[override]
        if spec.base_url is None:
            raise ValueError(f"model {spec.name!r}: the openai_batch backend needs base_url")
        return cls(
            spec.name,
            spec.base_url,
            spec.api_key_env,
            spec.timeout_s,
            spec.concurrency,
            poll_s=spec.batch_poll_s,
            deadline_s=spec.batch_deadline_s,
            max_requests=spec.batch_max_requests,
        )

    # ------------------------------------------------------------------ the Batch API's four calls

    def _api(self, method: str, path: str, limit: int = API_BYTES, **send: Any) -> _Answer:
        """One Batch API call, its answer read up to ``limit`` bytes within ``timeout_s``, the key redacted."""
        headers, key = self._headers()
        if "files" in send:
            headers.pop("Content-Type")  # httpx sets the multipart boundary
        url = f"{self.base_url}{path}"
        self._deadline.at = time.monotonic() + self.timeout_s
        try:
            with self._client.stream(method, url, headers=headers, **send) as streamed:
                self._answered = True
                chunks, size = [], 0
                for chunk in streamed.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise EndpointError(f"{url}: answered more than {limit:,} bytes; not a Batch API answer")
                    chunks.append(chunk)
                answer = _Answer.read(streamed.status_code, streamed.headers, b"".join(chunks), key)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            if not self._answered:
                raise EndpointDown(
                    f"{url}: nothing answers at this address ({_cut(redact(str(error), key), 120)}; connect timeout "
                    f"{CONNECT_TIMEOUT_S:g} s): check base_url of model {self.model!r} in params.yaml"
                ) from None
            raise BatchError(f"{url}: connection error ({type(error).__name__})") from None
        except httpx.HTTPError as error:
            raise BatchError(f"{url}: {type(error).__name__} within timeout_s {self.timeout_s:g} s") from None
        finally:
            self._deadline.at = None
        if answer.status == 429 or answer.status >= 500:
            raise BatchError(f"{url}: http {answer.status}: {answer.detail()}", retry_after=answer.retry_after)
        if answer.status != 200:
            raise EndpointError(
                f"{url} answered http {answer.status}: {answer.detail()}; the endpoint must offer the OpenAI Batch "
                f"API (backend openai_batch); check base_url and ${self.api_key_env} (else use backend openai)"
            )
        return answer

    def _json(self, method: str, path: str, **send: Any) -> dict[str, Any]:
        data = self._api(method, path, **send).data
        if not isinstance(data, dict):
            raise EndpointError(f"{self.base_url}{path}: answered no JSON object; not the OpenAI Batch API")
        return data

    def upload(self, name: str, content: bytes) -> str:
        """POST /v1/files (purpose batch): the uploaded file's id."""
        data = self._json(
            "POST", "/files", data={"purpose": "batch"}, files={"file": (name, content, "application/jsonl")}
        )
        return _id(data, "id", f"{self.base_url}/files")

    def create(self, input_file_id: str) -> dict[str, Any]:
        """POST /v1/batches: the new batch object."""
        body = {"input_file_id": input_file_id, "endpoint": CHAT_URL, "completion_window": COMPLETION_WINDOW}
        return self._json("POST", "/batches", json=body)

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        """GET /v1/batches/{id}: the batch object (status, request_counts, output_file_id, error_file_id)."""
        return self._json("GET", f"/batches/{batch_id}")

    def submitted_with(self, input_file_id: str) -> dict[str, Any] | None:
        """The batch created from ``input_file_id`` among the latest 100 (GET /v1/batches), or None."""
        listed = self._json("GET", "/batches", params={"limit": 100}).get("data")
        for batch in listed if isinstance(listed, list) else []:
            if isinstance(batch, dict) and batch.get("input_file_id") == input_file_id:
                return batch
        return None

    def content(self, file_id: str, limit: int) -> str:
        """GET /v1/files/{id}/content: the file's text, at most ``limit`` bytes."""
        return self._api("GET", f"/files/{file_id}/content", limit=limit).text


def _id(data: dict[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_\-]{1,200}", value):
        raise EndpointError(f"{where}: answered without a usable {name!r} ({_cut(repr(value), 80)})")
    return value


# ------------------------------------------------------------------ durable state: what was submitted


@dataclass
class Submitted:
    """A batch as recorded in the state file: its input file, its id once created, the request keys it holds."""

    model: str
    base_url: str
    request_file: str
    input_file_id: str
    keys: list[str]
    batch_id: str | None = None


class BatchState:
    """``batches.json`` beside the response cache: every batch submitted and not yet merged, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batches: list[Submitted] = []
        if path.exists():
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                self.batches = [Submitted(**entry) for entry in raw["batches"]]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise EndpointError(
                    f"{path}: unreadable batch state ({type(error).__name__}); it lists batches already paid for: "
                    "repair it, or move it away to submit them again"
                ) from None

    def save(self) -> None:
        """Write the state: a temporary file, flushed to disk, renamed over the old one (never half written)."""
        text = json.dumps({"batches": [vars(b) for b in self.batches]}, indent=1, sort_keys=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


# ------------------------------------------------------------------ rounds: one batch per call a conversation is at


class Deferred(Exception):
    """Raised by the discovery ``ask``: the conversation's next call is not answered yet."""


@dataclass
class Round:
    """What one discovery pass found: the requests to send next, by request key."""

    pending: dict[str, ChatRequest] = field(default_factory=dict)


Unit = Callable[[Callable[[ChatRequest], Any]], Any]  # a conversation, given the ``ask`` it calls


def run_batches(client: Any, units: Sequence[Unit], records: Path, label: str = "batch") -> set[str]:
    """Answer every call of ``units`` through batches, round by round, into ``client.cache``; returns the keys no
    batch answered (the stage's own pass sends them online). ``client`` is a ModelClient over an OpenAIBatchBackend.
    """
    from egoeval.backends.client import CallUsage, Completion

    backend: OpenAIBatchBackend = client.backend
    cache = client.cache
    state = BatchState(cache.path.parent / STATE_FILE)
    unanswered: set[str] = set()
    records.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + backend.deadline_s

    def discover(found: Round) -> Callable[[ChatRequest], Completion]:
        def ask(request: ChatRequest) -> Completion:
            key = request_key(backend.cache_name, backend.model, request)
            cached = cache.entry(key)
            if cached is not None:
                served = str(cached[1].get("served_model", ""))
                return Completion(cached[0], "", key, served, CallUsage.from_meta(cached[1]))
            if key not in unanswered:
                found.pending[key] = request
            raise Deferred

        return ask

    number = 0
    while True:
        found = Round()
        for unit in units:
            with contextlib.suppress(Deferred):
                unit(discover(found))
        if not found.pending:
            return unanswered
        number += 1
        mine = [b for b in state.batches if (b.model, b.base_url) == (backend.model, backend.base_url)]
        resumed = [b for b in mine if set(b.keys) & found.pending.keys()]
        for stale in (b for b in mine if b not in resumed):  # every request answered: nothing to wait for
            state.batches.remove(stale)
        covered = {key for b in resumed for key in b.keys}
        fresh = {k: r for k, r in found.pending.items() if k not in covered}
        if resumed:
            print(f"{label}: round {number}: resuming {len(resumed)} submitted batch(es)", file=sys.stderr)
        batches = resumed + [_submit(backend, state, records, chunk) for chunk in _chunks(fresh, backend.max_requests)]
        for batch in batches:
            _ensure_created(backend, state, batch)
        print(
            f"{label}: round {number}: {len(found.pending)} requests in {len(batches)} batch(es), waiting",
            file=sys.stderr,
        )
        finished = _wait(backend, batches, deadline, label, state)
        for batch, answer in zip(batches, finished, strict=True):
            missing = _merge(backend, cache, batch, answer, found.pending, label)
            unanswered |= missing
            for key in sorted(set(batch.keys) - missing):
                stored = cache.entry(key)
                if stored is not None:
                    client.count_batched(key, stored[1])
            state.batches.remove(batch)
            state.save()


def _chunks(requests: dict[str, ChatRequest], size: int) -> Iterable[dict[str, ChatRequest]]:
    keys = sorted(requests)
    for start in range(0, len(keys), size):
        yield {key: requests[key] for key in keys[start : start + size]}


def request_file_text(backend: OpenAIBatchBackend, requests: dict[str, ChatRequest]) -> str:
    """The batch's input file: one JSONL line per request, ``custom_id`` its request key, ``body`` exactly what the
    online backend sends; the key redacted (no request holds it; redacted in case one ever did)."""
    lines = [
        json.dumps(
            {"custom_id": key, "method": "POST", "url": CHAT_URL, "body": request_body(backend.model, request)},
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        )  # as httpx encodes a JSON body: the body's bytes in the file are the bytes an online call sends
        for key, request in requests.items()
    ]
    key = os.environ.get(backend.api_key_env) if backend.api_key_env else None
    return redact("\n".join(lines) + "\n", key)


def _submit(
    backend: OpenAIBatchBackend, state: BatchState, records: Path, requests: dict[str, ChatRequest]
) -> Submitted:
    """Write the request file, upload it and record its file id (the batch is created by ``_ensure_created``)."""
    content = request_file_text(backend, requests).encode("utf-8")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend.model)[:60]
    path = records / f"{safe}-{hashlib.sha256(content).hexdigest()[:16]}.jsonl"
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(content)
    os.replace(temporary, path)
    file_id = backend.upload(path.name, content)
    batch = Submitted(backend.model, backend.base_url, str(path), file_id, list(requests))
    state.batches.append(batch)
    state.save()  # before the batch exists: a crash now finds it by its input file
    return batch


def _ensure_created(backend: OpenAIBatchBackend, state: BatchState, batch: Submitted) -> None:
    """Create the batch unless it was (a crash between creating it and recording its id: found by its input file)."""
    if batch.batch_id is not None:
        return
    created = backend.submitted_with(batch.input_file_id) or backend.create(batch.input_file_id)
    batch.batch_id = _id(created, "id", f"{backend.base_url}/batches")
    state.save()


def _wait(
    backend: OpenAIBatchBackend, batches: list[Submitted], deadline: float, label: str, state: BatchState
) -> list[dict[str, Any]]:
    """Poll every ``poll_s`` until each batch is done, printing each batch's status and counts when they change;
    TransientFailure at the deadline (the ids stay recorded)."""
    latest: dict[str, dict[str, Any]] = {}
    shown = ""
    while True:
        for batch in batches:
            if latest.get(str(batch.batch_id), {}).get("status") not in DONE:
                latest[str(batch.batch_id)] = backend.retrieve(str(batch.batch_id))
        line = "; ".join(_progress(batch_id, answer) for batch_id, answer in latest.items())
        if line != shown:
            print(f"{label}: {line}", file=sys.stderr)
            shown = line
        waiting = [batch_id for batch_id, answer in latest.items() if answer.get("status") not in DONE]
        if not waiting:
            return [latest[str(b.batch_id)] for b in batches]
        if time.monotonic() + backend.poll_s > deadline:
            raise TransientFailure(
                f"{label}: batches {', '.join(waiting)} not done within batch_deadline_s ({backend.deadline_s:g} s); "
                f"their ids are recorded in {state.path}: run again to resume them (nothing is submitted twice)"
            )
        time.sleep(backend.poll_s)


def _progress(batch_id: str, answer: dict[str, Any]) -> str:
    """``<id> <status> <completed>/<total>`` (counts as the endpoint reports them)."""
    counts = answer.get("request_counts") if isinstance(answer.get("request_counts"), dict) else {}
    status = _cut(str(answer.get("status")), 40)
    return f"{batch_id} {status} {counts.get('completed', '?')}/{counts.get('total', '?')}"


def _merge(
    backend: OpenAIBatchBackend,
    cache: Any,
    batch: Submitted,
    answer: dict[str, Any],
    requests: dict[str, ChatRequest],
    label: str,
) -> set[str]:
    """Store every reply of a finished batch in the cache, read as the online backend reads a reply; returns the
    batch's keys without one (expired, failed, an error status, a reply that is no completion)."""
    asked = set(batch.keys)
    limit = len(asked) * (reply_byte_limit(max(r.decoding.max_tokens for r in requests.values())) + LINE_ENVELOPE_BYTES)
    answered: set[str] = set()
    output = answer.get("output_file_id")
    text = (
        backend.content(_id(answer, "output_file_id", f"{backend.base_url}/batches/{batch.batch_id}"), limit)
        if output
        else ""
    )
    for line in text.splitlines():
        try:
            row = json.loads(line)
            key, response = row["custom_id"], row.get("response") or {}
            status, body = int(response["status_code"]), response["body"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # a line that is no result: its request is sent online
        if key not in asked or key not in requests or key in answered:
            continue
        payload = json.dumps(body).encode("utf-8")
        reply_text = _Answer.read(status, httpx.Headers({"Content-Type": "application/json"}), payload, None)
        try:
            reply = backend._interpret(reply_text, requests[key])
        except BackendError:
            continue
        meta = {"backend": backend.name, "model": backend.model, "served_model": reply.served_model}
        usage = (("prompt_tokens", reply.prompt_tokens), ("completion_tokens", reply.completion_tokens))
        meta |= {name: n for name, n in usage if n is not None}
        cache.put(key, reply.text, meta | {"batch": batch.batch_id})
        answered.add(key)
    missing = asked - answered
    if missing:
        print(
            f"{label}: batch {batch.batch_id} ({answer.get('status')}): {len(missing)} of {len(asked)} requests "
            "unanswered; they are sent online",
            file=sys.stderr,
        )
    return missing
