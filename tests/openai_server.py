"""A real OpenAI-compatible chat completions server on 127.0.0.1, for tests and benchmarks (bench/ imports it
from here; ``python tests/openai_server.py`` serves in the foreground).

``OpenAIServer`` runs http.server.ThreadingHTTPServer in a background thread on an ephemeral port. It has a fixed
latency, a scripted answer policy (``PositionPolicy`` answers by position alone, e.g. always option k;
``KeyedPolicy`` answers EgoNormia questions correctly from an answer key by reading the displayed options back out
of the prompt; a policy returns the reply text, a ``Served`` reply with a refusal field or a finish reason beside
its content, or raises ``Fault``; a completion reports ``usage``, ``prompt_usage``, its images counted by the
server's ``token_rule``), and fault injection: by schedule (the n-th request overall), per distinct request (its
first k attempts) or at random by fraction. Replies name the requested model as served unless ``served_model`` says
otherwise; ``echo_auth`` starts every completion with the request's Authorization header, as a careless proxy might.
It records every request (headers and JSON body: several ``image_url`` parts in one message, and ``video_url`` parts
as vLLM accepts them) and the peak number of requests in flight.

It also offers the OpenAI Batch API (``POST /v1/files``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]``,
``GET /v1/files/{id}/content``): each line of a batch is answered as the same request sent online would be (the
same policy and fault injection, recorded with ``via="batch"``), ``batch_turnaround_s`` after the batch was
created; ``batch_outcomes[n]`` makes the n-th batch ``expired`` (its second half unanswered, in the error file as
``batch_expired``) or ``failed`` (nothing answered). ``batches_created`` counts the batches created. Hostile
Batch API behaviours, as options: ``batch_rewrite`` rewrites every batch object GET /v1/batches/{id} answers (another
batch's id or input file, absurd counts, terminal escapes in its status), ``results_rewrite`` rewrites a finished
batch's result rows (a row given as a string is written as that raw line: malformed lines, duplicates, replies for
requests never asked), ``forget_batches`` answers 404 for every batch id, and ``echo_auth`` echoes the Authorization
header the batch was created with into every result line and error line, JSON ``\\u``-escaped and URL-encoded.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import email.policy
import hashlib
import json
import random
import re
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FAULTS = (
    "429",
    "400",
    "401",
    "403",
    "404",
    "500",
    "503",
    "drop",
    "timeout",
    "malformed",
    "empty",
    "html",
    "refusal",
    "trickle",  # a reply body that never ends: a byte every 0.1 s
    "trickle_headers",  # the status line and headers a byte every 0.1 s
    "gzip",  # 200, Content-Encoding gzip, a body that is not gzip
    "error_object",  # 200 whose body is an error object, not a completion
    "huge",  # a valid completion of huge_bytes characters, whatever max_tokens asked
    "not_utf8",  # 200, a completion whose JSON body holds bytes that are not UTF-8
)
Policy = Callable[[dict[str, Any]], "str | Served"]
_OPTION = re.compile(r"^([1-9])\. (.*)$", re.MULTILINE)
_OFFICIAL_OPTIONS = re.compile(r"^\s*(Behavior|Justification) options: (\[.*\])$", re.MULTILINE)


@dataclass(frozen=True)
class Recorded:
    headers: dict[str, str]
    body: dict[str, Any]
    fault: str | None
    via: str = "online"  # online | batch
    raw: bytes = b""  # the body as sent (online requests)


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message (string content or its text parts)."""
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "\n".join(part["text"] for part in content if part.get("type") == "text")
    return ""


@dataclass(frozen=True)
class Served:
    """A policy's reply with more than content: a ``refusal`` field beside it, or another finish reason."""

    content: str | None
    refusal: str | None = None
    finish_reason: str = "stop"
    usage: Mapping[str, Any] | None = None  # the ``usage`` the reply reports instead of the counted one ({}: none)


class Fault(Exception):
    """Raised by a policy: the server answers that request with the fault ``kind`` (one of ``FAULTS``)."""

    def __init__(self, kind: str) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; known: {FAULTS}")
        super().__init__(kind)
        self.kind = kind


