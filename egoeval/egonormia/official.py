"""The official EgoNormia evaluation protocol (``egonormia.protocol: official``), request for request.

Follows ``src/eval/eval_api.py`` of Open-Social-World/EgoNormia (class ``OpenAIEvalAPI``; version and licence in
``protocols/official.json``, whose prompt text is kept verbatim as data). Per clip and setting:

1. the action call: one user message, the setting's prefix (the description formatted into it in the pipeline
   setting, a blank one too) + the action prompt with the options in stored order as a Python list repr; in the
   video setting the frames image comes first, as an ``image_url`` part;
2. when the action answer is valid, the justification call, its own single-turn conversation quoting the chosen
   behaviour; its prefix is left unformatted (the pipeline setting sends the literal ``{desc}``: the model never
   sees the description there); the video setting resends the image;
3. unless either call failed (an API error), the sensible call (+ a suffix for model names containing
   ``claude``).

``max_tokens`` 2000, ``temperature`` 0.0, no system prompt, no option shuffle. Answers: the last integer in the
reply minus one, valid when in 0..4 (an integer longer than Python's int-string limit, 4,300 digits, is invalid: the
official code's ``int()`` raises there and its bare ``except`` records an invalid answer); sensible: the last
``[...]`` on one line, ``ast.literal_eval``, each minus one; a list with an element outside 0..4 becomes the empty
list (a valid answer); anything ``literal_eval`` or the minus one refuses makes the answer invalid, a non-integral
number in range an error (the official code raises ``KeyError`` there and records it as an API error). No reply
text raises anything else, and reading one costs time linear in its length. Under this protocol the endpoint's
content is the reply even beside a ``refusal`` field or a ``content_filter`` finish, as the official code reads it.
Accounting (``scoring.official_excluded``, ``scoring.official_uncounted``): an invalid action or justification
makes both wrong; an API error in the action or justification call (an HTTP 400 too) drops the item from n; an
invalid sensible answer or a failed sensible call stays in n with IoU 0; an empty sensible answer to an empty gold
list leaves n but keeps its action and justification in the sums (the newest official scorer).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from egoeval.backends.base import ChatRequest, Decoding, ImagePart, Message, Question, TextPart

PROTOCOL_FILE = Path(__file__).parent / "protocols" / "official.json"
IDENTITY = list(range(5))  # the official code's option order: stored order
_INTEGER = re.compile(r"\d+")  # the official pattern: any Unicode decimal digits
INT_DIGITS_LIMIT = 4300  # CPython's default int-string limit, the official environment's (3.11+)


class OfficialError(Exception):
    """Where the official code raises something other than ``InvalidResponseError``: recorded as an API error."""


@cache
def protocol() -> dict[str, Any]:
    """The official protocol's data: templates, decoding and their source."""
    return json.loads(PROTOCOL_FILE.read_text(encoding="utf-8"))


def decoding() -> Decoding:
    spec = protocol()["decoding"]
    return Decoding(temperature=float(spec["temperature"]), max_tokens=int(spec["max_tokens"]))


def _prefix(setting: str, description: str | None) -> str:
    prefix = protocol()["templates"]["prefix"][setting]
    return prefix.format(desc=description) if description is not None else prefix


def action_prompt(setting: str, behaviors: Sequence[str], description: str = "") -> str:
    """The action call's text."""
    prefix = _prefix(setting, description if setting == "pipeline" else None)
    return prefix + protocol()["templates"]["action"].replace("{behaviors}", str(list(behaviors)))


def justification_prompt(setting: str, behavior: str, justifications: Sequence[str]) -> str:
    """The justification call's text: the raw prefix (``{desc}`` left as is) + the prompt quoting ``behavior``."""
    template = protocol()["templates"]["justification"]
    return _prefix(setting, None) + template.format(behavior=behavior, justifications=list(justifications))


def sensible_prompt(setting: str, behaviors: Sequence[str], description: str = "", model: str = "") -> str:
    """The sensible call's text (``model`` is the model name the official code checks for ``claude``)."""
    prefix = _prefix(setting, description if setting == "pipeline" else None)
    prompt = prefix + protocol()["templates"]["sensible"].replace("{behaviors}", str(list(behaviors)))
    return prompt + protocol()["templates"]["claude_suffix"] if "claude" in model else prompt


