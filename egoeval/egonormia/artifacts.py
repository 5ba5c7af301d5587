"""The EgoNormia artifact contract: where every stage output lives, its table schema, and one checked reader.

Stages import these names instead of each other; a reader raises InputError naming the file (and row).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from egoeval.core.errors import ArtifactUnavailable, InputError
from egoeval.core.io.bounded import read_parquet
from egoeval.core.io.paths import data_file

SETTINGS = ("blind", "pipeline", "video")  # what the model sees: options only, a scene description, frames
VIDEO_VARIANT = re.compile(r"video:(?:frames\d+|frames\d+(?:\.\d+)?fps|native)")
"""The name of a video variant's setting other than the strip (``egonormia.frames.variants``): not the official
protocol's, never ranked among published figures."""


def is_setting(name: str) -> bool:
    """Whether a table's ``setting`` value is one of ``SETTINGS`` or a video variant's name."""
    return name in SETTINGS or VIDEO_VARIANT.fullmatch(name) is not None


def is_variant(name: str) -> bool:
    """Whether a setting is a video variant other than the official strip (``video``)."""
    return VIDEO_VARIANT.fullmatch(name) is not None


def setting_kind(name: str) -> str:
    """The setting a variant belongs to (``video:frames8`` -> ``video``); a setting of ``SETTINGS`` itself."""
    return name.partition(":")[0]


SUBTASKS = ("action", "justification", "sensible")

FETCHED = Path("data/egonormia/fetched")  # the fetch stage's folder: items.parquet and videos/
ITEMS = FETCHED / "items.parquet"
FRAMES = Path("data/egonormia/frames")  # the frames stage's folder: <id>.jpg, index.parquet, a folder per variant
DESCRIPTIONS = Path("data/egonormia/descriptions.parquet")
RESPONSES = Path("data/egonormia/responses.parquet")
BATCHES = Path("data/egonormia/batches")  # backend openai_batch: every batch's request file (JSONL), as sent
BATCHES_NOTE = (  # BATCHES/README.txt: the folder is never empty (DVC warns of an empty output on every run)
    "Request files (JSONL) of the OpenAI Batch API batches the egonormia_infer stage sent, one per batch, as sent;\n"
    "none when no model is asked in batches (egonormia.model.backend or a baseline's: openai_batch).\n"
)
PREDICTIONS = Path("data/egonormia/predictions.parquet")
EVAL_JSON = Path("data/egonormia/predictions_eval.json")
METRICS_FILE = Path("metrics/egonormia.json")
HEADLINE_DIR = Path("metrics/egonormia")  # one headline row per setting and model (egoeval.headline)
CATEGORIES_FILE = Path("plots/egonormia/categories.csv")
PAIRED_FILE = Path("plots/egonormia/paired.csv")  # paired comparisons (egoeval.egonormia.paired)
CLIP_LOGS = Path("reports/clips")  # every clip's log, one HTML page each and index.html (egoeval.egonormia.clip_log)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

USAGE_COLUMNS = ("prompt_tokens", "completion_tokens")
"""The endpoint's ``usage`` for the call behind each answer (``egoeval.backends.client.CallUsage``; null: none
reported, or no reply)."""
RESPONSE_COLUMNS = (
    "id",
    "setting",
    "model",
    "backend",
    "protocol",
    "subtask",
    "permutation",
    "response",
    "error",
    "request_key",
    "served_model",  # the model the endpoint named as serving the reply ("" when it named none, or no reply)
    *USAGE_COLUMNS,
)
NOT_SENT = "not sent: "  # prefix of a response error: the protocol did not ask (an earlier answer decided it)
NO_DESCRIPTION = "no description in the dataset"  # a description's error: the dataset's text is blank
PREDICTION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("setting", pa.string()),
        ("model", pa.string()),
        ("protocol", pa.string()),
        ("action", pa.int64()),
        ("justification", pa.int64()),
        ("sensible", pa.list_(pa.int64())),
        *((f"{subtask}_error", pa.string()) for subtask in SUBTASKS),
    ]
)
PREDICTION_COLUMNS = tuple(PREDICTION_SCHEMA.names)


def clip_log_name(clip_id: str) -> str:
    """The file name of a clip's log in CLIP_LOGS (the report links it): the id itself when it is a plain file name,
    else ``clip-`` and its sha256 (an id from the dataset never names a path)."""
    if _PLAIN_NAME.fullmatch(clip_id) and not clip_id.startswith("clip-") and clip_id != "index":
        return f"{clip_id}.html"
    return f"clip-{hashlib.sha256(clip_id.encode('utf-8')).hexdigest()[:32]}.html"


