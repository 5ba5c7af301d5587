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
import fcntl
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import httpx

from egoeval.backends.base import ChatRequest, ModelEntry, redact, request_key
from egoeval.backends.openai import (
    CONNECT_TIMEOUT_S,
    EndpointAnswer,
    OpenAIBackend,
    reply_byte_limit,
    request_body,
    snippet,
)
from egoeval.core.errors import (
    BatchError,
    BatchNotFound,
    CallFailed,
    EndpointDown,
    EndpointError,
    ReplyDeferred,
    TransientFailure,
)

CHAT_URL = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"  # the only one the Batch API offers
STATE_FILE = "batches.json"  # beside the response cache: the batches submitted and not yet merged
DONE = {"completed", "failed", "expired", "cancelled"}  # a batch in any of these states changes no more
API_BYTES = 1 << 20  # the most bytes kept of a Batch API answer other than a results file
LINE_ENVELOPE_BYTES = 4096  # a results line's JSON around the chat completion
PROGRESS_EVERY_S = 10.0  # the most often a progress line is printed
PROGRESS_BATCHES = 4  # the most batches a progress line names (the others are counted)
MAX_COUNT = 10**9  # a request count beyond this (or negative, or not an integer) is not shown
STATUS = re.compile(r"[a-z_]{1,20}")  # a batch status as the Batch API spells one


