"""Any OpenAI-compatible chat completions endpoint: vLLM, SGLang, Ollama, OpenAI, Gemini's compatibility API.

The API key is read from the environment variable *named* by ``api_key_env`` at call time; it is never
kept on the object, written to a file or put in an error message.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import time
from typing import Any, ClassVar

import httpx

from egoeval.backends.base import (
    Backend,
    ChatRequest,
    EndpointError,
    ImagePart,
    Message,
    PermanentError,
    TransientError,
)
from egoeval.io import PARAMS_FILE, InputError

OVERLOAD_STATUS = {429, 503, 529}  # the server says: slow down
RETRY_STATUS = {408, 409, 425, 500, 502, 504} | OVERLOAD_STATUS
FIX = {  # what each permanent answer asks the user to fix
    400: "the server rejects the request: check the model's name, max_tokens and temperature in params.yaml",
    401: "the key is missing or wrong: set a valid key in ${env} (named by api_key_env in params.yaml)",
    403: "the key may not use this model: check ${env} and the model's name in params.yaml",
    404: "no such endpoint or model: check base_url (it usually ends in /v1) and the model's name in params.yaml",
    405: "not a chat completions endpoint: check base_url in params.yaml",
    413: "the request is too large for the server: lower egonormia.frames.max_width or frame_height",
    422: "the server rejects the request: check the model's name, max_tokens and temperature in params.yaml",
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message_json(message: Message, protocol: str = "egoeval") -> dict[str, Any]:
    """One message as the API wants it; ``official``: content always a list of parts, images first as given."""
    parts = message.content
    if protocol == "egoeval" and len(parts) == 1 and not isinstance(parts[0], ImagePart):
        return {"role": message.role, "content": parts[0].text}
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            url = "data:image/jpeg;base64," + base64.b64encode(part.jpeg).decode("ascii")
            content.append({"type": "image_url", "image_url": {"url": url}})
        else:
            content.append({"type": "text", "text": part.text})
    return {"role": message.role, "content": content}


def request_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a chat completions call (the official protocol's shape under ``official``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [_message_json(m, request.protocol) for m in request.messages],
        "max_tokens": request.decoding.max_tokens,
        "temperature": request.decoding.temperature,
    }
    if request.decoding.seed is not None:
        body["seed"] = request.decoding.seed
    return body


class OpenAIBackend(Backend):
    name: ClassVar[str] = "openai"
    supports_images: ClassVar[bool] = True

    def __init__(
        self, model: str, base_url: str, api_key_env: str | None, timeout_s: float, concurrency: int = 8
    ) -> None:
        super().__init__(model, concurrency)
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), limits=limits)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> OpenAIBackend:
        if not spec.get("base_url"):
            raise InputError(PARAMS_FILE, f"model {spec.get('name')!r}: the openai backend needs base_url")
        return cls(
            model=str(spec["name"]),
            base_url=str(spec["base_url"]),
            api_key_env=spec.get("api_key_env"),
            timeout_s=float(spec.get("timeout_s", 120)),
            concurrency=int(spec.get("concurrency", 8)),
        )

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> tuple[dict[str, str], str | None]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Content-Type": "application/json"}
        if key:
            if not key.isprintable() or not key.isascii() or key != key.strip():
                raise EndpointError(
                    f"{self.endpoint}: the key in ${self.api_key_env} holds whitespace, a newline or a non-ASCII "
                    f"character (copied with a line break?): fix the environment variable {self.api_key_env}"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    def complete(self, request: ChatRequest) -> str:
        body = request_body(self.model, request)
        headers, key = self._headers()
        try:
            response = self._post(body, headers)
        except httpx.TimeoutException as error:
            raise TransientError(f"timeout ({type(error).__name__})") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as error:
            raise EndpointError(
                f"{self.endpoint}: cannot be called ({type(error).__name__}: {_redact(str(error), key)}): "
                "check base_url in params.yaml (http:// or https://, host, port)"
            ) from None
        except httpx.TransportError as error:
            raise TransientError(f"connection error ({type(error).__name__})") from None
        return _reply_text(response, key, self)

    def _post(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        """POST and read the reply within ``timeout_s`` in all (httpx's own timeouts are per read, so a server
        trickling bytes could hold a call for ever)."""
        deadline = time.monotonic() + self.timeout_s
        with self._client.stream("POST", self.endpoint, json=body, headers=headers) as streamed:
            chunks = []
            for chunk in streamed.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise TransientError(f"timeout (the reply took longer than timeout_s, {self.timeout_s:g} s)")
        plain = {k: v for k, v in streamed.headers.items() if k.lower() not in {"content-encoding", "content-length"}}
        return httpx.Response(streamed.status_code, headers=plain, content=b"".join(chunks))

    def close(self) -> None:
        self._client.close()


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _reply_text(response: httpx.Response, key: str | None, backend: OpenAIBackend) -> str:
    """Map a response to its reply text or to a Transient/Permanent/Endpoint error (key redacted from messages)."""
    status = response.status_code
    if status in RETRY_STATUS or status >= 500:
        raise TransientError(
            f"http {status}",
            retry_after=parse_retry_after(response.headers.get("Retry-After")),
            overload=status in OVERLOAD_STATUS,
        )
    if status != 200:
        detail = _redact(response.text[:200].strip(), key)
        fix = FIX.get(status, "check base_url, the model's name and the key in params.yaml").replace(
            "${env}", f"${backend.api_key_env}"
        )
        answered = f"http {status}: {detail}" if detail else f"http {status}"
        raise EndpointError(f"{backend.endpoint} (model {backend.model!r}) answered {answered}; {fix}")
    if not response.content.strip():
        raise TransientError("empty response body")
    if not response.content.lstrip().startswith((b"{", b"[")):
        kind = response.headers.get("Content-Type", "no content type")
        raise EndpointError(
            f"{backend.endpoint} (model {backend.model!r}) answered 200 with a non-JSON body ({kind}: "
            f"{_redact(response.text[:80].strip(), key)!r}): not an OpenAI chat completions API; check base_url "
            "in params.yaml (it usually ends in /v1)"
        )
    try:
        choice = response.json()["choices"][0]
        message = choice["message"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        raise TransientError("malformed response body") from None
    if not isinstance(message, dict):
        raise TransientError("malformed response body")
    if message.get("refusal"):
        raise PermanentError(_redact(f"refusal: {str(message['refusal'])[:200]}", key))
    if choice.get("finish_reason") == "content_filter":
        raise PermanentError("refusal: finish_reason content_filter")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise TransientError("empty completion")
    return content
