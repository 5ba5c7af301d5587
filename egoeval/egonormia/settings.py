"""The ``egonormia`` section of the params, typed and validated (machinery in ``egoeval.core.settings``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, create_model, model_validator
from pydantic_core import PydanticUndefined

from egoeval.backends import BACKENDS
from egoeval.core.registry import Registry
from egoeval.core.settings import BootstrapSettings, Fraction, NonEmptyStr, Section, Seed, registered, unique_list
from egoeval.egonormia.result_names import results_key
from egoeval.headline import file_stem, stem_clashes

Setting = Literal["blind", "pipeline", "video"]
IMAGE_RULES: Registry[Callable[[int, int], int]] = Registry("token rule")
"""How an endpoint counts an image's prompt tokens (width, height -> tokens), by ``egonormia.model.token_rule``: the
functions live in ``egoeval.egonormia.estimate``, imported when first used (only `egoeval estimate` counts)."""
IMAGE_RULES.register_lazy("openai", "egoeval.egonormia.estimate:image_tokens")  # gpt-4o's tiles
IMAGE_RULES.register_lazy("qwen2_vl", "egoeval.egonormia.estimate:qwen2_vl_image_tokens")  # as vLLM serves it
# each an egoeval.egonormia.protocols.Protocol (not imported here: the protocols import these settings)
PROTOCOLS: Registry[Any] = Registry.modules("protocol", "egoeval.egonormia.protocols", "PROTOCOL")
"""EgoNormia's protocols: one module each under ``egoeval/egonormia/protocols/`` (its ``PROTOCOL``, named as the
module), found without importing them; ``egonormia.protocol`` allows exactly these names. Declared here, beside the
setting that names one: the protocols' package imports the model client, which reading the settings must not."""
# The largest image side any supported endpoint accepts: Anthropic's API rejects images over 8,000 px a side
# (OpenAI and Gemini resize large images instead of refusing them); JPEG itself stops at 65,535 px.
MAX_IMAGE_SIDE = 8000
MAX_TOKENS = 10**6  # a completion's most tokens: above every model's output limit (and the usage a call may report,
# egoeval.backends.usage.MAX_USAGE_TOKENS, is a thousand times this)
MAX_PRICE = 10_000.0  # USD per million tokens: far above any listed model's (gpt-4.5's output was 150, o1-pro's 600)
MAX_CLIPS = 1_000_000  # far above any EgoNormia dataset's (1,853 clips)


class SampleSettings(Section):
    """``egonormia.sample``: the bundled synthetic sample's videos."""

    seconds: Annotated[int, Field(ge=5, le=600)]
    fps: Annotated[int, Field(ge=1, le=120)]
    width: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]
    height: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]


class FetchSettings(Section):
    """``egonormia.fetch``: where the items and videos come from, pinned."""

    dataset: Literal["egonormia", "ood_robot"]
    source: Literal["sample", "local", "huggingface"]
    path: NonEmptyStr
    media_path: NonEmptyStr | None
    manifest: NonEmptyStr
    hf_repo: NonEmptyStr
    hf_revision: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None
    split: Literal["full", "verified"]
    # a smoke run: this many clips of the split, stratified by norm category
    limit: Annotated[int, Field(ge=1, le=MAX_CLIPS)] | None = None
    limit_seed: Seed = 0  # the seed of that sample

    @property
    def rows_dataset(self) -> str:
        """The dataset our result rows name: ``sample`` for the bundled synthetic sample, never the published one."""
        return "sample" if self.source == "sample" else self.dataset

    @model_validator(mode="after")
    def _hub_source_pinned(self) -> FetchSettings:
        if self.source != "huggingface":
            return self
        if self.dataset != "egonormia":
            raise ValueError(
                f"dataset {self.dataset!r} is not in the Hugging Face repository; its items are in the official "
                "GitHub folder src/final_dataset: use source local"
            )
        if self.hf_revision is None or set(self.hf_revision) == {"0"}:
            raise ValueError(
                "source huggingface: hf_revision must pin a commit: 40 hex digits, not a branch, tag or placeholder; "
                f"got {self.hf_revision!r}"
            )
        return self


