"""The official EgoNormia evaluation protocol (``egonormia.protocol: official``), request for request.

Follows ``src/eval/eval_api.py`` of Open-Social-World/EgoNormia (class ``OpenAIEvalAPI``; version and licence in
``official.json`` beside this module, whose prompt text is kept verbatim as data). Per clip and setting, one
conversation of three calls:

1. the action call: one user message, the setting's prefix (the description formatted into it in the pipeline
   setting, a blank one too) + the action prompt with the options in stored order as a Python list repr; in the
   video setting the frames image comes first, as an ``image_url`` part (a video variant that is not the official
   protocol, ``Scene.visual``: its frames, each after its time stamp, or its clip, in the same place);
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
text raises anything else, and reading one costs time linear in its length. Every message's content is sent as a
list of parts, and the endpoint's content is the reply even beside a ``refusal`` field or a ``content_filter``
finish, as the official code reads it; a refusal without content, or an empty completion, is an invalid answer
(the official client gets ``None`` or ``""``), not a failed call.

Accounting, as the newest official scorer (``compute_scores_final.py`` on the default branch, commit 2019f27) has
it: an invalid action or justification makes both wrong (``settle``); an API error in the action or justification
call (an HTTP 400 too) drops the item from n (``excluded``: the official code records ``[-2, -2]``); an invalid
sensible answer or a failed sensible call stays in n with IoU 0; an empty sensible answer to an empty gold list
leaves n but keeps its action and justification in the sums (``uncounted``: the scorer's IoU divides by zero there
and its ``except`` skips the count after the sums). So a metric is its sum over the items scored divided by the
items counted.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from egoeval.backends import ChatRequest, Decoding, Message, MultipleChoice, TextPart
from egoeval.backends.base import Part
from egoeval.backends.client import Completion
from egoeval.core.errors import ReferenceCodeError
from egoeval.egonormia.artifacts import NOT_SENT, SUBTASKS, setting_kind
from egoeval.egonormia.protocols import (
    Answer,
    Ask,
    Choice,
    Conversation,
    Protocol,
    Scene,
    call_failure,
    justification_choices,
)
from egoeval.egonormia.scoring import CALL_FAILED, PARSE_FAILED

if TYPE_CHECKING:
    import pandas as pd

    from egoeval.egonormia.settings import ModelSpec

PROTOCOL_FILE = Path(__file__).with_name("official.json")
IDENTITY = list(range(5))  # the official code's option order: stored order
_INTEGER = re.compile(r"\d+")  # the official pattern: any Unicode decimal digits
INT_DIGITS_LIMIT = 4300  # CPython's default int-string limit, the official environment's (3.11+)


@cache
def protocol() -> dict[str, Any]:
    """The official protocol's data: templates, decoding and their source."""
    return json.loads(PROTOCOL_FILE.read_text(encoding="utf-8"))


def decoding() -> Decoding:
    spec = protocol()["decoding"]
    return Decoding(temperature=float(spec["temperature"]), max_tokens=int(spec["max_tokens"]))


def _prefix(setting: str, description: str | None) -> str:
    prefix = protocol()["templates"]["prefix"][setting_kind(setting)]
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


def _request(text: str, visual: tuple[Part, ...], choices: MultipleChoice) -> ChatRequest:
    messages = (Message("user", (*visual, TextPart(text))),)
    return ChatRequest(
        messages,
        decoding(),
        choices,
        content_as_parts=True,
        content_despite_refusal=True,
        undecodable_as_api_error=True,
        namespace="official",
    )


def _shown(options: Sequence[str]) -> tuple[str, ...]:
    """The options as a baseline weighs them: the empty slot reads "None" (as the Python list repr shows it)."""
    return tuple(o if o.strip() else "None" for o in options)


def _context(setting: str, description: str) -> str:
    return description if setting == "pipeline" else ""


def action_request(
    setting: str, behaviors: Sequence[str], description: str = "", visual: tuple[Part, ...] = ()
) -> ChatRequest:
    """The action call; ``visual``: the parts showing the clip (``Scene.visual``), before the text."""
    text = action_prompt(setting, behaviors, description)
    return _request(text, visual, MultipleChoice(_context(setting, description), _shown(behaviors), multi=False))


def justification_request(
    setting: str,
    behavior: str,
    justifications: Sequence[str],
    description: str = "",
    visual: tuple[Part, ...] = (),
) -> ChatRequest:
    text = justification_prompt(setting, behavior, justifications)
    choices = justification_choices(behavior or "None", _context(setting, description), _shown(justifications))
    return _request(text, visual, choices)


