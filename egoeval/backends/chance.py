"""The chance baseline (backend ``random``): a seeded, reproducible random pick, answered in the model's format."""

from __future__ import annotations

import hashlib
from typing import ClassVar

import numpy as np

from egoeval.backends.base import Backend, ChatRequest, ModelEntry, Reply, answer_line, request_key
from egoeval.core.errors import CallRefused


class ChanceBackend(Backend):
    name: ClassVar[str] = "random"
    supports_images: ClassVar[bool] = True  # it looks at nothing, so every setting is fine
    supports_video: ClassVar[bool | None] = True  # it looks at nothing

    def __init__(self, model: str, seed: int = 0) -> None:
        super().__init__(model)
        self.seed = seed

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> ChanceBackend:
        return cls(spec.name)

    def complete(self, request: ChatRequest) -> Reply:
        question = request.choices
        if question is None:
            raise CallRefused("the random baseline answers multiple-choice questions only")
        key = request_key(self.name, self.model, request)
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "big"))
        n = len(question.options)
        if question.multi:
            picked = [i + 1 for i in range(n) if rng.random() < 0.5]
            return Reply(f"Each option is kept or dropped by a fair coin.\n{answer_line(picked)}")
        return Reply(f"The option is drawn uniformly at random.\n{answer_line(int(rng.integers(1, n + 1)))}")