MAX_VARIANT_FRAMES = 64  # frames of a `frames` variant at most (lmms-eval and VLMEvalKit send 8 to 32)
MAX_CLIP_BYTES = 50 * 2**20  # a `native` variant's clip at most: vLLM's default request body limit is far above,
# and every clip is base64-encoded into each of its requests (4/3 of its size)
MAX_VIDEO_FPS = 30.0


class VideoVariant(Section):
    """One entry of ``egonormia.frames.variants``: how the model is shown the context video (issue 31).

    ``strip`` (the official one, named ``video``): the frames strip the rest of ``egonormia.frames`` configures.
    ``frames`` (named ``video:frames<count>`` or ``video:frames<per_second>fps``): ``count`` frames sampled uniformly
    over the clip (first and last included), or ``per_second`` frames a second from t = 0, each its own image part
    ``height`` px high, in time order, each after a text part giving its time stamp.
    ``native`` (named ``video:native``): the clip itself as a ``video_url`` part (an ``mp4`` data URL, the form vLLM's
    OpenAI-compatible server reads), copied as fetched, or re-encoded at ``height`` px and ``fps`` frames a second when
    either is set; a clip over ``max_bytes`` fails its clip. Sent only to models whose endpoint declares video input
    (``video_input: true`` in its model entry).
    """

    kind: Literal["strip", "frames", "native"]
    count: Annotated[int, Field(ge=1, le=MAX_VARIANT_FRAMES)] | None = None  # frames
    per_second: Annotated[float, Field(ge=0.05, le=MAX_VIDEO_FPS)] | None = None  # frames (a name without exponent)
    height: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)] | None = None  # frames (required), native (re-encode)
    fps: Annotated[float, Field(gt=0, le=MAX_VIDEO_FPS)] | None = None  # native: re-encode at this frame rate
    max_bytes: Annotated[int, Field(ge=1024, le=MAX_CLIP_BYTES)] | None = None  # native (required)

    @property
    def name(self) -> str:
        """The setting name its rows record: ``video`` for the strip, ``video:<what>`` for the others."""
        if self.kind == "strip":
            return "video"
        if self.kind == "native":
            return "video:native"
        return f"video:frames{self.count}" if self.count is not None else f"video:frames{self.per_second:g}fps"

    @property
    def folder(self) -> str:
        """Its files' folder under data/egonormia/frames (the strip's are the folder itself)."""
        return self.name.partition(":")[2]

    @model_validator(mode="after")
    def _keys_of_its_kind(self) -> VideoVariant:
        allowed = {
            "strip": set(),
            "frames": {"count", "per_second", "height"},
            "native": {"height", "fps", "max_bytes"},
        }
        for key in ("count", "per_second", "height", "fps", "max_bytes"):
            if getattr(self, key) is not None and key not in allowed[self.kind]:
                raise ValueError(f"{key} does not apply to kind {self.kind} (its keys: {sorted(allowed[self.kind])})")
        if self.kind == "frames" and (self.count is None) == (self.per_second is None):
            raise ValueError("kind frames needs exactly one of count (frames over the clip) or per_second")
        if self.kind == "frames" and self.height is None:
            raise ValueError("kind frames needs height (each frame's height in px)")
        if self.kind == "native" and self.max_bytes is None:
            raise ValueError("kind native needs max_bytes (the largest clip sent)")
        return self


def _one_strip_unique_names(variants: list[VideoVariant]) -> list[VideoVariant]:
    names = [variant.name for variant in variants]
    if names.count("video") != 1:
        raise ValueError(
            "exactly one variant must be kind strip (the official one, named video): the others are compared with it"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"two variants are both named {twice[0]!r}")
    return variants


STRIP = VideoVariant(kind="strip")  # the official variant, and the default list's one entry


def video_settings(settings: Sequence[str], variants: Sequence[VideoVariant]) -> list[str]:
    """The settings the infer stage runs (``egonormia.infer.settings``), the video setting as each variant's name
    (``video`` first)."""
    names = []
    for setting in settings:
        names += [variant.name for variant in variants] if setting == "video" else [setting]
    return names


