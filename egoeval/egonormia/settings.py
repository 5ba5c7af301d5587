"""The ``egonormia`` section of the params, typed and validated (machinery in ``egoeval.settings``)."""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, create_model, model_validator
from pydantic_core import PydanticUndefined

from egoeval.backends import BACKENDS
from egoeval.egonormia.result_names import results_key
from egoeval.headline import file_stem, stem_clashes
from egoeval.registry import Registry
from egoeval.settings import BootstrapSettings, Fraction, NonEmptyStr, Section, Seed, registered, unique_list

Setting = Literal["blind", "pipeline", "video"]
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


class FramesSettings(Section):
    """``egonormia.frames``: the frames strip of the video setting.

    ``source: dataset`` takes the dataset's pinned ``frame_all_prev.jpg`` (what the official runs send);
    ``video`` renders from ``video_prev.mp4`` at ``fps``, each frame ``frame_height`` px high, left to right,
    scaled down only when the strip would exceed ``max_width`` (at most ``MAX_IMAGE_SIDE``), decoded by ``reader``.
    """

    source: Literal["dataset", "video"]
    reader: Literal["decord", "pyav"]  # egoeval.video.FRAME_READERS
    fps: Annotated[float, Field(gt=0, le=30)]
    frame_height: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]
    max_width: Annotated[int, Field(ge=16, le=MAX_IMAGE_SIDE)]
    jpeg_quality: Annotated[int, Field(ge=1, le=100)]
    workers: Annotated[int, Field(ge=1, le=256)]


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
    def _describer_sees_images(self) -> EgoNormiaSettings:
        if self.describe.source == "model" and not BACKENDS.get(self.model.backend).supports_images:
            raise ValueError(
                f"describe.source 'model' needs a vision-language model; model.backend {self.model.backend!r} cannot "
                "see images"
            )
        return self