class PositionPolicy:
    """Answers by position alone, never reading the options: option p (1-based) with probability
    ``weights[p - 1]``, drawn from a hash of the seed and the question's text (the same question, the same answer);
    a question that takes several answers gets the drawn position as a one-element list. One weight: always
    option 1. Official-protocol prompts are answered the official way (the number last), others with ``Answer:``;
    a prompt without options (a description request) gets a short description."""

    def __init__(self, weights: Sequence[float], seed: int = 0) -> None:
        if not weights or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"weights must be non-negative with a positive sum, got {list(weights)}")
        self.weights = list(weights)
        self.seed = seed

    @classmethod
    def constant(cls, option: int) -> PositionPolicy:
        """Always option ``option`` (1-based)."""
        return cls([0.0] * (option - 1) + [1.0])

    def __call__(self, body: dict[str, Any]) -> str:
        text = last_user_text(body)
        official = _OFFICIAL_OPTIONS.search(text) is not None
        if not official and not _OPTION.search(text):
            return "A person stands in a kitchen talking to a friend."
        draw = random.Random(hashlib.sha256(f"{self.seed}\0{text}".encode()).digest())
        pick = draw.choices(range(1, len(self.weights) + 1), self.weights)[0]
        several = "PYTHON LIST" in text if official else "Answer: [" in text
        answer = f"[{pick}]" if several else str(pick)
        return f"Let me think step by step.\n{answer if official else 'Answer: ' + answer}"


default_policy = PositionPolicy([1.0])  # always option 1 (or [1] when several may be picked)


