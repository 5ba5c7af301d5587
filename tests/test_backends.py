"""Backends, the response cache and the limiter, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import REPO
from openai_server import Fault, OpenAIServer, Served, last_user_text
from PIL import Image

from egoeval.backends import (
    ChatRequest,
    Decoding,
    ImagePart,
    Message,
    MultipleChoice,
    TextPart,
    make_backend,
    request_key,
)
from egoeval.backends.chance import ChanceBackend
from egoeval.backends.client import FIRST_CALLS, ModelClient
from egoeval.backends.limiter import AdaptiveLimiter, Outcome, call_with_retries
from egoeval.backends.openai import EndpointAnswer, OpenAIBackend, parse_retry_after, reply_byte_limit
from egoeval.cache import ResponseCache
from egoeval.core.errors import CallRefused, CallRetryable, EndpointDown, EndpointError, InputError, RetriesExhausted
from egoeval.core.settings import validate_params
from egoeval.egonormia.protocols import justification_choices
from egoeval.egonormia.settings import ModelSpec

KEY_ENV = "EGOEVAL_TEST_API_KEY"
SECRET = "sk-test-0123456789-very-secret"
ANSWER = re.compile(r"\nAnswer: (\d|\[(\d(, \d)*)?\])$")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback endpoint takes any key, but the backend refuses to send without one (its variable unset)."""
    monkeypatch.setenv(KEY_ENV, SECRET)


def jpeg(color: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (64, 32)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG")
    return buffer.getvalue()


def spec(server: OpenAIServer, **extra: object) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "backend": "openai",
            "name": "test-vlm",
            "base_url": server.url,
            "api_key_env": KEY_ENV,
            "concurrency": 4,
            "timeout_s": 5,
            "max_retries": 3,
            "retry_base_s": 0.01,
            "retry_max_s": 0.05,
            **extra,
        }
    )


def chat(text: str = "Which? 1. a\n2. b\nAnswer: N", image: bytes | None = None) -> ChatRequest:
    parts = (ImagePart(image), TextPart(text)) if image else (TextPart(text),)
    return ChatRequest((Message.text("system", "Be brief."), Message("user", parts)), Decoding(0.0, 64, None))


def question_request(multi: bool, context: str, options: tuple[str, ...], image: bytes | None = None) -> ChatRequest:
    text = TextPart(f"{context} {options} {multi}")
    parts = (ImagePart(image), text) if image else (text,)
    return ChatRequest((Message("user", parts),), Decoding(0.0, 64), MultipleChoice(context, options, multi))


# ------------------------------------------------------------------ request keys


def test_request_key_depends_on_everything_that_shapes_the_reply() -> None:
    image = jpeg()
    base = chat(image=image)
    key = request_key("openai", "m", base)
    assert key == request_key("openai", "m", chat(image=bytes(image)))  # equal content, new objects
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    variants = [
        request_key("random", "m", base),
        request_key("openai", "m2", base),
        request_key("openai", "m", chat(image=jpeg((10, 10, 10)))),
        request_key("openai", "m", chat("other text", image=image)),
        request_key("openai", "m", ChatRequest(base.messages, Decoding(0.7, 64, None))),
        request_key("openai", "m", ChatRequest(base.messages, Decoding(0.0, 65, None))),
        request_key("openai", "m", ChatRequest(base.messages, Decoding(0.0, 64, 1))),
    ]
    assert len({key, *variants}) == len(variants) + 1


def test_image_enters_the_key_by_its_sha256() -> None:
    import hashlib

    image = jpeg()
    assert ImagePart(image).sha256 == hashlib.sha256(image).hexdigest()


# ------------------------------------------------------------------ openai backend over HTTP