def _request(text: str, frames_jpeg: bytes | None, question: Question) -> ChatRequest:
    parts = (ImagePart(frames_jpeg), TextPart(text)) if frames_jpeg is not None else (TextPart(text),)
    return ChatRequest((Message("user", parts),), decoding(), question, protocol="official")


def _question(setting: str, subtask: str, options: Sequence[str], context: str, chosen: str | None = None) -> Question:
    shown = tuple(o if o.strip() else "None" for o in options)
    return Question(setting, subtask, context, shown, multi=subtask == "sensible", chosen_action=chosen)


def action_request(
    setting: str, behaviors: Sequence[str], description: str = "", frames_jpeg: bytes | None = None
) -> ChatRequest:
    context = description if setting == "pipeline" else ""
    text = action_prompt(setting, behaviors, description)
    return _request(text, frames_jpeg, _question(setting, "action", behaviors, context))


def justification_request(
    setting: str,
    behavior: str,
    justifications: Sequence[str],
    description: str = "",
    frames_jpeg: bytes | None = None,
) -> ChatRequest:
    context = description if setting == "pipeline" else ""
    text = justification_prompt(setting, behavior, justifications)
    question = _question(setting, "justification", justifications, context, chosen=behavior or "None")
    return _request(text, frames_jpeg, question)


def sensible_request(
    setting: str, behaviors: Sequence[str], description: str = "", frames_jpeg: bytes | None = None, model: str = ""
) -> ChatRequest:
    context = description if setting == "pipeline" else ""
    text = sensible_prompt(setting, behaviors, description, model)
    return _request(text, frames_jpeg, _question(setting, "sensible", behaviors, context))


NO_CONTENT_ERRORS = ("refusal", "empty completion")  # the backend's reasons for a reply without content


def no_content(error: str) -> bool:
    """A failed call the official code sees as an invalid answer, not an API error: the OpenAI client returns
    ``content=None`` for a refusal (and an empty string for an empty completion), which it records as invalid."""
    return error.startswith(NO_CONTENT_ERRORS)


def extract_single(reply: str | None) -> int | None:
    """The official single-choice reading: the last integer minus one, when in 0..4; else None (invalid)."""
    if reply is None:
        return None
    found = _INTEGER.findall(reply)
    if not found or len(found[-1]) > INT_DIGITS_LIMIT:
        return None
    choice = int(found[-1]) - 1
    return choice if choice in range(5) else None


def last_list(reply: str) -> str | None:
    """What the official ``re.findall(r'\\[.*\\]', reply)[-1]`` finds, in linear time (that pattern is quadratic on a
    line of many ``[``): on the last line holding a ``[`` before a ``]``, from its first ``[`` to its last ``]``."""
    for line in reversed(reply.split("\n")):
        close = line.rfind("]")
        start = line.find("[", 0, close) if close > 0 else -1
        if start >= 0:
            return line[start : close + 1]
    return None


def extract_multi(reply: str | None) -> list[int] | None:
    """The official sensible reading: the stored indices, or None when invalid; raises OfficialError where it errs.

    An element outside 0..4 after the minus one makes the whole answer ``[]`` (valid, as the official code has it).
    """
    if reply is None:
        return None
    found = last_list(reply)
    if found is None:
        return None
    try:
        values = ast.literal_eval(found)
        shifted = [value - 1 for value in values]
    except Exception:  # the official code's bare except: whatever literal_eval or the minus one refuses is invalid
        return None
    try:  # every element compared (a list, not all()): the official code's order of failures
        in_range = len([value for value in shifted if value <= 4 and value > -1]) == len(shifted)
    except TypeError as error:
        raise OfficialError(f"sensible answer not comparable: {error}") from None
    if not in_range:
        return []
    unshuffle = {i: i for i in IDENTITY}
    try:
        return [unshuffle[value] for value in shifted]
    except (KeyError, TypeError) as error:
        raise OfficialError(f"sensible answer not an option index: {error!r}") from None
