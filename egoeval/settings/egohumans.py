"""The ``egohumans`` section of params.yaml, typed and validated (machinery in ``egoeval.settings``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from egoeval.settings import Fraction, NonEmptyStr, NonNegativeInt, PositiveInt, Section, unique_list

DetectionMode = Literal["gt", "official", "file", "yolo"]


class SampleSettings(Section):
    """``egohumans.sample``: the bundled synthetic sequences."""

    sequences: PositiveInt
    frames: Annotated[int, Field(ge=2)]
    fps: Annotated[int, Field(ge=1, le=240)]
    width: Annotated[int, Field(ge=64)]
    height: Annotated[int, Field(ge=64)]
    people: PositiveInt
    seed: NonNegativeInt


class FetchSettings(Section):
    """``egohumans.fetch``: the data root (laid out as the official download), the annotation and detections in it,
    pinned by a sha256 manifest."""

    source: Literal["sample", "local"]
    path: NonEmptyStr  # the data root; images' file_name are relative to it
    annotation: NonEmptyStr  # relative to the root; {modality} is filled in
    modality: Literal["ego_rgb", "ego_slam", "exo"]
    manifest: NonEmptyStr | None
    detections: NonEmptyStr | None  # detections the user brings (mode file), relative to the root
    duplicate_videos: Literal["error", "drop"]

    @model_validator(mode="after")
    def _relative(self) -> FetchSettings:
        for key in ("annotation", "detections"):
            value = getattr(self, key)
            if value is not None and (value.startswith("/") or ".." in value.split("/")):
                raise ValueError(f"{key} must be a path relative to the data root (path), got {value!r}")
        return self


class DetectSettings(Section):
    """``egohumans.detect``: detection modes and the YOLO detector (local weights only)."""

    modes: Annotated[list[DetectionMode], Field(min_length=1), AfterValidator(unique_list)]
    yolo_weights: NonEmptyStr | None
    yolo_model: NonEmptyStr
    yolo_conf: Fraction
    yolo_batch: PositiveInt
    yolo_imgsz: Annotated[int, Field(ge=32, le=4096, multiple_of=32)]


class TrackerSettings(Section):
    """Keys shared by the ultralytics trackers (``ultralytics/cfg/trackers/<name>.yaml``)."""

    track_high_thresh: Fraction
    track_low_thresh: Fraction
    new_track_thresh: Fraction
    track_buffer: PositiveInt
    match_thresh: Fraction
    fuse_score: bool

    @model_validator(mode="after")
    def _ordered(self) -> TrackerSettings:
        if self.track_low_thresh > self.track_high_thresh:
            raise ValueError(
                f"track_low_thresh ({self.track_low_thresh}) must not exceed track_high_thresh "
                f"({self.track_high_thresh})"
            )
        return self


class ByteTrackSettings(TrackerSettings):
    tracker_type: Literal["bytetrack"]


class BotSortSettings(TrackerSettings):
    tracker_type: Literal["botsort"]
    gmc_method: Literal["none", "sparseOptFlow", "orb", "sift", "ecc"]
    proximity_thresh: Fraction
    appearance_thresh: Fraction
    with_reid: bool
    model: NonEmptyStr


class TrackSettings(Section):
    """``egohumans.track``: which trackers run, and each one's settings."""

    trackers: Annotated[list[Literal["bytetrack", "botsort"]], Field(min_length=1), AfterValidator(unique_list)]
    bytetrack: ByteTrackSettings
    botsort: BotSortSettings


class ScoreSettings(Section):
    """``egohumans.score``: the evaluation's rules and the matching threshold."""

    protocol: Literal["official", "trackeval"]
    iou_threshold: Annotated[float, Field(gt=0, le=1)]


class EgoHumansSettings(Section):
    sample: SampleSettings
    fetch: FetchSettings
    detect: DetectSettings
    track: TrackSettings
    score: ScoreSettings