def test_openai_sends_images_as_data_urls_and_the_key_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    image = jpeg()
    with OpenAIServer() as server:
        backend = make_backend(spec(server))
        try:
            reply = backend.complete(chat(image=image))
            monkeypatch.delenv(KEY_ENV)
            with pytest.raises(EndpointError) as missing:  # read at call time: gone from the env, nothing is sent
                backend.complete(chat())
        finally:
            backend.close()
    assert reply.text.endswith("Answer: 1") and reply.served_model == "test-vlm"  # the server names the model
    (first,) = server.requests
    assert first.headers["Authorization"] == f"Bearer {SECRET}"
    assert f"the environment variable {KEY_ENV} (named by the model's api_key_env) is not set" in str(missing.value)
    parts = first.body["messages"][1]["content"]
    assert parts[0]["type"] == "image_url"
    url = parts[0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == image
    assert parts[1] == {"type": "text", "text": "Which? 1. a\n2. b\nAnswer: N"}
    assert first.body["model"] == "test-vlm" and first.body["max_tokens"] == 64 and "seed" not in first.body
    assert SECRET not in repr(vars(backend))


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("429", CallRetryable, "http 429"),
        ("500", CallRetryable, "http 500"),
        ("503", CallRetryable, "http 503"),
        ("drop", CallRetryable, "connection error"),
        ("timeout", CallRetryable, "timeout"),
        ("malformed", CallRetryable, "malformed response body"),
        ("empty", CallRetryable, "empty response body"),
        ("refusal", CallRefused, "refusal: I cannot help with that."),
    ],
)
def test_faults_map_to_transient_or_permanent(monkeypatch, fault: str, kind: type, reason: str) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with OpenAIServer(schedule=[fault], retry_after=1.5, hang_s=1.0) as server:
        backend = make_backend(spec(server, timeout_s=0.3))
        try:
            with pytest.raises(kind) as caught:
                backend.complete(chat())
        finally:
            backend.close()
    message = str(caught.value)
    assert message.startswith(reason)
    assert SECRET not in message  # the 401 body echoes the Authorization header back
    if fault == "429":
        assert caught.value.retry_after == 1.5 and caught.value.overload
    if fault == "500":
        assert not caught.value.overload


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    in_ten = parse_retry_after(formatdate(time.time() + 10, usegmt=True))
    assert in_ten is not None and 8 < in_ten <= 10


# ------------------------------------------------------------------ retries, cache, limiter


def test_transient_faults_are_retried_then_cached_and_never_sent_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with OpenAIServer(schedule=["429", "500", "drop", "503"]) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server, max_retries=4), cache)
        try:
            done = client.complete(chat())
            again = client.complete(chat())
        finally:
            client.close()
    assert done.error == "" and done.response.endswith("Answer: 1")
    assert [r.fault for r in server.requests] == ["429", "500", "drop", "503", None]
    assert again == done and client.hits == 1 and len(server.requests) == 5
    assert len(cache_rows(tmp_path / "c.sqlite")) == 1
    assert_secret_absent(tmp_path)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("fault", "answered", "fix"),
    [
        ("401", "answered http 401", f"set a valid key in ${KEY_ENV}"),
        ("403", "answered http 403", f"check ${KEY_ENV}"),
        ("404", "answered http 404", "check the model's base_url"),
        ("html", "answered 200 with a non-JSON body (text/html", "check the model's base_url"),
        ("error_object", "answered 200 with an error object instead of a completion (The model is not", "base_url"),
        ("gzip", "answered with a body that cannot be decoded (", "check the model's base_url"),
    ],
)
def test_endpoint_faults_are_permanent_and_name_the_endpoint_and_the_fix(
    monkeypatch, fault: str, answered: str, fix: str
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with OpenAIServer(schedule=[fault]) as server:
        backend = make_backend(spec(server))
        try:
            with pytest.raises(EndpointError) as caught:
                backend.complete(chat())
        finally:
            backend.close()
    message = str(caught.value)
    assert message.startswith(f"{server.url}/chat/completions (model 'test-vlm') ") or fault == "401"
    assert message.startswith(f"{server.url}/chat/completions") and answered in message and fix in message
    assert SECRET not in message  # the 401 body echoes the Authorization header back


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("base_url", "key", "fix"),
    [
        ("127.0.0.1:8000/v1", "sk-fine", "check the model's base_url (http:// or https://"),
        ("ftp://127.0.0.1:8000/v1", "sk-fine", "check the model's base_url"),
        (None, "sk-line\n", f"fix the environment variable {KEY_ENV}"),
        (None, "sk-\u00e9", f"fix the environment variable {KEY_ENV}"),
    ],
)
def test_a_bad_url_or_key_fails_before_anything_is_sent(monkeypatch, base_url: str | None, key: str, fix: str) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    with OpenAIServer() as server:
        backend = OpenAIBackend("m", base_url or server.url, KEY_ENV, timeout_s=2.0, connections=1)
        try:
            with pytest.raises(EndpointError, match=re.escape(fix)) as caught:
                backend.complete(chat())
        finally:
            backend.close()
    assert key.strip() not in str(caught.value) and server.requests == []


