"""egoeval's protocol (``egonormia.protocol: egoeval``): chain-of-thought prompts, shuffled options, strict answers.

Per clip and setting, two conversations: the action question then, in the same conversation, the justification
question (not asked when the action call failed); and the sensible question in a conversation of its own. A system
prompt on social norms, the model's own decoding (``egonormia.model``). Options are shown numbered 1..5 in a seeded
permutation (``displayed[i] = stored[perm[i]]``, recorded with the answer); the empty option slot shows as "None of
the above". Every reply must end with exactly one line ``Answer: N`` (action, justification) or ``Answer: [N, M,
...]`` (sensible; ``Answer: []`` for none), read by ``egoeval.egonormia.answers``. Every item stays in n: an
unusable answer is simply wrong. The describe stage's prompt (``describe_request``) is ours too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from egoeval.backends import ChatRequest, Decoding, ImagePart, Message, MultipleChoice, TextPart
from egoeval.backends.client import Completion
from egoeval.core.errors import UnreadableAnswer
from egoeval.egonormia.answers import displayed_options, parse_multi, parse_single
from egoeval.egonormia.artifacts import SETTINGS, is_variant, setting_kind
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
from egoeval.egonormia.scoring import PARSE_FAILED

if TYPE_CHECKING:
    from egoeval.egonormia.settings import ModelSpec

N_OPTIONS = 5

SYSTEM = (
    "You are a thoughtful assistant with a deep understanding of everyday social norms: safety, privacy, "
    "personal space, politeness, cooperation, coordination and clear communication."
)
_POV = "You are wearing a camera on your head that records the world from your own first-person point of view."
BLIND_SITUATION = (
    f"{_POV} You are in an everyday situation, about to act, but you are told nothing about the scene: "
    "judge from general knowledge of what people usually expect."
)
_PIPELINE = (
    f"{_POV} Here is a description of what the camera has recorded so far:\n\n<description>\n{{}}\n</description>"
)
VIDEO_SITUATION = (
    f"{_POV} The image shows what the camera has recorded so far: frames sampled once per second, "
    "in time order from left to right."
)
FRAMES_SITUATION = (
    f"{_POV} The images show what the camera has recorded so far: frames in time order, each after its time stamp."
)
NATIVE_SITUATION = f"{_POV} The video shows what the camera has recorded so far."
_SINGLE = (
    "Think step by step about the situation, the people involved and the norms at play, and weigh every "
    "option. Then end your reply with exactly one final line of the form `Answer: N`, where N is the number "
    "(1-5) of the {what} you choose."
)
_MULTI = (
    "Think step by step about each option in turn: would a reasonable person consider it an acceptable thing "
    "to do here? Then end your reply with exactly one final line of the form `Answer: [N, M, ...]` listing the "
    "numbers of all sensible options in increasing order, or `Answer: []` if none of them is sensible."
)
DESCRIBE = (
    f"{VIDEO_SITUATION}\n\nDescribe the scene: the place, the people and what they are doing, your own role "
    "and activity, and anything socially relevant (who is close to whom, who is talking, what is about to "
    "happen). Then describe how the situation develops, frame by frame."
)


def permutation(seed: int, clip_id: str, subtask: str) -> list[int]:
    """The display order of a clip's options for one subtask: a permutation of range(5) seeded by sha256."""
    return list(_permutation(seed, clip_id, subtask))


@lru_cache(maxsize=1 << 16)
def _permutation(seed: int, clip_id: str, subtask: str) -> tuple[int, ...]:
    digest = hashlib.sha256(f"{seed}\x1f{clip_id}\x1f{subtask}".encode()).digest()
    return tuple(int(i) for i in np.random.default_rng(int.from_bytes(digest, "big")).permutation(N_OPTIONS))


def _numbered(options: Sequence[str]) -> str:
    return "\n".join(f"{i}. {text}" for i, text in enumerate(options, start=1))


def _situation(scene: Scene) -> str:
    if scene.setting == "blind":
        return BLIND_SITUATION
    if scene.setting == "pipeline":
        return _PIPELINE.format(scene.description.strip())
    if scene.setting == "video":
        return VIDEO_SITUATION
    if scene.setting == "video:native":
        return NATIVE_SITUATION
    if is_variant(scene.setting):
        return FRAMES_SITUATION
    raise ValueError(f"unknown setting {scene.setting!r}; known: {', '.join(SETTINGS)} and video variants")


def _context(scene: Scene) -> str:
    """The text a non-chat baseline weighs the options against."""
    return {"blind": BLIND_SITUATION, "pipeline": scene.description.strip()}.get(scene.setting, "")


def _first_turn(scene: Scene, question: str) -> Message:
    text = TextPart(f"{_situation(scene)}\n\n{question}")
    if setting_kind(scene.setting) == "video":
        if not scene.visual:
            raise ValueError(f"the {scene.setting} setting needs the parts that show the clip")
        return Message("user", (*scene.visual, text))
    return Message("user", (text,))