class FramesSettings(Section):
    """``egonormia.frames``: the frames strip of the video setting, and the video variants.

    ``source: dataset`` takes the dataset's pinned ``frame_all_prev.jpg`` (what the official runs send);
    ``video`` renders from ``video_prev.mp4`` at ``fps``, each frame ``frame_height`` px high, left to right,
    scaled down only when the strip would exceed ``max_width`` (at most ``MAX_IMAGE_SIDE``), decoded by ``reader``.
    ``variants`` (``VideoVariant``): how the video setting is shown, each run as a setting of its own name; the
    variants other than the strip are rendered from ``video_prev.mp4`` by ``reader`` whatever ``source`` says.
    """

    source: Literal["dataset", "video"]
    reader: Literal["decord", "pyav"]  # egoeval.video.FRAME_READERS
    fps: Annotated[float, Field(gt=0, le=30)]
    frame_height: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]
    max_width: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]
    jpeg_quality: Annotated[int, Field(ge=1, le=100)]
    workers: Annotated[int, Field(ge=1, le=256)]
    variants: Annotated[
        list[VideoVariant], Field(min_length=1, max_length=8), AfterValidator(_one_strip_unique_names)
    ] = [STRIP]  # noqa: RUF012 - the settings are frozen


class DescribeSettings(Section):
    """``egonormia.describe``: scene descriptions for the pipeline setting."""

    source: Literal["dataset", "model"]
    max_failure_rate: Fraction


def _url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1")
    return value


MAX_BATCH_POLL_S = 3_600.0  # an hour between polls of a batch at most
MAX_BATCH_DEADLINE_S = 172_800.0  # two completion windows (24 h each): the most a run waits for its batches
BatchPollSeconds = Annotated[float, Field(gt=0, le=MAX_BATCH_POLL_S, allow_inf_nan=False)]
BatchDeadlineSeconds = Annotated[float, Field(gt=0, le=MAX_BATCH_DEADLINE_S, allow_inf_nan=False)]


class Price(Section):
    """``egonormia.model.price``: USD per million tokens, as the provider bills them."""

    input: Annotated[float, Field(ge=0, le=MAX_PRICE)]  # per million prompt tokens (images included)
    output: Annotated[float, Field(ge=0, le=MAX_PRICE)]  # per million completion tokens