def require_columns(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> None:
    """Raise InputError naming ``path`` when a column is missing."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """A parquet table with at least ``columns`` and unique string ids."""
    table = read_parquet(path)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(path, f"missing columns {missing}")
    duplicated = table["id"][table["id"].duplicated()]
    if len(duplicated):
        raise InputError(path, "duplicate id", row=duplicated.iloc[0])
    return table


def read_items(path: Path) -> pd.DataFrame:
    """items.parquet: id and the 5 aligned behaviours and justifications of every clip."""
    items = read_table(path, ["id", "behaviors", "justifications"])
    for row in items.itertuples(index=False):
        for column in ("behaviors", "justifications"):
            options = getattr(row, column)
            if len(options) != 5 or not all(isinstance(o, str) for o in options):
                raise InputError(path, f"{column} must hold 5 strings", row=row.id)
    return items


def is_jpeg(data: bytes) -> bool:
    """Whether ``data`` starts as a JPEG does (SOI ``FF D8 FF``): what is sent as ``image/jpeg`` must be one (the
    frames stage decodes each strip whole as it enters; this cheap check catches what changed since)."""
    return data[:3] == b"\xff\xd8\xff"


def _frames_file(folder: Path, name: str, clip_id: str) -> bytes:
    """A file the frames stage indexed in ``folder`` for a clip; ArtifactUnavailable saying why it cannot be sent."""
    if Path(name).name != name or name in {".", ".."}:
        raise ArtifactUnavailable(f"frames unavailable: {name!r} is not a plain file name")
    try:
        return data_file(folder, name, folder / "index.parquet", clip_id).read_bytes()
    except InputError as error:
        raise ArtifactUnavailable(f"frames unavailable: {error}") from None
    except OSError as error:
        raise ArtifactUnavailable(f"frames unavailable: cannot read {name}: {error.strerror}") from None


def _indexed(rows: dict[str, tuple[Any, str]], clip_id: str) -> Any:
    if clip_id not in rows:
        raise ArtifactUnavailable("frames unavailable: the clip is not in the frames index")
    files, error = rows[clip_id]
    if error or len(files) == 0:
        raise ArtifactUnavailable(f"frames unavailable: {error or 'no image'}")
    return files


class FrameStore:
    """The frames stage's strips, one JPEG per clip, looked up through its index (failures recorded there)."""

    def __init__(self, index: pd.DataFrame, frames_dir: Path) -> None:
        self.frames_dir = frames_dir
        self._rows = {row.id: (row.image, row.error) for row in index.itertuples(index=False)}

    def jpeg(self, clip_id: str) -> bytes:
        image = _indexed(self._rows, clip_id)
        data = _frames_file(self.frames_dir, image, clip_id)
        if not is_jpeg(data):
            raise ArtifactUnavailable(f"frames unavailable: {image} is not a JPEG")
        return data


MP4_BRAND = b"ftyp"  # an MP4's first box, at byte 4


class VariantStore:
    """A video variant's files per clip (``egoeval.egonormia.frames``: data/egonormia/frames/<folder>/, its index
    columns id, files, times, error)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        index = read_table(folder / "index.parquet", ["id", "files", "times", "error"])
        self._rows = {row.id: ((list(row.files), list(row.times)), row.error) for row in index.itertuples(index=False)}

    def file_names(self, clip_id: str) -> list[str]:
        """The file names the frames stage indexed for a clip (none for a clip it has none of)."""
        return [str(name) for name in self._rows.get(clip_id, (([], []), ""))[0][0]]

    def images(self, clip_id: str) -> tuple[tuple[float, bytes], ...]:
        """A ``frames`` variant's JPEGs of a clip with their times (s), in time order."""
        files, times = _indexed(self._rows, clip_id)
        if len(files) != len(times):
            raise ArtifactUnavailable(f"frames unavailable: {len(files)} files but {len(times)} time stamps")
        frames = []
        for name, time in zip(files, times, strict=True):
            data = _frames_file(self.folder, name, clip_id)
            if not is_jpeg(data):
                raise ArtifactUnavailable(f"frames unavailable: {name} is not a JPEG")
            frames.append((float(time), data))
        return tuple(frames)

    def video(self, clip_id: str) -> bytes:
        """A ``native`` variant's MP4 of a clip."""
        files, _ = _indexed(self._rows, clip_id)
        data = _frames_file(self.folder, files[0], clip_id)
        if data[4:8] != MP4_BRAND:
            raise ArtifactUnavailable(f"frames unavailable: {files[0]} is not an MP4")
        return data