def test_retries_exhausted_are_reported_and_not_cached(tmp_path: Path) -> None:
    with OpenAIServer(per_request=["503"] * 10) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server, max_retries=2), cache)
        try:
            done = client.complete(chat())
        finally:
            client.close()
    assert done.response is None and done.error == "http 503 after 2 retries"
    assert len(server.requests) == 3 and len(cache_rows(tmp_path / "c.sqlite")) == 0


def test_permanent_errors_are_not_retried(tmp_path: Path) -> None:
    with OpenAIServer(per_request=["refusal"] * 10) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server), cache)
        try:
            done = client.complete(chat())  # a refusal is this request's answer: recorded, not raised
            with pytest.raises(EndpointError):  # a wrong endpoint would fail every call: raised
                server.per_request = ["401"] * 10
                client.complete(chat("another question"))
        finally:
            client.close()
    assert done.response is None and done.error.startswith("refusal")
    assert len(server.requests) == 2


@pytest.mark.bad_input
def test_a_retry_after_longer_than_retry_max_s_ends_the_call_and_holds_the_others(tmp_path: Path) -> None:
    with OpenAIServer(per_request=["429"] * 10, retry_after=3600) as server, ResponseCache(tmp_path / "c") as cache:
        client = ModelClient.from_spec(spec(server, max_retries=6, retry_max_s=30), cache)
        try:
            done = client.complete(chat())
            second = client.complete(chat("another question"))  # the same server asked for an hour's pause
        finally:
            client.close()
    reason = "the server asks to wait 3600 s (Retry-After), longer than retry_max_s (30 s): not waiting"
    assert done.response is None and done.error == f"http 429: {reason}"
    assert second.response is None and "longer than retry_max_s (30 s): not waiting" in second.error
    assert len(server.requests) == 1  # nothing sent while the server asked for a pause


@pytest.mark.bad_input
def test_a_reply_that_trickles_is_cut_at_timeout_s(tmp_path: Path) -> None:
    with OpenAIServer(per_request=["trickle"] * 10, hang_s=30) as server, ResponseCache(tmp_path / "c") as cache:
        client = ModelClient.from_spec(spec(server, max_retries=1, timeout_s=0.5, retry_base_s=0.01), cache)
        try:
            done = client.complete(chat())
        finally:
            client.close()
    assert done.error == "timeout (no complete reply within timeout_s, 0.5 s) after 1 retries"


def test_call_with_retries_honours_retry_after() -> None:
    calls: list[float] = []

    def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) < 2:
            raise CallRetryable("http 429", retry_after=0.2, overload=True)
        return "ok"

    import random

    limiter = AdaptiveLimiter(4)
    assert (
        call_with_retries(flaky, max_retries=3, base_delay=0.01, max_delay=0.5, rng=random.Random(0), limiter=limiter)
        == "ok"
    )
    assert calls[1] - calls[0] >= 0.2
    assert limiter.limit == 2  # one overload halved 4 -> 2; one success is not yet enough to grow
    with pytest.raises(RetriesExhausted, match="boom after 1 retries"):
        call_with_retries(
            lambda: (_ for _ in ()).throw(CallRetryable("boom")),
            max_retries=1,
            base_delay=0.001,
            max_delay=0.001,
            rng=random.Random(0),
        )


