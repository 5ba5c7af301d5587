"""Chain-of-thought prompts for EgoNormia's three subtasks in its three settings, and the option shuffles.

Options are shown numbered 1..5 in a seeded permutation (``displayed[i] = stored[perm[i]]``); the empty
option slot shows as "None of the above". Every reply must end with exactly one line ``Answer: N``
(action, justification) or ``Answer: [N, M, ...]`` (sensible; ``Answer: []`` for none). The justification
question follows the action question in the same conversation; the sensible question is its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from egoeval.backends.base import ChatRequest, Decoding, ImagePart, Message, Question, TextPart
from egoeval.egonormia.artifacts import SETTINGS

NONE_OF_THE_ABOVE = "None of the above"
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


def displayed_options(stored: Sequence[str], perm: Sequence[int]) -> tuple[str, ...]:
    """``displayed[i] = stored[perm[i]]``, with the empty slot shown as "None of the above"."""
    return tuple(stored[p].strip() or NONE_OF_THE_ABOVE for p in perm)


def _numbered(options: Sequence[str]) -> str:
    return "\n".join(f"{i}. {text}" for i, text in enumerate(options, start=1))


@dataclass(frozen=True)
class Scene:
    """What the model is given about the clip in one setting."""

    setting: str
    description: str = ""  # pipeline
    frames_jpeg: bytes | None = None  # video: the strip of frames

    def situation(self) -> str:
        if self.setting == "blind":
            return BLIND_SITUATION
        if self.setting == "pipeline":
            return _PIPELINE.format(self.description.strip())
        if self.setting == "video":
            return VIDEO_SITUATION
        raise ValueError(f"unknown setting {self.setting!r}; known: {', '.join(SETTINGS)}")

    def context(self) -> str:
        """The text a non-chat baseline compares options with."""
        return {"blind": BLIND_SITUATION, "pipeline": self.description.strip()}.get(self.setting, "")

    def first_turn(self, question: str) -> Message:
        text = TextPart(f"{self.situation()}\n\n{question}")
        if self.setting == "video":
            if self.frames_jpeg is None:
                raise ValueError("the video setting needs the frames image")
            return Message("user", (ImagePart(self.frames_jpeg), text))
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
    messages = (Message.text("system", SYSTEM), scene.first_turn(_action_question(options)))
    question = Question(scene.setting, "action", scene.context(), tuple(options), multi=False)
    return ChatRequest(messages, decoding, question)


def justification_request(
    action: ChatRequest, action_reply: str, options: Sequence[str], decoding: Decoding
) -> ChatRequest:
    """Subtask 2, asked in the same conversation after the model's own action reply."""
    messages = (
        *action.messages,
        Message.text("assistant", action_reply),
        Message.text("user", _justification_question(options)),
    )
    if action.question is None:
        raise ValueError("justification_request needs the action request built by action_request")
    choice = chosen_option(action_reply)
    chosen = action.question.options[choice - 1] if choice is not None else None
    question = replace(action.question, subtask="justification", options=tuple(options), chosen_action=chosen)
    return ChatRequest(messages, decoding, question)


def sensible_request(scene: Scene, options: Sequence[str], decoding: Decoding) -> ChatRequest:
    """Subtask 3, a conversation of its own: every sensible action."""
    messages = (Message.text("system", SYSTEM), scene.first_turn(_sensible_question(options)))
    question = Question(scene.setting, "sensible", scene.context(), tuple(options), multi=True)
    return ChatRequest(messages, decoding, question)


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
