"""``egoeval estimate``: what the next ``dvc repro`` of egonormia_infer would send, what it would take, what it costs.

The estimate runs the infer stage's own code (``run_inference`` on the stage's inputs) with a client that sends
nothing: a request whose key is in the response cache is answered from it, as the stage would; a request that is
not is counted as a new call and answered the way the chance baseline answers (a usable reply), so the protocol
goes on to the calls a usable answer leads to. The request keys are therefore exactly those the stage computes. A
new call after a new call is counted as the stage makes it when the model's reply is usable: an unusable reply
(under ``official``: an action answer with no number 1-5) skips its justification call, so that count is an upper
bound.

Tokens of a new call: its prompt tokens are the mean the endpoint reported (``usage``, kept in the cache's meta)
for the cached calls of the same model, setting and question; without any, the prompt's text at 4 characters a
token (OpenAI's rule of thumb for English) plus each image by the rule the model entry's ``token_rule`` names
(``IMAGE_RULES``: ``openai``, the default, OpenAI's for the gpt-4o class at detail ``auto``/``high``,
``image_tokens``; ``qwen2_vl``, Qwen2-VL's image processor, ``qwen2_vl_image_tokens``), a ``frames`` variant's every
image (eight frames cost eight times one), and each clip of the ``native`` variant as vLLM feeds it to Qwen2-VL
(``video_tokens``: the frames its loader samples, each resized as the processor does).
Every video variant is its own setting row (``video``, ``video:frames8``, ``video:native``), so a user sees what
each costs against the strip before a run. Its completion tokens are the mean reported for those cached calls, else the
``max_tokens`` the request itself asks for, as the protocol sends it (the official protocol's 2000, whatever
``egonormia.model.max_tokens`` says): an upper bound. No tokenizer is bundled for the OpenAI models (tiktoken fetches
its tables at run time), so nothing is tokenized locally. Cost at ``egonormia.model.price`` (USD per million tokens).

Needs the infer stage's inputs (data/egonormia/fetched, frames, descriptions.parquet): ``dvc repro
egonormia_describe`` makes them (no model call with ``describe.source: dataset``; with ``model`` that stage's
calls are made then, and are not in the estimate).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from egoeval.core.errors import CallRefused
from egoeval.core.stage_shell import help_text

if TYPE_CHECKING:
    from egoeval.egonormia.settings import EgoNormiaSettings

CHARS_PER_TOKEN = 4  # OpenAI: "one token is about 4 characters of common English text"
TILE_PX, TILE_TOKENS, BASE_TOKENS = 512, 170, 85  # OpenAI, gpt-4o class: 85 + 170 per 512 px tile
FIT_PX, SHORT_SIDE_PX = 2048, 768  # first fit within 2048 x 2048, then the shorter side scaled down to 768


def image_tokens(width: int, height: int) -> int:
    """Prompt tokens of one image sent at detail ``high`` (``auto`` on a large image) to a gpt-4o class model.

    OpenAI's documented rule: scale to fit within 2048 x 2048, then so that the shorter side is at most 768 px
    (never up), then 85 tokens plus 170 per 512 px tile covering the image.
    """
    scale = min(1.0, FIT_PX / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, SHORT_SIDE_PX / min(width, height))
    width, height = width * scale, height * scale
    return BASE_TOKENS + TILE_TOKENS * math.ceil(width / TILE_PX) * math.ceil(height / TILE_PX)


# Qwen2-VL and Qwen2.5-VL (token_rule qwen2_vl; a clip under either rule): the models' preprocessor_config.json
# (huggingface.co/Qwen/Qwen2-VL-7B-Instruct/blob/main/preprocessor_config.json, the same values in every
# Qwen2-VL-*-Instruct and Qwen2.5-VL-*-Instruct), which transformers' image processor reads and, those repositories
# having no video_preprocessor_config.json, its video processor too (transformers/video_processing_utils.py)
QWEN_PATCH_PX = 14  # patch_size
QWEN_MERGE = 2  # merge_size: 2 x 2 patches make one token
QWEN_TEMPORAL_PATCH = 2  # temporal_patch_size: 2 frames deep
QWEN_MIN_PIXELS = 3136  # min_pixels (56 x 56): an image or frame with fewer is scaled up
QWEN_MAX_PIXELS = 12_845_056  # max_pixels (28 x 28 x 16,384): one with more is scaled down
VLLM_VIDEO_FRAMES = 32  # vLLM's VideoMediaIO num_frames: the most frames of a video_url clip its loader hands on


def qwen2_vl_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) Qwen2-VL's processors resize an image or a video frame to (transformers' ``smart_resize``,
    factor 28): each side to the nearest multiple of 28 px (Python's ``round``: halves to even); when that holds
    more than QWEN_MAX_PIXELS or fewer than QWEN_MIN_PIXELS, the original size scaled by one factor into the range
    instead (down: each side floored to 28 px, at least 28; up: ceiled). The processor refuses a side ratio over
    200 (the endpoint then answers an error, no tokens); the size is computed all the same."""
    factor = QWEN_PATCH_PX * QWEN_MERGE
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > QWEN_MAX_PIXELS:  # the operations in the processor's order: the same floats
        beta = math.sqrt((height * width) / QWEN_MAX_PIXELS)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < QWEN_MIN_PIXELS:
        beta = math.sqrt(QWEN_MIN_PIXELS / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return w_bar, h_bar


def _qwen2_vl_grid(width: int, height: int) -> int:
    """Patches of one resized image or frame: ``grid_h * grid_w``."""
    resized_width, resized_height = qwen2_vl_size(width, height)
    return (resized_height // QWEN_PATCH_PX) * (resized_width // QWEN_PATCH_PX)


def qwen2_vl_image_tokens(width: int, height: int) -> int:
    """Prompt tokens of one image sent to Qwen2-VL / Qwen2.5-VL: its ``image_grid_thw`` product (``grid_t`` 1, the
    image resized by ``qwen2_vl_size``) over ``merge_size ** 2``, the placeholder tokens vLLM puts in the prompt."""
    return _qwen2_vl_grid(width, height) // QWEN_MERGE**2


def video_tokens(frames: int, width: int, height: int) -> int:
    """Prompt tokens of a clip of ``frames`` frames (its MP4 header's count, the one OpenCV reads) of ``width`` x
    ``height`` px sent as a ``video_url`` part to Qwen2-VL / Qwen2.5-VL served by vLLM with its defaults.

    The rule as read in vLLM's code (vllm/multimodal/media/video.py ``VideoMediaIO``, vllm/multimodal/video.py
    ``OpenCVVideoBackend.load_bytes``, vllm/model_executor/models/qwen2_vl.py ``_get_vision_info`` and
    ``get_replacement_qwen2vl``, the v0.11 line: qwen2_vl.py at 002d181a) and transformers 5.25.0
    (models/qwen2_vl/video_processing_qwen2_vl.py): the default ``opencv`` loader hands the processor ``min(frames,
    32)`` frames, at least 1, spread uniformly (``--media-io-kwargs '{"video": {"num_frames": N}}'`` changes the
    32); Qwen2-VL's parser drops the clip's metadata, so the video processor samples no frames again
    (``do_sample_frames`` False); each frame is resized by ``qwen2_vl_size``; the frames are padded with the last to
    a multiple of ``temporal_patch_size``: ``grid_t = ceil(n / 2)``, ``grid_h = h / 14``, ``grid_w = w / 14``, and
    the tokens are ``grid_t * grid_h * grid_w / merge_size ** 2``. transformers' ``cap_pixels_per_frame`` (a total
    budget over the frames) is off by default in 5.25 and qwen-vl-utils' budgets are not on vLLM's path.
    tests/test_estimate.py checks it against transformers' processors."""
    fed = max(1, min(VLLM_VIDEO_FRAMES, frames))
    grid_t = math.ceil(fed / QWEN_TEMPORAL_PATCH)
    return grid_t * _qwen2_vl_grid(width, height) // QWEN_MERGE**2


def part_tokens(part: Any, rule: str) -> int:
    """A picture's or clip's prompt tokens by rule: an image by ``IMAGE_RULES.get(rule)``, a clip by ``video_tokens``
    (under either rule: OpenAI's API takes no video)."""
    from PIL import Image

    from egoeval.backends.base import VideoPart
    from egoeval.egonormia.settings import IMAGE_RULES
    from egoeval.video import mp4_shape

    if isinstance(part, VideoPart):
        return video_tokens(*mp4_shape(part.mp4))
    with Image.open(io.BytesIO(part.jpeg)) as image:  # the header only
        return IMAGE_RULES.get(rule)(*image.size)


def rule_prompt_tokens(request: Any, rule: str) -> int:
    """A prompt's tokens by rule: its text at CHARS_PER_TOKEN characters a token, each image or clip by
    ``part_tokens`` under ``rule`` (a ``frames`` variant's images each count, its time stamps as text)."""
    from egoeval.backends.base import TextPart

    chars, tokens = 0, 0
    for message in request.messages:
        for part in message.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            else:
                tokens += part_tokens(part, rule)
    return tokens + math.ceil(chars / CHARS_PER_TOKEN)


def _dry_run_client() -> type:
    from egoeval.backends import request_key
    from egoeval.backends.chance import ChanceBackend
    from egoeval.backends.client import Completion, ModelClient

    class DryRunClient(ModelClient):
        """Answers from the response cache; records each miss (a call the stage would send) and answers it as the
        chance baseline would. Sends nothing."""

        def __init__(self, backend: Any, cache: Any, **pacing: Any) -> None:
            super().__init__(backend, cache, **pacing)
            self._chance = ChanceBackend(backend.model)
            self.cached: dict[str, dict[str, Any]] = {}  # key -> the cached reply's meta
            self.missed: dict[str, Any] = {}  # key -> the request the stage would send
            self._seen = threading.Lock()

        @classmethod
        def from_spec(cls, spec: Any, cache: Any, *, cache_only: bool = False) -> DryRunClient:
            client: DryRunClient = super().from_spec(spec, cache, cache_only=True)  # sends nothing (no batch either)
            return client

        def complete(self, request: Any) -> Completion:
            key = request_key(self.backend.cache_name, self.backend.model, request)  # the client's own key
            found = self.cache.entry(key)
            if found is not None:
                with self._seen:
                    self.cached[key] = found[1]
                    self.hits += 1
                return Completion(found[0], "", key)
            with self._seen:
                self.missed[key] = request
            try:
                return Completion(self._chance.complete(request).text, "", key)
            except CallRefused:  # not a multiple choice: the estimate cannot say what comes after it
                return Completion("", "", key)

    return DryRunClient


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def estimate(settings: EgoNormiaSettings, root: Path = Path(".")) -> list[dict[str, Any]]:
    """One row per model and setting (of ``settings``, the ``egonormia`` section): calls (new, cached), expected
    prompt and completion tokens of the new calls, and their cost at the model's price (None without one)."""
    from egoeval.backends.client import CallUsage, token_cost
    from egoeval.egonormia.inference import inference_inputs, run_inference

    inputs = inference_inputs(settings, root)
    clients: list[Any] = []
    dry_run = _dry_run_client()

    def make(spec: Any, cache: Any, *, cache_only: bool = False) -> Any:
        clients.append(dry_run.from_spec(spec, cache))
        return clients[-1]

    rows = run_inference(*inputs, client_factory=make)
    rows = rows[rows["request_key"] != ""]
    out = []
    for model, client in zip(inputs.models, clients, strict=True):
        mine = rows[rows["model"] == model.name]
        measured: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        unmeasured: dict[str, set[str]] = {}  # setting -> cached calls whose reply reported no usage
        for row in mine.itertuples(index=False):
            meta = client.cached.get(row.request_key)
            if meta is not None:
                prompt, completion = measured.setdefault((row.setting, row.subtask), ([], []))
                usage = CallUsage.from_meta(meta)  # the counts the response cache holds, checked
                if usage.prompt_tokens is None or usage.completion_tokens is None:
                    unmeasured.setdefault(str(row.setting), set()).add(row.request_key)
                for value, into in ((usage.prompt_tokens, prompt), (usage.completion_tokens, completion)):
                    if value is not None:
                        into.append(value)
        for setting, group in mine.groupby("setting", sort=True):
            new = group[group["request_key"].isin(client.missed)]
            prompt_tokens = completion_tokens = 0.0
            for row in new.itertuples(index=False):
                prompt, completion = measured.get((row.setting, row.subtask), ([], []))
                prompt_tokens += _mean(prompt) or rule_prompt_tokens(client.missed[row.request_key], model.token_rule)
                completion_tokens += _mean(completion) or client.missed[row.request_key].decoding.max_tokens
            price = model.price
            out.append(
                {
                    "model": model.name,
                    "setting": str(setting),
                    "calls": len(group),
                    "new": len(new),
                    "cached": len(group) - len(new),
                    "cached_without_usage": len(unmeasured.get(str(setting), ())),
                    "prompt_tokens": round(prompt_tokens),
                    "completion_tokens": round(completion_tokens),
                    "cost_usd": None
                    if price is None
                    else token_cost(prompt_tokens, completion_tokens, (price.input, price.output)),
                }
            )
    return out


def format_estimate(rows: list[dict[str, Any]]) -> str:
    """The estimate as a fixed-width table with a total line."""
    header = ("model", "setting", "calls", "new", "cached", "prompt tok", "completion tok", "cost USD")
    lines = [header]
    for r in rows:
        cost = "-" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"
        lines.append(
            (
                r["model"],
                r["setting"],
                *(f"{r[k]:,}" for k in ("calls", "new", "cached")),
                f"{r['prompt_tokens']:,}",
                f"{r['completion_tokens']:,}",
                cost,
            )
        )
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    total = ("total", "", *(f"{sum(r[k] for r in rows):,}" for k in ("calls", "new", "cached", "prompt_tokens")))
    lines.append((*total, f"{sum(r['completion_tokens'] for r in rows):,}", f"{sum(costs):.4f}" if costs else "-"))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    notes = [
        f"note: {r['model']} {r['setting']}: {r['cached_without_usage']:,} of the {r['cached']:,} cached calls "
        "reported no usage (their tokens are not measured; new calls are estimated from the others or by rule)"
        for r in rows
        if r.get("cached_without_usage")
    ]
    table = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(table + notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval estimate", description=help_text(__doc__))
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args(argv)
    from egoeval.core.io.atomic import json_bytes
    from egoeval.core.stage_shell import run_stage

    def body() -> None:
        from egoeval.backends.usage import DROPPED
        from egoeval.core.settings import benchmark_settings
        from egoeval.egonormia.settings import EgoNormiaSettings

        rows = estimate(benchmark_settings("egonormia", EgoNormiaSettings))
        print(json_bytes(rows).decode() if args.json else format_estimate(rows))
        dropped = DROPPED.take()
        if dropped:
            print(f"estimate: warning: {dropped}", file=sys.stderr)

    from egoeval.core.io.paths import project_root

    with contextlib.chdir(project_root()):  # the project's files, from a subfolder too (found as DVC finds it)
        return run_stage(body, benchmark="egonormia")
