"""The ``egohumans`` section of the params, typed and validated (machinery in ``egoeval.core.settings``)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from egoeval.core.io.paths import relative_path_problem
from egoeval.core.settings import BootstrapSettings, Fraction, NonEmptyStr, Section, Seed, registered, unique_list
from egoeval.egohumans.evaluators import EVALUATORS

DetectionMode = Literal["gt", "official", "file", "yolo"]
Modality = Literal["ego_rgb", "ego_slam", "exo"]
MAX_SEQUENCES = 100_000  # far above the EgoHumans download's (a few hundred camera sequences)
MAX_FRAMES = 1_000_000  # frames a track's buffer may span: over nine hours at 30 fps


class SampleSettings(Section):
    """``egohumans.sample``: the bundled synthetic multi-view takes."""

    sequences: Annotated[int, Field(ge=1, le=100)]
    frames: Annotated[int, Field(ge=2, le=100_000)]
    fps: Annotated[int, Field(ge=1, le=240)]
    width: Annotated[int, Field(ge=64, le=4096)]
    height: Annotated[int, Field(ge=64, le=4096)]
    people: Annotated[int, Field(ge=2, le=64)]  # everyone wears Aria glasses: one ego view each
    exo_cameras: Annotated[int, Field(ge=0, le=64)]  # static secondary cameras
    seed: Seed


class FetchSettings(Section):
    """``egohumans.fetch``: the data root (laid out as the official download), the annotation and detections in it,
    pinned by a sha256 manifest."""

    source: Literal["sample", "local"]
    path: NonEmptyStr  # the data root; images' file_name are relative to it
    annotation: NonEmptyStr  # relative to the root; {modality} is filled in
    modality: Modality | Annotated[list[Modality], Field(min_length=1), AfterValidator(unique_list)]  # one or several
    manifest: NonEmptyStr  # the sha256 manifest pinning every file read under the root
    detections: NonEmptyStr | None  # detections the user brings (mode file), relative to the root
    duplicate_videos: Literal["error", "drop"]
    camera_model: Literal["aria_fisheye", "pinhole"]  # how the calibration's 15 intrinsics map rays to pixels
    # a smoke run: the first N sequences by name (null: every one)
    limit: Annotated[int, Field(ge=1, le=MAX_SEQUENCES)] | None = None

    @field_validator("manifest", mode="before")
    @classmethod
    def _manifest_named(cls, value: Any) -> Any:
        if value is None:
            raise ValueError(
                "must name the sha256 manifest pinning the inputs (python -m stages.egohumans.fetch --write-manifest "
                "ROOT writes ROOT/manifest.sha256)"
            )
        return value

    @model_validator(mode="after")
    def _relative(self) -> FetchSettings:
        for key in ("annotation", "detections"):
            value = getattr(self, key)
            if value is not None and relative_path_problem(value) is not None:
                raise ValueError(f"{key} must be a path relative to the data root (path), got {value!r}")
        return self


def _architecture(value: str) -> str:
    if not value.endswith((".yaml", ".yml")):
        raise ValueError(f"must be an architecture .yaml of the pinned ultralytics (e.g. yolo11n.yaml), got {value!r}")
    return value


class DetectSettings(Section):
    """``egohumans.detect``: detection modes and the YOLO detector (local weights only)."""

    modes: Annotated[list[DetectionMode], Field(min_length=1), AfterValidator(unique_list)]
    yolo_weights: NonEmptyStr | None  # a local .pt file, or "arch-only" (the untrained yolo_model)
    yolo_model: Annotated[NonEmptyStr, AfterValidator(_architecture)]  # what yolo_weights: arch-only builds
    yolo_conf: Fraction
    yolo_batch: Annotated[int, Field(ge=1, le=1024)]
    yolo_imgsz: Annotated[int, Field(ge=32, le=4096, multiple_of=32)]

    @model_validator(mode="after")
    def _weights_for_yolo(self) -> DetectSettings:
        if "yolo" in self.modes and self.yolo_weights is None:
            raise ValueError(
                "mode yolo needs yolo_weights: the path of a local YOLO weights file (.pt; nothing is downloaded), "
                "or 'arch-only' for the untrained architecture"
            )
        return self


@cache
def packaged_trackers() -> dict[str, dict[str, Any]]:
    """Every tracker the pinned ultralytics ships (``cfg/trackers/<type>.yaml``, one per ``TRACKER_MAP`` entry) with
    its default settings; read from the package's files, without importing ultralytics."""
    try:
        spec = importlib.util.find_spec("ultralytics")
    except ImportError:  # a finder that refuses it: as good as absent
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {}  # _packaged_keys names the missing package
    folder = Path(next(iter(spec.submodule_search_locations))) / "cfg" / "trackers"
    trackers = {path.stem: yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))}
    own = {path.stem: yaml.safe_load(path.read_text()) for path in OWN_TRACKERS}
    return {**trackers, **own}


