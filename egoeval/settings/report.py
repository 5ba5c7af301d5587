"""The ``report`` section of params.yaml: what the HTML report (``egoeval report``) shows, typed and validated."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from egoeval.settings import NonNegativeInt, PositiveInt, Section


class ReportSettings(Section):
    """``report``: the size of the self-contained HTML page (every image is embedded in it)."""

    clips: PositiveInt  # EgoNormia clips shown, those most models get wrong first
    egohumans_frames: NonNegativeInt  # EgoHumans frames shown where the tracking runs disagree most
    image_width: Annotated[int, Field(ge=64, le=4096)]  # EgoHumans frames are scaled down to this width (px)