def _action_question(options: Sequence[str]) -> str:
    return (
        "Which ONE of the following actions is the most normatively appropriate thing for you to do next?\n\n"
        f"{_numbered(options)}\n\n{_SINGLE.format(what='action')}"
    )


def _justification_question(options: Sequence[str]) -> str:
    return (
        "Which ONE of the following is the best justification for the action you chose?\n\n"
        f"{_numbered(options)}\n\n{_SINGLE.format(what='justification')}"
    )


def _sensible_question(options: Sequence[str]) -> str:
    return (
        "Which of the following actions would be sensible for you to do next? Select every sensible one.\n\n"
        f"{_numbered(options)}\n\n{_MULTI}"
    )


def action_request(scene: Scene, options: Sequence[str], decoding: Decoding) -> ChatRequest:
    """Subtask 1: the single most normative action among the displayed options."""
    messages = (Message.text("system", SYSTEM), _first_turn(scene, _action_question(options)))
    return ChatRequest(messages, decoding, MultipleChoice(_context(scene), tuple(options), multi=False))


def justification_request(
    action: ChatRequest, action_reply: str, options: Sequence[str], decoding: Decoding
) -> ChatRequest:
    """Subtask 2, asked in the same conversation after the model's own action reply."""
    messages = (
        *action.messages,
        Message.text("assistant", action_reply),
        Message.text("user", _justification_question(options)),
    )
    if action.choices is None:
        raise ValueError("justification_request needs the action request built by action_request")
    choice = chosen_option(action_reply)
    chosen = action.choices.options[choice - 1] if choice is not None else None
    return ChatRequest(messages, decoding, justification_choices(chosen, action.choices.context, options))


def sensible_request(scene: Scene, options: Sequence[str], decoding: Decoding) -> ChatRequest:
    """Subtask 3, a conversation of its own: every sensible action."""
    messages = (Message.text("system", SYSTEM), _first_turn(scene, _sensible_question(options)))
    return ChatRequest(messages, decoding, MultipleChoice(_context(scene), tuple(options), multi=True))


def describe_request(frames_jpeg: bytes, decoding: Decoding) -> ChatRequest:
    """Ask a vision-language model for a scene description of the frames (the pipeline setting's text)."""
    content = (ImagePart(frames_jpeg), TextPart(DESCRIBE))
    return ChatRequest((Message.text("system", SYSTEM), Message("user", content)), decoding)


_ANSWER_LINE = re.compile(r"^\s*Answer:\s*([1-5])\s*$", re.MULTILINE)


def chosen_option(reply: str) -> int | None:
    """The option number (1-5) in a reply's last strict ``Answer: N`` line, else None.

    Only for handing the chosen action's text to non-chat baselines; the parse stage reads answers fully.
    """
    found = _ANSWER_LINE.findall(reply)
    return int(found[-1]) if found else None


class Egoeval(Protocol):
    """egoeval's conversations, reading and accounting (the module docstring)."""

    name = "egoeval"
    conversations: ClassVar[dict[str, tuple[str, ...]]] = {
        "action": ("action", "justification"),  # the two-call conversations first: a shorter tail at the end
        "sensible": ("sensible",),
    }

    def permutation(self, seed: int, clip_id: str, subtask: str) -> list[int]:
        return permutation(seed, clip_id, subtask)

    def converse(self, conversation: Conversation, scene: Scene, model: ModelSpec, seed: int, ask: Ask) -> list[Answer]:
        clip = conversation.clip
        decoding = Decoding.from_spec(model)
        if conversation.kind == "sensible":
            shown = permutation(seed, clip.id, "sensible")
            done = ask(sensible_request(scene, displayed_options(clip.behaviors, shown), decoding))
            return [Answer("sensible", shown, done)]
        shown, then = permutation(seed, clip.id, "action"), permutation(seed, clip.id, "justification")
        request = action_request(scene, displayed_options(clip.behaviors, shown), decoding)
        action = ask(request)
        if action.response is None:
            second = Completion(None, f"action failed: {action.error}", "")
        else:
            options = displayed_options(clip.justifications, then)
            second = ask(justification_request(request, action.response, options, decoding))
        return [Answer("action", shown, action), Answer("justification", then, second)]

    def read(
        self, subtask: str, response: str | None, error: str, permutation: Sequence[int], options: Sequence[str]
    ) -> tuple[Choice, str]:
        failed = call_failure(subtask, error)
        if failed is not None:
            return failed
        try:
            if subtask == "sensible":
                return parse_multi(response, permutation, options), ""
            return parse_single(response, permutation, options), ""
        except UnreadableAnswer as failure:
            return ([] if subtask == "sensible" else -1), PARSE_FAILED + failure.reason

    def sensible_entry(self, sensible: list[int], reason: str, gold: list[int]) -> dict[str, Any]:
        """``{}`` (which the official scorer counts as 0) for an unusable answer and for an empty answer to an empty
        gold set, where our IoU is 0 too."""
        usable = reason == "" and bool(sensible or gold)
        return {"results": sensible, "correct": gold} if usable else {}


PROTOCOL = Egoeval()