# egoeval's own trackers (egoeval.egohumans.trackers), each with its YAML of defaults beside its module
OWN_TRACKERS = sorted((Path(__file__).parent / "trackers").glob("*.yaml"))
# The range of every number of a tracker's YAML beyond the shared keys TrackerConfig types: egoeval's own trackers'
# and ultralytics' shares and similarities by name; any other is a frame count (an integer) or a weight, scale or
# cost (a number; every packaged default lies in [0, 1.1]).
EXTRA_RANGES = {"root_noise": (0.0, 1.0), "walk_noise_m": (1e-6, 1.0), "gate_probability": (0.5, 0.999999)}
EXTRA_RANGES |= {"size_noise": (0.01, 1.0), "person_height_m": (0.5, 2.5), "eye_height_m": (0.5, 2.5)}
EXTRA_RANGES |= {key: (0.0, 1.0) for key in ("proximity_thresh", "appearance_thresh", "alpha_fixed_emb")}
EXTRA_INT_RANGE, EXTRA_FLOAT_RANGE = (0, MAX_FRAMES), (0.0, 10.0)


def extra_range(key: str, default: float) -> tuple[float, float]:
    """The bounds of a tracker YAML's number ``key`` (its packaged ``default`` tells an integer from a number)."""
    return EXTRA_RANGES.get(key) or (EXTRA_INT_RANGE if isinstance(default, int) else EXTRA_FLOAT_RANGE)


GMC_METHODS = ("none", "sparseOptFlow", "orb", "sift", "ecc")


class TrackerConfig(Section):
    """One tracker run: ``tracker_type`` (a tracker of the pinned ultralytics or of egoeval.egohumans.trackers) and
    every key of its packaged YAML.

    The keys all trackers share are typed here; the others must be exactly the packaged YAML's, each of its
    default's type (an integer is a valid number). ``gmc_method`` (where the tracker has it) is one of GMC_METHODS.
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    tracker_type: NonEmptyStr
    track_high_thresh: Fraction
    track_low_thresh: Fraction
    new_track_thresh: Fraction
    track_buffer: Annotated[int, Field(ge=1, le=MAX_FRAMES)]
    match_thresh: Fraction

    @model_validator(mode="after")
    def _packaged_keys(self) -> TrackerConfig:
        trackers = packaged_trackers()
        if not trackers:
            raise ValueError(
                f"tracker_type {self.tracker_type!r}: every tracker (egoeval's own are built on its ByteTrack) needs "
                "the package ultralytics, which cannot be imported in this environment: install the project's "
                "dependencies (make setup, or pip install -e .)"
            )
        if self.tracker_type not in trackers:
            raise ValueError(f"tracker_type {self.tracker_type!r} must be one of {sorted(trackers)} (ultralytics')")
        if self.track_low_thresh > self.track_high_thresh:
            raise ValueError(
                f"track_low_thresh ({self.track_low_thresh}) must not exceed track_high_thresh "
                f"({self.track_high_thresh})"
            )
        defaults = trackers[self.tracker_type]
        extra = dict(self.model_extra or {})
        typed = set(type(self).model_fields)
        missing = sorted(set(defaults) - typed - set(extra))
        unknown = sorted(set(extra) - set(defaults))
        if missing or unknown:
            raise ValueError(
                f"{self.tracker_type} takes the keys of its packaged YAML: missing {missing}, unknown {unknown}"
            )
        for key, value in extra.items():
            default = defaults[key]
            if isinstance(default, bool):
                ok, what = isinstance(value, bool), "true or false"
            elif isinstance(default, int | float):
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                ok = ok and (isinstance(value, int) or not isinstance(default, int))
                what = "an integer" if isinstance(default, int) else "a number"
            else:
                ok, what = isinstance(value, str), "a string"
            if not ok:
                raise ValueError(f"{key} = {value!r}: must be {what} (as in {self.tracker_type}.yaml)")
        for key, value in extra.items():
            default = defaults[key]
            if isinstance(default, int | float) and not isinstance(default, bool):
                low, high = extra_range(key, default)
                if not low <= value <= high:  # NaN too
                    raise ValueError(f"{key} = {value!r}: must lie in [{low}, {high}]")
        if "gmc_method" in extra and extra["gmc_method"] not in GMC_METHODS:
            raise ValueError(f"gmc_method = {extra['gmc_method']!r}: must be one of {list(GMC_METHODS)}")
        if extra.get("with_reid"):
            raise ValueError("with_reid must be false (appearance ReID needs a model, and nothing is downloaded)")
        return self


class TrackSettings(Section):
    """``egohumans.track``: which configured trackers run (names of ``config`` entries), and each one's settings."""

    trackers: Annotated[list[NonEmptyStr], Field(min_length=1), AfterValidator(unique_list)]
    config: dict[NonEmptyStr, TrackerConfig]

    @model_validator(mode="after")
    def _configured(self) -> TrackSettings:
        for i, name in enumerate(self.trackers):
            if name not in self.config:
                raise ValueError(f"trackers[{i}] = {name!r} has no entry in config (configured: {sorted(self.config)})")
            if "-" in name or "/" in name:
                raise ValueError(f"trackers[{i}] = {name!r}: a run name has no '-' or '/'")
        return self


