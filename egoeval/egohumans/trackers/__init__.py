"""The tracker registry: a ``tracker_type`` is a tracker of the pinned ultralytics (its ``TRACKER_MAP``) or one of
egoeval's own (OWN), each a module here with its YAML of defaults beside it, as ultralytics keeps its own.

A tracker is configured entirely in the settings (``egohumans.track.config.<name>``: ``tracker_type`` plus every key
of its YAML, ``ultralytics/cfg/trackers/<tracker_type>.yaml`` or ``<tracker_type>.yaml`` here, checked by
``egoeval.egohumans.settings``), so adding a run of a known tracker is a params change; adding a tracker of our own
is a module and a YAML here and an entry in OWN. egoeval's own trackers read each frame's camera pose
(``tracker.camera``, set before each ``update``):

- ``egomotion`` (egomotion.py): ByteTrack whose predicted boxes follow the wearer's known head rotation;
- ``world`` (world.py): a Kalman filter on each person's 3D root in the world frame (EgoHumans' SimpleBaseline idea),
  each box's person placed from the download's own inputs (placement.py);
- ``multiview`` (multiview.py): a take's cameras at once (TAKE_TRACKERS: ``egoeval.egohumans.tracking.track_views``):
  the world tracker per camera, its tracklets linked across cameras and time into one global id per person;
- ``linked`` (multiview.py, ``linked.yaml``): the baseline that also emits global ids: ByteTrack per camera, its
  tracks linked across cameras afterwards with the same geometry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from egoeval.core.registry import Registry
from egoeval.egohumans.settings import TrackerConfig
from egoeval.egohumans.trackers.egomotion import make_egomotion_tracker
from egoeval.egohumans.trackers.multiview import make_multiview_tracker
from egoeval.egohumans.trackers.world import make_world_tracker

OWN: Registry[Callable[[Any], Any]] = Registry("tracker")
"""egoeval's own trackers by ``tracker_type``: each a factory taking the settings namespace. Every one reads each
frame's camera pose."""
OWN.register("egomotion", make_egomotion_tracker)
OWN.register("world", make_world_tracker)
OWN.register("multiview", make_multiview_tracker)
OWN.register("linked", make_multiview_tracker)
TAKE_TRACKERS = ("multiview", "linked")  # the trackers of whole takes, whose ids are global over the take's cameras
PLACING_TRACKERS = ("world",)  # the per-sequence trackers that place each box's person in the world (placement.py)


def make_tracker(config: TrackerConfig) -> Any:
    """A new tracker of ``config.tracker_type``, with ``config``'s settings."""
    from ultralytics.trackers.track import TRACKER_MAP
    from ultralytics.utils import IterableSimpleNamespace

    args = IterableSimpleNamespace(**config.model_dump())  # what ultralytics' trackers read their settings from
    kind = config.tracker_type
    return OWN.get(kind)(args) if kind in OWN else TRACKER_MAP[kind](args)


def uses_frames(config: TrackerConfig) -> bool:
    """Whether the tracker needs each frame's image (camera motion compensation, ``gmc_method`` other than none)."""
    return getattr(config, "gmc_method", "none") != "none"


def uses_cameras(config: TrackerConfig) -> bool:
    """Whether the tracker needs each frame's camera pose (the ego-motion and world trackers)."""
    return config.tracker_type in OWN


def places_people(config: TrackerConfig) -> bool:
    """Whether the tracker places each box's person in the world frame (a take's ground plane, image size)."""
    return config.tracker_type in PLACING_TRACKERS


def tracks_takes(config: TrackerConfig) -> bool:
    """Whether the tracker tracks a take's cameras at once (``track_views``), not one sequence at a time."""
    return config.tracker_type in TAKE_TRACKERS
