"""EgoNormia's evaluation protocols: how a clip's questions are asked, how the replies are read, what is counted.

The setting ``egonormia.protocol`` names the protocol the infer stage asks under; responses.parquet and
predictions.parquet record its name on every row, and the parse and score stages take the protocol that name says
(``recorded``). Each protocol is one module here defining ``PROTOCOL``, an object of one interface (``Protocol``):

- requests: a clip's ``conversations`` in a setting (the units of work, each a thread-pool task) and, in
  ``converse``, the calls each one makes, their requests, and which are sent at all (a call the protocol does not
  make is recorded with an error starting ``not sent: ``);
- reading: ``read`` turns one recorded response into the chosen stored option(s) or a named failure; ``settle``
  applies a rule across a clip's three answers;
- accounting: ``excluded`` (items left out of n altogether), ``uncounted`` (items out of n but kept in the sums)
  and ``sensible_entry`` (a sensible answer as the official eval JSON records it).

``official`` is the official evaluation code, request for request; ``egoeval`` is ours. A new protocol is a module
here plus its name in ``egoeval.egonormia.settings.ProtocolName``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from egoeval.backends import ChatRequest, ImagePart, MultipleChoice, TextPart, VideoPart
from egoeval.backends.base import Part
from egoeval.backends.client import Completion
from egoeval.core.errors import InputError
from egoeval.egonormia.scoring import CALL_FAILED
from egoeval.egonormia.settings import PROTOCOLS

if TYPE_CHECKING:
    import pandas as pd

    from egoeval.egonormia.settings import ModelSpec

Choice = int | list[int]  # a stored option index (-1: unusable), or the sorted stored indices of a sensible answer
Ask = Callable[[ChatRequest], Completion]  # one model call: the cache, the limiter, retries, the backend


@dataclass(frozen=True)
class Clip:
    """What is asked about one clip: its five behaviours and their aligned justifications, in stored order."""

    id: str
    behaviors: tuple[str, ...]
    justifications: tuple[str, ...]


@dataclass(frozen=True)
class Scene:
    """What the model is given about a clip in one setting."""

    setting: str  # blind | pipeline | video, or a video variant's name (video:frames8, video:native)
    description: str = ""  # pipeline: the scene description
    visual: tuple[Part, ...] = ()  # video: the parts that show the clip, placed before the question's text


def strip_parts(jpeg: bytes) -> tuple[Part, ...]:
    """The strip variant's parts (the official one): the frames strip, one image."""
    return (ImagePart(jpeg),)


def frames_parts(frames: Sequence[tuple[float, bytes]]) -> tuple[Part, ...]:
    """A ``frames`` variant's parts: each frame as an image after a text part giving its time stamp, in time order."""
    parts: list[Part] = []
    for number, (time, jpeg) in enumerate(frames, start=1):
        parts += [TextPart(f"Frame {number} of {len(frames)}, at {time:.2f} s:"), ImagePart(jpeg)]
    return tuple(parts)


def native_parts(mp4: bytes) -> tuple[Part, ...]:
    """The ``native`` variant's parts: the clip itself, as one video part."""
    return (VideoPart(mp4),)


@dataclass(frozen=True)
class Conversation:
    """One unit of work: a conversation of the protocol (``kind``, a key of its ``conversations``) about a clip."""

    clip: Clip
    setting: str
    kind: str


@dataclass(frozen=True)
class Answer:
    """One subtask's call as recorded: the order its options were shown in and what came back."""

    subtask: str
    permutation: list[int]  # displayed[i] = stored[permutation[i]]
    completion: Completion


class Protocol(ABC):
    """How one protocol asks, reads and counts (see the module docstring)."""

    name: ClassVar[str]  # egonormia.protocol, and the protocol column of the tables
    conversations: ClassVar[dict[str, tuple[str, ...]]]  # kind -> its subtasks; run kind by kind, in this order
    sends_blank_descriptions: ClassVar[bool] = False  # a clip whose dataset description is blank is still asked

    @abstractmethod
    def permutation(self, seed: int, clip_id: str, subtask: str) -> list[int]:
        """The order a clip's options are shown in for a subtask."""

    @abstractmethod
    def converse(self, conversation: Conversation, scene: Scene, model: ModelSpec, seed: int, ask: Ask) -> list[Answer]:
        """Make the conversation's calls through ``ask``: one Answer per subtask of its kind, in that order."""

    @abstractmethod
    def read(
        self, subtask: str, response: str | None, error: str, permutation: Sequence[int], options: Sequence[str]
    ) -> tuple[Choice, str]:
        """(the stored choice, "" when usable, else the failure reason) of one recorded response; ``options`` are the
        subtask's options in stored order."""

    def settle(self, cell: dict[str, Any]) -> None:  # noqa: B027 - most protocols have no such rule
        """Apply a rule across one clip's read answers, in place (``cell``: each subtask's choice and its
        ``<subtask>_error``)."""

    def excluded(self, predictions: pd.DataFrame) -> np.ndarray:
        """Per prediction row (one setting and model, this protocol's): whether it is left out of n altogether."""
        return np.zeros(len(predictions), dtype=bool)

    def uncounted(self, predictions: pd.DataFrame, sensible_gold: Sequence[Sequence[int]]) -> np.ndarray:
        """Per prediction row: whether it is left out of n while its action and justification stay in the sums."""
        return np.zeros(len(predictions), dtype=bool)

    @abstractmethod
    def sensible_entry(self, sensible: list[int], reason: str, gold: list[int]) -> dict[str, Any]:
        """A prediction's ``sensible`` entry in the official eval JSON (``reason``: its failure, "" when usable)."""


def call_failure(subtask: str, error: str) -> tuple[Choice, str] | None:
    """The unusable choice and its reason when the call failed (``error`` not empty), else None."""
    if not error:
        return None
    return ([] if subtask == "sensible" else -1), CALL_FAILED + error


def justification_choices(chosen: str | None, context: str, options: Sequence[str]) -> MultipleChoice:
    """A justification question as a multiple choice: the chosen action (when known) leads the context."""
    return MultipleChoice(f"{chosen} {context}" if chosen else context, tuple(options), multi=False)


def registry() -> dict[str, Protocol]:
    """Every protocol module's ``PROTOCOL``, by name (``egoeval.egonormia.settings.PROTOCOLS``)."""
    return dict(PROTOCOLS.items())


def recorded(name: object, source: Path) -> Protocol:
    """The protocol a table records by name; InputError naming the table when it is none of ours."""
    if str(name) not in PROTOCOLS:
        raise InputError(source, f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS.names())}")
    return PROTOCOLS.get(str(name))