class CrossViewScoreSettings(Section):
    """``egohumans.score.cross_view``: scoring across a take's views (egoeval.tracking.crossview)."""

    distance_m: Annotated[float, Field(gt=0, le=100)]  # the world frame: a match at this distance or nearer
    zero_distance_m: Annotated[float, Field(gt=0, le=100)]  # similarity 1 - d / this (HOTA's alphas: 0.05 .. 0.95)
    bootstrap_block: Annotated[int, Field(ge=1, le=MAX_FRAMES)]  # time stamps per bootstrap block
    bootstrap_samples: Annotated[int, Field(ge=10, le=100_000)]
    bootstrap_seed: Seed
    confidence: Annotated[float, Field(gt=0, lt=1)]

    @model_validator(mode="after")
    def _within(self) -> CrossViewScoreSettings:
        if self.distance_m >= self.zero_distance_m:
            raise ValueError(f"distance_m ({self.distance_m}) must be below zero_distance_m ({self.zero_distance_m})")
        return self


class ScoreSettings(Section):
    """``egohumans.score``: the evaluation's rules and the matching threshold."""

    protocol: registered(EVALUATORS)  # type: ignore[valid-type]  # a name of egoeval.egohumans.evaluators.EVALUATORS
    iou_threshold: Annotated[float, Field(gt=0, le=1)]
    cross_view: CrossViewScoreSettings


class PairedSettings(BootstrapSettings):
    """``egohumans.paired``: the paired bootstrap over sequences comparing the trackers (plots/egohumans/paired.csv)."""


class CompareSettings(Section):
    """``egohumans.compare``: the published table and which of our runs stands beside which of its rows."""

    published_file: NonEmptyStr
    published: dict[NonEmptyStr, NonEmptyStr]  # our run (tracker-mode) -> a row of the published table


class ReportSettings(Section):
    """``egohumans.report``: its part of the report page (every image is embedded in it)."""

    frames: Annotated[int, Field(ge=0, le=1000)]  # frames shown where the tracking runs disagree most
    image_width: Annotated[int, Field(ge=64, le=4096)]  # frames are scaled down to this width (px)


class EgoHumansSettings(Section):
    sample: SampleSettings
    fetch: FetchSettings
    detect: DetectSettings
    track: TrackSettings
    score: ScoreSettings
    paired: PairedSettings
    compare: CompareSettings
    report: ReportSettings