class ModelSpec(Section):
    """A model entry: ``egonormia.model`` (every key written) or one of ``egonormia.baselines`` (backend and name)."""

    backend: registered(BACKENDS)  # type: ignore[valid-type]  # a name of egoeval.backends.BACKENDS
    name: NonEmptyStr
    base_url: Annotated[str | None, AfterValidator(_url)] = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "OPENAI_API_KEY"
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 8  # the model client's calls in flight at most
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = 1024
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # one call, connect to last byte
    max_retries: Annotated[int, Field(ge=0, le=100)] = 6
    retry_base_s: Annotated[float, Field(ge=0, le=3600)] = 0.5
    retry_max_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    published_as: NonEmptyStr | None = None  # the model's name in the published results (egoeval compare)
    price: Price | None = None  # for `egoeval estimate` and the run's ledger; null: tokens only, no cost
    batch_poll_s: BatchPollSeconds = 30.0  # openai_batch: seconds between polls of a submitted batch
    batch_deadline_s: BatchDeadlineSeconds = 86_400.0  # openai_batch: the most seconds a run waits for its batches
    batch_max_requests: Annotated[int, Field(ge=1, le=50_000)] = 50_000  # openai_batch: requests per batch
    video_input: bool = False  # the endpoint reads video_url parts (vLLM with a video model): the native variant
    # how the endpoint counts an image's prompt tokens, for `egoeval estimate` alone (egoeval.egonormia.estimate):
    # openai (gpt-4o's tiles) or qwen2_vl (Qwen2-VL / Qwen2.5-VL as vLLM serves them); a clip always by qwen2_vl's
    token_rule: registered(IMAGE_RULES) = "openai"  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _openai_needs_url(self) -> ModelSpec:
        if self.backend in ("openai", "openai_batch") and self.base_url is None:
            raise ValueError(f"backend {self.backend} needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.retry_base_s > self.retry_max_s:
            raise ValueError(f"retry_base_s ({self.retry_base_s}) must not exceed retry_max_s ({self.retry_max_s})")
        if self.batch_poll_s > self.batch_deadline_s:
            raise ValueError(
                f"batch_poll_s ({self.batch_poll_s:g}) must not exceed batch_deadline_s ({self.batch_deadline_s:g}): "
                "a run would give up after one poll"
            )
        return self


OPTIONAL_MODEL_KEYS = ("price",)  # the one key of a model entry egonormia.model may leave out (null: no cost)


def _every_key_written(base: type[ModelSpec]) -> type[ModelSpec]:
    """``base`` with every field required but OPTIONAL_MODEL_KEYS, each as ``base`` declares it otherwise (type,
    bounds, validators): derived, so a model entry's keys are declared once."""
    required: dict[str, Any] = {}
    for name, field in base.model_fields.items():
        if name not in OPTIONAL_MODEL_KEYS and not field.is_required():
            without_default = copy.copy(field)  # the base keeps its default
            without_default.default = PydanticUndefined
            required[name] = (field.annotation, without_default)
    derived = create_model("EvaluatedModel", __base__=base, __module__=__name__, **required)
    derived.__doc__ = "``egonormia.model``: the model under evaluation; every key is written (none hides in code)."
    return derived


EvaluatedModel = _every_key_written(ModelSpec)


class InferSettings(Section):
    """``egonormia.infer``: which settings run, the option-order seed, failure tolerance, the response cache."""

    settings: Annotated[list[Setting], Field(min_length=1), AfterValidator(unique_list)]
    seed: Seed
    max_failure_rate: Fraction
    cache_dir: NonEmptyStr


class ScoreSettings(BootstrapSettings):
    """``egonormia.score``: bootstrap intervals (the metrics' and the paired comparisons')."""


class ReportSettings(Section):
    """``egonormia.report``: its part of the report page (every image is embedded in it)."""

    clips: Annotated[int, Field(ge=1, le=10_000)]  # clips shown, those most models get wrong first


class EgoNormiaSettings(Section):
    # official: the official eval_api.py request for request; egoeval: ours (see README)
    protocol: registered(PROTOCOLS)  # type: ignore[valid-type]
    sample: SampleSettings
    fetch: FetchSettings
    frames: FramesSettings
    describe: DescribeSettings
    model: EvaluatedModel
    baselines: list[ModelSpec]
    infer: InferSettings
    score: ScoreSettings
    report: ReportSettings

    @model_validator(mode="after")
    def _unique_names(self) -> EgoNormiaSettings:
        names = [self.model.name, *(b.name for b in self.baselines)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"model names must be unique across model and baselines; {twice[0]!r} appears twice")
        for one, other in stem_clashes(names):  # the score stage would stop after every call was paid for
            raise ValueError(
                f"model names {one!r} and {other!r} would share one headline file ({file_stem(one)}.json, "
                "egoeval.headline: a name's characters a file name cannot hold are replaced, and case may not tell "
                "files apart); rename one"
            )
        for setting in self.infer.settings:  # the official results' name of every run, before any call is paid for
            for name in names:
                results_key(setting, name)
        return self

    @model_validator(mode="after")
    def _video_declared(self) -> EgoNormiaSettings:
        """A native variant is sent only to endpoints that declare video input: refused here, before any call."""
        if "video:native" not in video_settings(self.infer.settings, self.frames.variants):
            return self
        entries = [("egonormia.model", self.model)] + [
            (f"egonormia.baselines[{i}]", spec) for i, spec in enumerate(self.baselines)
        ]
        for key, spec in entries:
            if BACKENDS.get(spec.backend).supports_video is None and not spec.video_input:
                raise ValueError(
                    f"the video:native variant (egonormia.frames.variants) sends the clip as a video_url part, but "
                    f"{key}.video_input is false: model {spec.name!r} at {spec.base_url} is not declared to read "
                    "video; set it true for a video-capable endpoint (vLLM serving a video model), or drop the variant"
                )
        return self

    @model_validator(mode="after")
    def _describer_sees_images(self) -> EgoNormiaSettings:
        if self.describe.source == "model" and not BACKENDS.get(self.model.backend).supports_images:
            raise ValueError(
                f"describe.source 'model' needs a vision-language model; model.backend {self.model.backend!r} cannot "
                "see images"
            )
        return self