def test_limiter_halves_once_per_burst_and_grows_back() -> None:
    limiter = AdaptiveLimiter(8)
    epochs = [limiter.acquire() for _ in range(8)]
    for epoch in epochs[:4]:  # four 429s from calls that all started before the first decrease
        limiter.release(epoch, Outcome.OVERLOAD)
    assert limiter.limit == 4
    for epoch in epochs[4:]:
        limiter.release(epoch, Outcome.FAILURE)
    for expected in (2, 1, 1):  # fresh overloads keep halving, never below 1
        limiter.release(limiter.acquire(), Outcome.OVERLOAD)
        assert limiter.limit == expected
    grown = []
    for _ in range(1 + 2 + 3 + 4 + 5 + 6 + 7 + 10):
        limiter.release(limiter.acquire(), Outcome.SUCCESS)
        grown.append(limiter.limit)
    assert grown[0] == 2 and grown[2] == 3 and limiter.limit == 8  # +1 per `limit` successes, capped at max


def test_limiter_never_lets_more_than_the_limit_in() -> None:
    limiter = AdaptiveLimiter(3)
    inside = 0
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        for _ in range(20):
            epoch = limiter.acquire()
            with lock:
                inside += 1
                peak = max(peak, inside)
            time.sleep(0.001)
            with lock:
                inside -= 1
            limiter.release(epoch, Outcome.SUCCESS)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 3 == limiter.peak_in_flight


def test_calls_run_concurrently_up_to_the_limit(tmp_path: Path) -> None:
    # each call held long enough that all eight overlap even on a loaded machine (at 0.05 s a busy CI saw 6)
    latency, concurrency, n = 0.5, 8, 24
    with OpenAIServer(latency_s=latency) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server, concurrency=concurrency), cache)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(concurrency) as pool:
            done = list(pool.map(client.complete, [chat(f"question {i}") for i in range(n)]))
        client.close()
    assert all(d.error == "" for d in done)
    assert server.peak_in_flight == concurrency  # every slot was used at once, and never more (speed: bench/)


def test_overload_makes_the_client_back_off(tmp_path: Path) -> None:
    with OpenAIServer(per_request=["429"], retry_after=0.0) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server, concurrency=8), cache)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(client.complete, [chat(f"q{i}") for i in range(16)]))
        client.close()
    assert all(d.error == "" for d in done)
    assert client.limiter.limit < 8  # every request met one 429 first


# ------------------------------------------------------------------ the cache itself


def cache_rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT key, response FROM responses").fetchall()


def assert_secret_absent(root: Path) -> None:
    for file in root.rglob("*"):
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file