def sensible_request(
    setting: str, behaviors: Sequence[str], description: str = "", visual: tuple[Part, ...] = (), model: str = ""
) -> ChatRequest:
    text = sensible_prompt(setting, behaviors, description, model)
    return _request(text, visual, MultipleChoice(_context(setting, description), _shown(behaviors), multi=True))


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
    """The official sensible reading: the stored indices, or None when invalid; raises ReferenceCodeError where it errs.

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
        raise ReferenceCodeError(f"sensible answer not comparable: {error}") from None
    if not in_range:
        return []
    unshuffle = {i: i for i in IDENTITY}
    try:
        return [unshuffle[value] for value in shifted]
    except (KeyError, TypeError) as error:
        raise ReferenceCodeError(f"sensible answer not an option index: {error!r}") from None


INVALID_ACTION = "the action answer is invalid"  # why the justification call was not made


class Official(Protocol):
    """The official evaluation code's calls, reading and accounting (the module docstring)."""

    name = "official"
    conversations: ClassVar[dict[str, tuple[str, ...]]] = {"clip": SUBTASKS}  # the three calls, in one unit
    sends_blank_descriptions = True  # between its triple quotes, as the official code does

    def permutation(self, seed: int, clip_id: str, subtask: str) -> list[int]:
        return list(IDENTITY)

    def converse(self, conversation: Conversation, scene: Scene, model: ModelSpec, seed: int, ask: Ask) -> list[Answer]:
        clip, setting = conversation.clip, conversation.setting
        context = {"description": scene.description, "visual": scene.visual}
        action = ask(action_request(setting, clip.behaviors, **context))
        choice = extract_single(action.response)
        action_failed = action.response is None and not no_content(action.error)
        if action_failed:
            justification = Completion(None, NOT_SENT + "the action call failed", "")
        elif choice is None:
            justification = Completion(None, NOT_SENT + INVALID_ACTION, "")
        else:
            justification = ask(justification_request(setting, clip.behaviors[choice], clip.justifications, **context))
        api_error = action_failed or (
            choice is not None and justification.response is None and not no_content(justification.error)
        )
        if api_error:  # the official code then records [-2, -2] and never sends the sensible call
            sensible = Completion(None, NOT_SENT + "an earlier call failed", "")
        else:
            sensible = ask(sensible_request(setting, clip.behaviors, model=model.name, **context))
        done = (action, justification, sensible)
        return [Answer(subtask, list(IDENTITY), completion) for subtask, completion in zip(SUBTASKS, done, strict=True)]

    def read(
        self, subtask: str, response: str | None, error: str, permutation: Sequence[int], options: Sequence[str]
    ) -> tuple[Choice, str]:
        unusable: Choice = [] if subtask == "sensible" else -1
        if error.startswith(NOT_SENT + INVALID_ACTION):
            return unusable, PARSE_FAILED + f"not asked: {INVALID_ACTION}"
        if no_content(error):
            return unusable, PARSE_FAILED + f"official: no content ({error})"
        failed = call_failure(subtask, error)
        if failed is not None:
            return failed
        if subtask != "sensible":
            choice = extract_single(response)
            if choice is None:
                return -1, PARSE_FAILED + "official: the last integer is not 1-5"
            return choice, ""
        try:
            chosen = extract_multi(response)
        except ReferenceCodeError as failure:
            return [], CALL_FAILED + f"official: {failure}"
        if chosen is None:
            return [], PARSE_FAILED + "official: no readable [...] list"
        return sorted(set(chosen)), ""

    def settle(self, cell: dict[str, Any]) -> None:
        """The official coupling: an unusable action or justification makes both wrong."""
        if any((cell["action_error"], cell["justification_error"])):
            cell["action"], cell["justification"] = -1, -1
            for subtask, other in (("action", "justification"), ("justification", "action")):
                if not cell[f"{subtask}_error"]:
                    cell[f"{subtask}_error"] = PARSE_FAILED + f"official coupling: the {other} answer is unusable"

    def excluded(self, predictions: pd.DataFrame) -> np.ndarray:
        """A failed action or justification call: the official code records ``[-2, -2]`` and drops the item."""
        failed = predictions["action_error"].str.startswith(CALL_FAILED)
        return (failed | predictions["justification_error"].str.startswith(CALL_FAILED)).to_numpy()

    def uncounted(self, predictions: pd.DataFrame, sensible_gold: Sequence[Sequence[int]]) -> np.ndarray:
        """A usable sensible answer that is empty, to an empty gold list."""
        empty_answer = (predictions["sensible_error"] == "") & (predictions["sensible"].map(len) == 0)
        empty_gold = np.array([len(gold) == 0 for gold in sensible_gold], dtype=bool)
        return empty_answer.to_numpy() & empty_gold

    def sensible_entry(self, sensible: list[int], reason: str, gold: list[int]) -> dict[str, Any]:
        """What the official code records: ``[-2, -2]`` for a failed call, ``[-1, -1]`` for an invalid answer."""
        failed = {CALL_FAILED: [-2, -2], PARSE_FAILED: [-1, -1]}
        answer = next((value for prefix, value in failed.items() if reason.startswith(prefix)), sensible)
        return {"results": answer, "correct": gold}


PROTOCOL = Official()