class KeyedPolicy:
    """Answers correctly from an answer key: each clip is recognised by the set of its displayed options.

    ``clips``: per clip, its displayed action texts, the correct action text, the displayed justification
    texts, the correct justification text and the sensible action texts (all as the prompt shows them).
    Prompts of the official protocol (options as a Python list after ``Behavior options:`` or
    ``Justification options:``) are answered the official way: the option's number last, or a list.
    """

    def __init__(self, clips: Iterable[Mapping[str, Any]]) -> None:
        self._single: dict[frozenset[str], str] = {}
        self._multi: dict[frozenset[str], set[str]] = {}
        for clip in clips:
            self._single[frozenset(clip["behaviors"])] = clip["correct_behavior"]
            self._single[frozenset(clip["justifications"])] = clip["correct_justification"]
            self._multi[frozenset(clip["behaviors"])] = set(clip["sensible"])

    @classmethod
    def from_items(cls, items: pd.DataFrame) -> KeyedPolicy:
        """The answer key of an items table (``egoeval.egonormia.schema`` columns), options as the prompts show them."""
        from egoeval.egonormia.answers import displayed_options

        clips = []
        for item in items.itertuples(index=False):
            shown = displayed_options(item.behaviors, range(5))
            reasons = displayed_options(item.justifications, range(5))
            clips.append(
                {
                    "behaviors": shown,
                    "justifications": reasons,
                    "correct_behavior": shown[item.correct_idx],
                    "correct_justification": reasons[item.correct_idx],
                    "sensible": [shown[k] for k in item.sensible_idx],
                }
            )
        return cls(clips)

    def __call__(self, body: dict[str, Any]) -> str:
        text = last_user_text(body)
        listed = _OFFICIAL_OPTIONS.search(text)
        if listed:
            from egoeval.egonormia.answers import NONE_OF_THE_ABOVE

            stored = [o or NONE_OF_THE_ABOVE for o in ast.literal_eval(listed.group(2))]
            shown = frozenset(stored)
            if "PYTHON LIST" in text:
                picked = [n + 1 for n, option in enumerate(stored) if option in self._multi[shown]]
                return f"Reasoning about each option.\n{picked}"
            return f"Reasoning step by step.\n{stored.index(self._single[shown]) + 1}"
        options = {int(n): option.strip() for n, option in _OPTION.findall(text)}
        shown = frozenset(options.values())
        if "Answer: [" in text:
            picked = sorted(n for n, option in options.items() if option in self._multi[shown])
            return f"Reasoning about each option.\nAnswer: [{', '.join(map(str, picked))}]"
        correct = self._single[shown]
        return f"Reasoning step by step.\nAnswer: {next(n for n, o in options.items() if o == correct)}"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet when a client hangs up mid-reply (a client that cuts a reply it will not read does)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class OpenAIServer:
    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        policy: Policy = default_policy,
        schedule: Sequence[str | None] = (),
        per_request: Sequence[str] = (),
        fault_rate: float = 0.0,
        fault_kinds: Sequence[str] = ("500",),
        retry_after: float | None = 0.0,
        hang_s: float = 2.0,
        seed: int = 0,
        served_model: str | None = None,
        echo_auth: bool = False,
        huge_bytes: int = 50_000_000,
        batch_turnaround_s: float = 0.0,
        batch_outcomes: Sequence[str] = (),
        batch_rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        results_rewrite: Callable[[list[dict[str, Any]]], list[Any]] | None = None,
        forget_batches: bool = False,
        token_rule: str = "openai",
    ) -> None:
        """``schedule[n]`` is the fault of the n-th request overall; ``per_request[k]`` the fault of the k-th
        attempt of each distinct request body; otherwise a fault from ``fault_kinds`` with ``fault_rate``.
        ``token_rule`` is how its ``usage`` counts an image (``egoeval.egonormia.settings.IMAGE_RULES``)."""
        for fault in [*schedule, *per_request, *fault_kinds]:
            if fault is not None and fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; known: {FAULTS}")
        self.latency_s = latency_s
        self.policy = policy
        self.schedule = list(schedule)
        self.per_request = list(per_request)
        self.fault_rate = fault_rate
        self.fault_kinds = list(fault_kinds)
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.served_model = served_model
        self.echo_auth = echo_auth
        self.huge_bytes = huge_bytes
        self.batch_turnaround_s = batch_turnaround_s
        self.batch_outcomes = list(batch_outcomes)
        self.batch_rewrite = batch_rewrite
        self.results_rewrite = results_rewrite
        self.forget_batches = forget_batches
        self.token_rule = token_rule
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batches_created = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[Recorded] = []
        self._httpd = _Server(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give a client (``.../v1``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> OpenAIServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _admit(
        self, headers: dict[str, str], body: dict[str, Any], via: str = "online", raw: bytes = b""
    ) -> str | None:
        """Record the request and choose its fault (None: answer normally)."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock:
            index = len(self.requests)
            attempt = self._attempts.get(digest, 0)
            self._attempts[digest] = attempt + 1
            if index < len(self.schedule):
                fault = self.schedule[index]
            elif attempt < len(self.per_request):
                fault = self.per_request[attempt]
            elif self.fault_rate and self._rng.random() < self.fault_rate:
                fault = self._rng.choice(self.fault_kinds)
            else:
                fault = None
            self.requests.append(Recorded(headers, body, fault, via, raw))
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        return fault

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # ------------------------------------------------------------------ the Batch API

    def upload(self, content: bytes) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{len(self.files)}"
            self.files[file_id] = content
        return {"id": file_id, "object": "file", "bytes": len(content), "purpose": "batch", "created_at": 0}

    def create_batch(self, request: dict[str, Any], auth: str = "") -> tuple[int, dict[str, Any]]:
        """(status, batch object or error) of POST /v1/batches; ``auth``: the Authorization header it came with."""
        if request.get("input_file_id") not in self.files:
            return 400, {"error": {"message": f"no such file {request.get('input_file_id')!r}"}}
        if request.get("endpoint") != "/v1/chat/completions" or request.get("completion_window") != "24h":
            return 400, {"error": {"message": "endpoint must be /v1/chat/completions, completion_window 24h"}}
        with self._lock:
            number = self.batches_created
            self.batches_created += 1
            outcome = self.batch_outcomes[number] if number < len(self.batch_outcomes) else "completed"
            batch = {
                "id": f"batch_{number}",
                "object": "batch",
                "endpoint": "/v1/chat/completions",
                "input_file_id": request["input_file_id"],
                "completion_window": "24h",
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": time.time(),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "outcome": outcome,
                "auth": auth,
            }
            self.batches[batch["id"]] = batch
        return 200, self._public(batch)

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {name: value for name, value in batch.items() if name not in {"outcome", "auth"}}

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        """GET /v1/batches/{id}: the batch, answered once its turnaround has passed."""
        with self._lock:
            batch = None if self.forget_batches else self.batches.get(batch_id)
        if batch is None:
            return None
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress" and time.time() >= batch["created_at"] + self.batch_turnaround_s:
            self._finish(batch)
        return self.batch_rewrite(self._public(batch)) if self.batch_rewrite else self._public(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        lines = [json.loads(line) for line in self.files[batch["input_file_id"]].decode().splitlines() if line]
        outcome = batch["outcome"]
        answered = [] if outcome == "failed" else lines[: len(lines) // 2] if outcome == "expired" else lines
        output, errors = [], []
        for line in answered:
            fault = self._admit({}, line["body"], via="batch")
            self._done()
            status, body = _batch_reply(self, fault, line["body"])
            output.append(
                {"id": f"batch_req_{len(output)}", "custom_id": line["custom_id"], "error": None}
                | {"response": {"status_code": status, "request_id": "req", "body": body}}
            )
        for line in lines[len(answered) :] if outcome == "expired" else []:
            error = {"code": "batch_expired", "message": "This request could not be executed before the window"}
            errors.append({"id": "batch_req_x", "custom_id": line["custom_id"], "response": None, "error": error})
        ok = sum(1 for row in output if row["response"]["status_code"] == 200)
        if self.echo_auth:
            output, errors = _echoed(output, batch["auth"]), _echoed(errors, batch["auth"])
        if self.results_rewrite:
            output = self.results_rewrite(output)
        with self._lock:
            for name, rows in (("output_file_id", output), ("error_file_id", errors)):
                if rows:
                    file_id = f"file-{len(self.files)}"
                    self.files[file_id] = b"".join(_line(row, batch["auth"] if self.echo_auth else "") for row in rows)
                    batch[name] = file_id
            batch["request_counts"] = {"total": len(lines), "completed": ok, "failed": len(lines) - ok}
            batch["status"] = outcome
            if outcome == "failed":
                batch["errors"] = {"object": "list", "data": [{"code": "invalid", "message": "injected failure"}]}


def _echoed(rows: list[dict[str, Any]], auth: str) -> list[dict[str, Any]]:
    """Result or error rows that quote ``auth``: raw in each completion's content and error message (JSON-escaped by
    ``_line``) and URL-encoded beside it, as a careless proxy that logs its requests into replies might."""
    quoted = f"Called with {auth} (as a URL: ?auth={urllib.parse.quote(auth, safe='')})."
    for row in rows:
        body = (row.get("response") or {}).get("body") or {}
        for choice in body.get("choices") or []:
            message = choice.get("message") or {}
            if isinstance(message.get("content"), str):
                message["content"] = f"{quoted}\n{message['content']}"
        for error in (body.get("error"), row.get("error")):
            if isinstance(error, dict):
                error["message"] = f"{error.get('message')} {quoted}"
    return rows


def _line(row: Any, auth: str) -> bytes:
    """One line of a batch's results or errors file; a string row as given; ``auth`` written JSON \\u-escaped."""
    if isinstance(row, str):
        return (row + "\n").encode()
    text = json.dumps(row)
    if auth:
        token = auth.removeprefix("Bearer ")
        text = text.replace(token, "".join(f"\\u{ord(c):04x}" for c in token))
    return (text + "\n").encode()


def _batch_reply(server: OpenAIServer, fault: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A batch line's (status_code, body): what the same request sent online gets (a fault as its error status)."""
    model = server.served_model or str(body.get("model"))
    if fault is None:
        try:
            reply = server.policy(body)
        except Fault as chosen:
            fault = chosen.kind
        else:
            served = reply if isinstance(reply, Served) else Served(reply)
            return 200, _completion(model, served, prompt_usage(body, server.token_rule))
    if fault == "refusal":
        return 200, _completion(model, Served(None, "I cannot help with that."), prompt_usage(body, server.token_rule))
    status = int(fault) if fault.isdigit() else 500
    return status, {"error": {"message": f"injected {fault}"}}


def prompt_usage(body: Mapping[str, Any], rule: str = "openai") -> int:
    """The prompt tokens this server reports: text at 4 characters a token, each image by ``rule`` (OpenAI's for
    the gpt-4o class, or Qwen2-VL's image processor), each ``video_url`` clip as vLLM feeds it to Qwen2-VL
    (``egoeval.egonormia.estimate``), as an endpoint's ``usage`` counts them."""
    import base64
    import io

    from PIL import Image

    from egoeval.egonormia.estimate import CHARS_PER_TOKEN, video_tokens
    from egoeval.egonormia.settings import IMAGE_RULES
    from egoeval.video import mp4_shape

    chars, tokens = 0, 0
    for message in body.get("messages") or []:
        content = message.get("content")
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if part.get("type") == "text":
                chars += len(part.get("text") or "")
            elif part.get("type") == "image_url":
                data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                with Image.open(io.BytesIO(data)) as image:
                    tokens += IMAGE_RULES.get(rule)(*image.size)
            elif part.get("type") == "video_url":  # vLLM's video content part: a data URL of an MP4
                tokens += video_tokens(*mp4_shape(base64.b64decode(part["video_url"]["url"].split(",", 1)[1])))
    return tokens + -(-chars // CHARS_PER_TOKEN)


def _completion(model: str, reply: Served, prompt_tokens: int | None = None) -> dict[str, Any]:
    usage = {}
    if prompt_tokens is not None:
        completion_tokens = -(-len(reply.content or "") // 4)
        usage = {"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
    if reply.usage is not None:
        usage = {"usage": dict(reply.usage)} if reply.usage else {}
    return usage | {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
                "finish_reason": reply.finish_reason,
            }
        ],
    }


def _trickle(write: Callable[[bytes], None], payload: bytes, seconds: float) -> None:
    """Send ``payload`` a byte every 0.1 s for at most ``seconds``."""
    for byte in payload[: int(seconds * 10)]:
        write(bytes([byte]))
        time.sleep(0.1)


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        disable_nagle_algorithm = True  # header and body go out in separate writes

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

        def _send(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
            headers = {"Content-Type": "application/json", **(headers or {})}
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v1/batches":
                with server._lock:
                    listed = [server._public(b) for b in reversed(server.batches.values())]
                self._send(200, json.dumps({"object": "list", "data": listed[:100]}).encode())
                return
            if path.startswith("/v1/batches/"):
                batch = server.batch(path.removeprefix("/v1/batches/"))
                self._send(200 if batch else 404, json.dumps(batch or {"error": {"message": "no such batch"}}).encode())
                return
            if path.startswith("/v1/files/") and path.endswith("/content"):
                content = server.files.get(path.removeprefix("/v1/files/").removesuffix("/content"))
                if content is None:
                    self._send(404, b'{"error": {"message": "no such file"}}')
                else:
                    self._send(200, content, {"Content-Type": "application/jsonl"})
                return
            if path != "/v1/stats":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            with server._lock:
                stats = {
                    "requests": len(server.requests),
                    "peak_in_flight": server.peak_in_flight,
                    "batches": server.batches_created,
                }
            self._send(200, json.dumps(stats).encode())

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.rstrip("/") == "/v1/files":
                self._upload(raw)
                return
            if self.path.rstrip("/") == "/v1/batches":
                status, answer = server.create_batch(json.loads(raw), self.headers.get("Authorization", ""))
                self._send(status, json.dumps(answer).encode())
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            body = json.loads(raw)
            fault = server._admit(dict(self.headers.items()), body, raw=raw)
            try:
                time.sleep(server.latency_s)
                self._respond(fault, body)
            finally:
                server._done()

        def _upload(self, raw: bytes) -> None:
            """POST /v1/files: a multipart form with ``purpose`` batch and the ``file``."""
            head = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode()
            form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
            fields = {
                part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                for part in (form.iter_parts() if form.is_multipart() else [])
            }
            if fields.get("purpose") != b"batch" or "file" not in fields:
                self._send(400, b'{"error": {"message": "expected purpose=batch and a file"}}')
                return
            self._send(200, json.dumps(server.upload(fields["file"])).encode())

        def _complete(self, body: dict[str, Any], reply: str | Served) -> None:
            served = reply if isinstance(reply, Served) else Served(reply)
            if server.echo_auth and served.content is not None:
                echoed = f"Called with {self.headers.get('Authorization')}.\n{served.content}"
                served = Served(echoed, served.refusal, served.finish_reason)
            model = server.served_model or str(body.get("model"))
            self._send(200, json.dumps(_completion(model, served, prompt_usage(body, server.token_rule))).encode())

        def _write(self, data: bytes) -> None:
            self.wfile.write(data)
            self.wfile.flush()

        def _respond(self, fault: str | None, body: dict[str, Any]) -> None:
            error = {"error": {"message": f"injected {fault}"}}
            if fault in {"drop", "timeout"}:
                if fault == "timeout":
                    time.sleep(server.hang_s)
                self.close_connection = True  # no response at all
            elif fault == "429":
                retry = {} if server.retry_after is None else {"Retry-After": str(server.retry_after)}
                self._send(429, json.dumps(error).encode(), retry)
            elif fault in {"403", "404", "500", "503"}:
                self._send(int(fault), json.dumps(error).encode())
            elif fault == "400":  # a content-policy refusal that quotes the request's credentials past 200 characters
                policy = "This request was rejected by the content policy of this deployment. " * 3
                quoted = {"error": {"message": f"{policy}(authorized by {self.headers.get('Authorization')})"}}
                self._send(400, json.dumps(quoted).encode())
            elif fault == "401":  # echoes the credentials back, as a careless proxy might
                echo = {"error": {"message": f"bad key in {self.headers.get('Authorization')}"}}
                self._send(401, json.dumps(echo).encode())
            elif fault == "malformed":
                self._send(200, b'{"choices": [{"message": ')
            elif fault == "empty":
                self._send(200, b"")
            elif fault == "trickle":  # a reply that never ends: one byte every 0.1 s
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                for _ in range(int(server.hang_s * 10)):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
                self.close_connection = True
            elif fault == "trickle_headers":  # headers that never end: one byte every 0.1 s
                _trickle(
                    self._write,
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: y" * 999,
                    (server.hang_s),
                )
                self.close_connection = True
            elif fault == "gzip":
                self._send(200, b"\x1f\x8b not gzip at all" * 20, {"Content-Encoding": "gzip"})
            elif fault == "error_object":
                failure = {"error": {"message": "The model is not available on this deployment", "code": "invalid"}}
                self._send(200, json.dumps(failure).encode())
            elif fault == "huge":
                self._send(
                    200, json.dumps(_completion(str(body.get("model")), Served("x" * server.huge_bytes))).encode()
                )
            elif fault == "not_utf8":  # a completion whose text is Latin-1 and worse: bytes no UTF-8 decoder takes
                payload = json.dumps(_completion(str(body.get("model")), Served("Answer: 1 CAFE"))).encode()
                self._send(200, payload.replace(b"CAFE", b"caf\xe9 \xff\xfe"))
            elif fault == "html":  # a login page or a web server's index where the API should be
                self._send(200, b"<!doctype html><html><body>Sign in</body></html>", {"Content-Type": "text/html"})
            elif fault == "refusal":
                self._complete(body, Served(None, "I cannot help with that."))
            else:
                try:
                    reply = server.policy(body)
                except Fault as chosen:
                    self._respond(chosen.kind, body)
                    return
                self._complete(body, reply)

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve in the foreground (a separate process keeps the server off the client's GIL); prints the URL."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--batch-turnaround-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = OpenAIServer(latency_s=args.latency_s, batch_turnaround_s=args.batch_turnaround_s)
    print(server.url, flush=True)
    try:
        server._httpd.serve_forever(poll_interval=0.02)
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