class BatchEntry(ModelEntry, Protocol):
    """A model entry with the batch settings (validated by the settings)."""

    batch_poll_s: float
    batch_deadline_s: float
    batch_max_requests: int


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
        connections: int,
        *,
        poll_s: float,
        deadline_s: float,
        max_requests: int,
    ) -> None:
        super().__init__(model, base_url, api_key_env, timeout_s, connections)
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

    def _api(self, method: str, path: str, limit: int = API_BYTES, **send: Any) -> EndpointAnswer:
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
                answer = EndpointAnswer.read(streamed.status_code, streamed.headers, b"".join(chunks), key)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            if not self._answered:
                raise EndpointDown(
                    f"{url}: nothing answers at this address ({snippet(redact(str(error), key), 120)}; connect timeout "
                    f"{CONNECT_TIMEOUT_S:g} s): check base_url of model {self.model!r}"
                ) from None
            raise BatchError(f"{url}: connection error ({type(error).__name__})") from None
        except httpx.HTTPError as error:
            raise BatchError(f"{url}: {type(error).__name__} within timeout_s {self.timeout_s:g} s") from None
        finally:
            self._deadline.at = None
        if answer.status == 429 or answer.status >= 500:
            raise BatchError(f"{url}: http {answer.status}: {answer.detail()}", retry_after=answer.retry_after)
        if answer.status != 200:
            raise (BatchNotFound if answer.status == 404 else EndpointError)(
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
        raise EndpointError(f"{where}: answered without a usable {name!r} ({snippet(repr(value), 80)})")
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
    """``batches.json`` beside the response cache: every batch submitted and not yet merged, by every process that
    uses the cache. Each change re-reads the record under an exclusive lock (``batches.json.lock``), applies itself
    and writes the record atomically, so concurrent shards add to one record and a crash never half writes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batches: list[Submitted] = []
        self.reload()

    def _read(self) -> list[Submitted]:
        if not self.path.exists():
            return []
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return [Submitted(**entry) for entry in raw["batches"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise EndpointError(
                f"{self.path}: unreadable batch state ({type(error).__name__}); it lists batches already paid for: "
                "repair it, or move it away to submit them again"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def reload(self) -> None:
        """The record as every process left it."""
        with self._locked():
            self.batches = self._read()

    def change(self, apply: Callable[[list[Submitted]], None]) -> None:
        """Re-read the record, ``apply`` a change to its list, write it back: all under the lock."""
        with self._locked():
            batches = self._read()
            apply(batches)
            text = json.dumps({"batches": [vars(b) for b in batches]}, indent=1, sort_keys=True)
            temporary = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
            self.batches = batches

    def add(self, batch: Submitted) -> None:
        self.change(lambda batches: batches.append(batch))

    def record_id(self, batch: Submitted) -> None:
        """Record ``batch``'s id (the entry with its input file)."""

        def apply(batches: list[Submitted]) -> None:
            for entry in batches:
                if entry.input_file_id == batch.input_file_id:
                    entry.batch_id = batch.batch_id

        self.change(apply)

    def drop(self, done: Callable[[Submitted], bool]) -> None:
        """Remove every entry ``done`` says is finished with."""
        self.change(lambda batches: batches.__setitem__(slice(None), [b for b in batches if not done(b)]))


# ------------------------------------------------------------------ rounds: one batch per call a conversation is at


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
            raise ReplyDeferred

        return ask

    number = 0
    while True:
        found = Round()
        for unit in units:
            with contextlib.suppress(ReplyDeferred):
                unit(discover(found))
        if not found.pending:
            return unanswered
        backend.api_key()  # a missing key variable stops the run before a request file is written or sent
        number += 1
        state.reload()  # what every process (another shard) recorded so far

        def finished(batch: Submitted) -> bool:  # this endpoint's batch whose every request is answered
            mine = (batch.model, batch.base_url) == (backend.model, backend.base_url)
            return mine and all(cache.entry(key) is not None for key in batch.keys)

        state.drop(finished)
        mine = [b for b in state.batches if (b.model, b.base_url) == (backend.model, backend.base_url)]
        resumed = [b for b in mine if set(b.keys) & found.pending.keys()]
        covered = {key for b in mine for key in b.keys}  # another shard's batch too: never submitted twice
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
        answers = _wait(backend, batches, deadline, label, state)
        key = backend.api_key()
        for batch, answer in zip(batches, answers, strict=True):
            missing = _merge(backend, cache, batch, answer, found.pending, label, key)
            unanswered |= missing
            for key_answered in sorted(set(batch.keys) - missing):
                stored = cache.entry(key_answered)
                if stored is not None:
                    client.count_batched(key_answered, stored[1])
            if set(batch.keys) <= found.pending.keys():  # else another shard's requests are in it: it merges them
                state.drop(lambda entry, merged=batch: entry.input_file_id == merged.input_file_id)


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
    return redact("\n".join(lines) + "\n", backend.api_key())


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
    state.add(batch)  # before the batch exists: a crash now finds it by its input file
    return batch


def _ensure_created(backend: OpenAIBatchBackend, state: BatchState, batch: Submitted) -> None:
    """Create the batch unless it was (a crash between creating it and recording its id: found by its input file);
    the endpoint's batch must be the one made from this input file."""
    if batch.batch_id is not None:
        return
    created = backend.submitted_with(batch.input_file_id) or backend.create(batch.input_file_id)
    where = f"{backend.base_url}/batches"
    batch_id = _id(created, "id", where)
    _check_ours(created, batch_id, batch, where)
    batch.batch_id = batch_id
    state.record_id(batch)


def _check_ours(answer: dict[str, Any], batch_id: str, batch: Submitted, where: str) -> None:
    """Refuse (EndpointError, exit 2) a batch object that is not the batch ``batch`` records: another id or another
    input file; nothing of it is merged."""
    said_id, said_input = answer.get("id"), answer.get("input_file_id")
    if said_id == batch_id and said_input == batch.input_file_id:
        return
    raise EndpointError(
        f"{where} answered a batch that is not this run's: id {snippet(repr(said_id), 80)}, input_file_id "
        f"{snippet(repr(said_input), 80)}, where batch {batch_id} was created from input file {batch.input_file_id} "
        f"({batch.request_file}); none of its replies is kept. Check base_url of model {batch.model!r} "
        "(a proxy or another service answering there?)"
    )


def _wait(
    backend: OpenAIBatchBackend, batches: list[Submitted], deadline: float, label: str, state: BatchState
) -> list[dict[str, Any]]:
    """Poll every ``poll_s`` until each batch is done; TransientFailure at the deadline (the ids stay recorded).
    Each answer must be the batch polled (``_check_ours``); a batch the endpoint does not know stops the run naming the
    state file that records it. Progress: one sanitised, bounded line when it changed, at most every
    PROGRESS_EVERY_S seconds."""
    latest: dict[str, dict[str, Any]] = {}
    shown, shown_at = "", -PROGRESS_EVERY_S
    while True:
        for batch in batches:
            batch_id = str(batch.batch_id)
            if latest.get(batch_id, {}).get("status") not in DONE:
                latest[batch_id] = _retrieve(backend, state, batch)
        waiting = [batch_id for batch_id, answer in latest.items() if answer.get("status") not in DONE]
        line = _progress(latest)
        now = time.monotonic()
        if line != shown and (now - shown_at >= PROGRESS_EVERY_S or not waiting):
            print(f"{label}: {line}", file=sys.stderr)
            shown, shown_at = line, now
        if not waiting:
            return [latest[str(b.batch_id)] for b in batches]
        if now + backend.poll_s > deadline:
            raise TransientFailure(
                f"{label}: batches {', '.join(waiting)} not done within batch_deadline_s ({backend.deadline_s:g} s); "
                f"their ids are recorded in {state.path}: run again to resume them (nothing is submitted twice)"
            )
        time.sleep(backend.poll_s)


def _retrieve(backend: OpenAIBatchBackend, state: BatchState, batch: Submitted) -> dict[str, Any]:
    """The batch object of a recorded batch, checked to be that batch."""
    batch_id = str(batch.batch_id)
    where = f"{backend.base_url}/batches/{batch_id}"
    try:
        answer = backend.retrieve(batch_id)
    except BatchNotFound:
        raise EndpointError(
            f"{state.path}: records batch {batch_id} (input file {batch.input_file_id}, requests in "
            f"{batch.request_file}), which {where} does not know (http 404): a stale state, or another endpoint or key "
            f"than it was submitted with. If base_url and ${backend.api_key_env} are the ones it was submitted with, "
            f"the batch is lost: delete its entry from {state.path} and run again (its requests are submitted anew); "
            "otherwise restore them to resume it"
        ) from None
    _check_ours(answer, batch_id, batch, where)
    return answer


def _count(value: Any) -> str:
    """A request count as the endpoint reported it when it is one (a non-negative integer within MAX_COUNT), else ?."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
    return str(value) if ok else "?"


def _progress(latest: dict[str, dict[str, Any]]) -> str:
    """``<id> <status> <completed>/<total>`` per batch (at most PROGRESS_BATCHES; the others counted), built only
    from what passes as a status and a count (ids were checked when recorded): no terminal escapes, bounded."""
    shown = []
    for batch_id, answer in list(latest.items())[:PROGRESS_BATCHES]:
        status = answer.get("status")
        status = status if isinstance(status, str) and STATUS.fullmatch(status) else "?"
        counts = answer.get("request_counts")
        counts = counts if isinstance(counts, dict) else {}
        shown.append(f"{batch_id} {status} {_count(counts.get('completed'))}/{_count(counts.get('total'))}")
    more = len(latest) - len(shown)
    return "; ".join(shown) + (f"; and {more} more batch(es)" if more > 0 else "")


def _merge(
    backend: OpenAIBatchBackend,
    cache: Any,
    batch: Submitted,
    answer: dict[str, Any],
    requests: dict[str, ChatRequest],
    label: str,
    key: str | None,
) -> set[str]:
    """Store every reply of a finished batch that answers one of its requests once, read as the online backend reads
    a reply (the key redacted); returns the batch's keys without one (expired, failed, an error status, a reply that
    is no completion, a request answered twice with different replies). Malformed lines, replies for requests never
    asked and conflicting duplicates are counted and said; a results file none of whose lines answers one of the
    batch's requests is not this batch's: refused (EndpointError), naming it."""
    asked = set(batch.keys)
    limit = len(asked) * (reply_byte_limit(max(r.decoding.max_tokens for r in requests.values())) + LINE_ENVELOPE_BYTES)
    output = answer.get("output_file_id")
    where = f"{backend.base_url}/batches/{batch.batch_id}"
    file_id = _id(answer, "output_file_id", where) if output else None
    text = backend.content(file_id, limit) if file_id else ""
    replies: dict[str, list[tuple[int, Any]]] = {}
    malformed = unknown = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            custom_id, response = row["custom_id"], row.get("response") or {}
            status, body = int(response["status_code"]), response["body"]
            if not isinstance(custom_id, str):
                raise TypeError("custom_id")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            malformed += 1  # a line that is no result: its request is sent online
            continue
        if custom_id not in asked:
            unknown += 1
            continue
        if custom_id not in requests:
            continue  # another shard's request in a batch this process resumed: that shard merges it
        replies.setdefault(custom_id, []).append((status, body))
    if file_id and unknown and not replies:
        raise EndpointError(
            f"{backend.base_url}/files/{file_id}/content, the results of batch {batch.batch_id}, answers none of "
            f"the {len(asked)} requests that batch holds ({unknown} replies for requests never asked): not this "
            f"run's batch; none of it is kept. Check base_url of model {batch.model!r}"
        )
    conflicting = {k for k, got in replies.items() if len({json.dumps(r, sort_keys=True) for r in got}) > 1}
    answered: set[str] = set()
    for custom_id, got in sorted(replies.items()):
        if custom_id in conflicting:
            continue
        status, body = got[0]
        payload = json.dumps(body).encode("utf-8")
        reply_text = EndpointAnswer.read(status, httpx.Headers({"Content-Type": "application/json"}), payload, key)
        try:
            reply = backend._interpret(reply_text, requests[custom_id])
        except CallFailed:
            continue
        meta = {"backend": backend.name, "model": backend.model, "served_model": reply.served_model}
        usage = (("prompt_tokens", reply.prompt_tokens), ("completion_tokens", reply.completion_tokens))
        meta |= {name: n for name, n in usage if n is not None}
        cache.put(custom_id, reply.text, meta | {"batch": batch.batch_id})
        answered.add(custom_id)
    missing = (asked & requests.keys()) - answered
    said = [
        f"{n} {what}"
        for n, what in (
            (malformed, "malformed result line(s)"),
            (unknown, "reply(ies) for requests never asked (dropped)"),
            (len(conflicting), "request(s) answered twice with different replies (both dropped)"),
        )
        if n
    ]
    if missing or said:
        status = answer.get("status") if answer.get("status") in DONE else "?"
        print(
            f"{label}: batch {batch.batch_id} ({status}): {'; '.join([*said, ''])}{len(missing)} of "
            f"{len(asked & requests.keys())} "
            "requests unanswered; they are sent online",
            file=sys.stderr,
        )
    return missing