def test_cache_survives_sigkill_and_keeps_the_first_value(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    script = (
        "import os, signal\nfrom egoeval.cache import ResponseCache\n"
        f"cache = ResponseCache({str(db)!r})\n"
        "for i in range(50):\n    cache.put(f'k{i}', f'v{i}', {'i': i})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False)
    assert result.returncode == -signal.SIGKILL
    with ResponseCache(db) as cache:
        assert len(cache) == 50 and cache.get("k49") == "v49" and cache.get("nope") is None
        assert cache.put("k0", "other", {}) == ("v0", {"i": 0})  # the first value wins, and is what the caller gets


def test_cache_takes_writes_from_many_threads_and_processes(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    script = (
        "import sys\nfrom egoeval.cache import ResponseCache\n"
        f"cache = ResponseCache({str(db)!r})\n"
        "for i in range(100):\n    cache.put(f'{sys.argv[1]}-{i}', 'x' * 100, {})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, f"p{j}"]) for j in range(3)]
    with ResponseCache(db) as cache:
        threads = [
            threading.Thread(target=lambda t=t: [cache.put(f"t{t}-{i}", "y", {}) for i in range(100)]) for t in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(p.wait(timeout=60) == 0 for p in procs)
        assert len(cache) == 700


# ------------------------------------------------------------------ baselines


def test_random_baseline_is_seeded_uniform_and_answers_in_format() -> None:
    backend = make_backend(ModelSpec(backend="random", name="chance"))
    other_seed = ChanceBackend("chance", seed=1)
    options = ("a", "b", "c", "d", "None of the above")
    requests = [question_request(False, f"scene {i}", options) for i in range(1000)]
    replies = [backend.complete(r).text for r in requests]
    assert replies == [backend.complete(r).text for r in requests]
    assert all(ANSWER.search(r) for r in replies)
    picks = [int(r.rsplit(" ", 1)[1]) for r in replies]
    counts = [picks.count(k) for k in range(1, 6)]
    assert all(150 < c < 250 for c in counts), counts  # uniform: 200 each, sd ~12.6
    assert sum(a != other_seed.complete(r).text for a, r in zip(replies, requests, strict=True)) > 600
    multi = backend.complete(question_request(True, "scene", options)).text
    assert ANSWER.search(multi)
    with pytest.raises(CallRefused):
        backend.complete(chat())


def test_minilm_baseline_loads_offline_and_picks_the_related_option() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    backend = make_backend(ModelSpec(backend="minilm", name="all-MiniLM-L6-v2"))
    assert not backend.supports_images
    options = (
        "Fly a kite on the beach",
        "Stir the pasta so it does not stick to the pot",
        "Repair the bicycle chain",
        "Feed the cat",
        "None of the above",
    )
    context = "You are cooking spaghetti in a pot of boiling water in your kitchen."
    reply = backend.complete(question_request(False, context, options)).text
    assert reply.endswith("\nAnswer: 2")
    multi = backend.complete(question_request(True, context, options)).text
    assert ANSWER.search(multi) and "2" in multi.rsplit("Answer:", 1)[1]
    justification = justification_choices(
        options[1],
        context,
        (
            "Kites need wind",
            "Pasta sticks together when it is not stirred",
            "Cats get hungry",
            "Chains rust",
            "None of the above",
        ),
    )
    reply = backend.complete(ChatRequest((Message.text("user", "j"),), Decoding(0.0, 64), justification)).text
    assert reply.endswith("\nAnswer: 2")
    with pytest.raises(CallRefused):
        backend.complete(question_request(False, "", options, image=jpeg()))


@pytest.mark.bad_input
def test_bad_model_entries_are_input_errors_naming_params() -> None:
    """The settings refuse them (make_backend builds only validated entries), naming the params file and the key."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for baseline, words in [
        (
            {"backend": "gpt", "name": "x"},
            r"egonormia.baselines\[0\].backend = 'gpt': unknown backend 'gpt' "
            r"\(known: openai, openai_batch, random, minilm\)",
        ),
        ({"backend": "openai", "name": "x", "base_url": None}, r"egonormia.baselines\[0\]: .*needs base_url"),
        ({"backend": "random"}, r"egonormia.baselines\[0\].name: missing"),
    ]:
        with pytest.raises(InputError, match=r"^params.yaml: invalid params:(.|\n)*" + words):
            validate_params({**params, "egonormia": {**params["egonormia"], "baselines": [baseline]}})
    described = {**params["egonormia"], "describe": {"source": "model", "max_failure_rate": 0.1}}
    described["model"] = {**described["model"], "backend": "minilm"}
    with pytest.raises(InputError, match=r"describe.source 'model' needs a vision-language model; .*'minilm' cannot"):
        validate_params({**params, "egonormia": described})


# ------------------------------------------------------------------ hostile endpoints; the official reading


def key_forms(secret: str) -> list[str]:
    """The key, and its first 33 characters (what a cut before redaction let through)."""
    return [secret, secret[:33]]


@pytest.mark.bad_input
def test_the_key_is_redacted_before_an_error_is_cut_and_from_every_completion(tmp_path: Path, monkeypatch) -> None:
    secret = "sk-" + "k" * 20 + "0123456789abcdefghij"  # longer than the 33 characters a late cut let through
    monkeypatch.setenv(KEY_ENV, secret)
    with (
        OpenAIServer(per_request=["400"], echo_auth=True) as server,
        ResponseCache(tmp_path / "c.sqlite") as cache,
    ):
        client = ModelClient.from_spec(spec(server), cache)
        try:
            rejected = client.complete(chat())  # the 400 quotes "Bearer <key>" past its 200th character
            server.per_request = []
            answered = client.complete(chat("another question"))  # the completion echoes it
        finally:
            client.close()
    assert [r.headers["Authorization"] for r in server.requests] == [f"Bearer {secret}"] * 2  # the key was sent
    assert rejected.response is None and rejected.error.startswith("http 400: This request was rejected")
    assert "(authorized by Bearer ***)" in rejected.error
    assert answered.response == "Called with Bearer ***.\nA person stands in a kitchen talking to a friend."
    assert not any(form in rejected.error + answered.response for form in key_forms(secret))
    assert all(secret.encode() not in file.read_bytes() for file in tmp_path.rglob("*") if file.is_file())


@pytest.mark.bad_input
def test_an_endpoint_quoting_the_key_json_escaped_is_redacted_too(monkeypatch) -> None:
    secret = "sk-escaped-key-0123456789"
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)  # the same key, as JSON may spell it

    monkeypatch.setenv(KEY_ENV, secret)
    with OpenAIServer(policy=lambda body: "placeholder") as server:
        backend = make_backend(spec(server))
        body = ('{"choices": [{"message": {"content": "key ' + escaped + '"}}], "model": "' + escaped + '"}').encode()
        answer = EndpointAnswer.read(200, httpx.Headers({"Content-Type": "application/json"}), body, secret)
        reply = backend._interpret(answer, chat())
        backend.close()
    assert reply.text == "key ***" and reply.served_model == "***"


@pytest.mark.bad_input
def test_headers_that_trickle_are_cut_at_timeout_s() -> None:
    with OpenAIServer(per_request=["trickle_headers"] * 10, hang_s=30) as server:
        backend = make_backend(spec(server, timeout_s=1.0))
        started = time.monotonic()
        try:
            with pytest.raises(CallRetryable, match=r"^timeout \(no complete reply within timeout_s, 1 s\)$"):
                backend.complete(chat())
        finally:
            backend.close()
    assert time.monotonic() - started < 2.5  # one timeout_s from connect to the last byte, not one per byte


@pytest.mark.bad_input
def test_a_reply_longer_than_max_tokens_justifies_is_cut_and_not_kept(tmp_path: Path) -> None:
    with (
        OpenAIServer(schedule=["huge"], huge_bytes=20_000_000) as server,
        ResponseCache(tmp_path / "c.sqlite") as cache,
    ):
        client = ModelClient.from_spec(spec(server), cache)
        try:
            cut = client.complete(chat())  # max_tokens 64
            whole = client.complete(chat("another question"))
        finally:
            client.close()
    limit = reply_byte_limit(64)
    assert limit < 100_000
    assert cut.response is None and cut.error == (
        f"reply cut at {limit:,} bytes: more than max_tokens 64 can justify (reply_byte_limit); nothing of it kept"
    )
    assert whole.error == "" and len(cache_rows(tmp_path / "c.sqlite")) == 1  # only the normal reply is kept
    assert (tmp_path / "c.sqlite").stat().st_size < 1_000_000


@pytest.mark.bad_input
def test_nothing_listening_is_said_at_once_naming_the_address_and_the_param(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(
            ModelSpec(backend="openai", name="m", base_url=url, api_key_env=KEY_ENV, timeout_s=30), cache
        )
        started = time.monotonic()
        try:
            with pytest.raises(EndpointDown) as caught:
                client.complete(chat())
            with pytest.raises(EndpointDown):  # the client is stopped: nothing more is tried
                client.complete(chat("another"))
        finally:
            client.close()
    assert time.monotonic() - started < 3
    message = str(caught.value)
    assert message.startswith(f"{url}/chat/completions: nothing answers at this address (")
    assert "check base_url of model 'm' and that the server is running there" in message


@pytest.mark.bad_input
@pytest.mark.parametrize("count", [FIRST_CALLS - 1, FIRST_CALLS])
def test_rejections_are_one_requests_failure_unless_the_first_calls_all_are(tmp_path: Path, count: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def policy(body: dict) -> str:
        if "question" in last_user_text(body) and int(last_user_text(body).split()[-1]) < count:
            raise Fault("400")
        return "fine\nAnswer: 1"

    with OpenAIServer(policy=policy) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server, concurrency=1), cache)
        outcomes: list[object] = []
        try:
            with ThreadPoolExecutor(1) as pool:
                for done in pool.map(lambda k: _outcome(client, chat(f"question {k}")), range(20)):
                    outcomes.append(done)
        finally:
            client.close()
    if count < FIRST_CALLS:  # one success among the first calls: every rejection stays that request's own failure
        assert [o.error.startswith("http 400: ") for o in outcomes] == [k < count for k in range(20)]
        assert len(server.requests) == 20  # none retried
    else:  # the first calls all rejected alike: the endpoint cannot take our requests; nothing more is sent
        assert [isinstance(o, EndpointError) for o in outcomes] == [k >= FIRST_CALLS - 1 for k in range(20)]
        message = str(outcomes[-1])
        assert message.startswith(f"{server.url}/chat/completions (model 'test-vlm') rejected the first 8 calls alike")
        assert "check the model's name, max_tokens and temperature" in message
        assert len(server.requests) == FIRST_CALLS


def _outcome(client: ModelClient, request: ChatRequest) -> object:
    try:
        return client.complete(request)
    except EndpointError as error:
        return error


def test_the_served_model_is_recorded_cached_and_said(tmp_path: Path) -> None:
    with OpenAIServer(served_model="test-vlm-2025-01-01") as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ModelClient.from_spec(spec(server), cache)
        try:
            fresh, again = client.complete(chat()), client.complete(chat())
        finally:
            client.close()
    assert fresh.served_model == again.served_model == "test-vlm-2025-01-01" and client.hits == 1
    assert client.served_note() == (
        "test-vlm: the endpoint named another model as serving 2 of 2 replies: 'test-vlm-2025-01-01' (2) "
        "(recorded per answer in served_model)"
    )


@pytest.mark.parametrize(
    ("served", "despite_refusal", "reply"),
    [
        (Served("Option 2", refusal="I would rather not."), True, "Option 2"),
        (Served("I pick 3", finish_reason="content_filter"), True, "I pick 3"),
        (Served("Option 2", refusal="I would rather not."), False, "refusal: I would rather not."),
        (Served("I pick 3", finish_reason="content_filter"), False, "refusal: finish_reason content_filter"),
        (Served(None, refusal="No."), True, "refusal: No."),
    ],
)
def test_content_beside_a_refusal_is_the_reply_when_read_despite_refusal(
    served: Served, despite_refusal: bool, reply: str
) -> None:
    """The official protocol's requests read so (the official client reads only the content)."""
    request = ChatRequest(chat().messages, Decoding(0.0, 64, None), content_despite_refusal=despite_refusal)
    with OpenAIServer(policy=lambda body: served) as server:
        backend = make_backend(spec(server))
        try:
            if reply.startswith("refusal"):
                with pytest.raises(CallRefused, match=re.escape(reply)):
                    backend.complete(request)
            else:
                assert backend.complete(request).text == reply
        finally:
            backend.close()
