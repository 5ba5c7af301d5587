"""EgoHumans inputs: the COCO-video tracking annotation, public detections (pickle, det.txt, parquet).

Everything is validated on the way in; a bad value raises :class:`~egoeval.io.InputError` naming the file and the
row (``annotations[12]``, ``images[3]``, a 1-based line of a text file, a 0-based parquet row, an image path).

Ground truth follows the EgoHumans/mmtracking reading of the annotation: a box that misses the image, or is
narrower or lower than one pixel, is dropped; ``ignore`` or ``iscrowd`` boxes are kept with ``conf == 0`` (the
MOTChallenge mark for "ignore"); every other box has ``conf == 1``. Frames are MOTChallenge frames,
``frame = frame_id + 1``.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.io import InputError, read_json

GT_COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf"]
DETECTION_COLUMNS = ["sequence", "frame", "x", "y", "w", "h", "score"]
DETECTION_MODES = ("gt", "file", "yolo")  # ground-truth boxes, the public detections file, a YOLO model
IMAGE_COLUMNS = ["image_id", "sequence", "frame", "file_name", "width", "height", "extrinsics"]


# ----------------------------------------------------------------------------------------- restricted unpickling


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for ``bytes`` (latin-1 only; other codecs are refused)."""
    if encoding.lower().replace("_", "-") not in {"latin1", "latin-1"} or errors != "strict":
        raise pickle.UnpicklingError(f"_codecs.encode with codec {encoding!r} is not admitted")
    return text.encode("latin-1")


_ADMITTED_GLOBALS: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "bytes"): bytes,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("__builtin__", "bytearray"): bytearray,
    ("__builtin__", "bytes"): bytes,
    ("collections", "OrderedDict"): dict,
    ("_codecs", "encode"): _latin1_encode,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): np._core.multiarray.scalar,
    ("numpy._core.multiarray", "scalar"): np._core.multiarray.scalar,
    ("numpy.core.numeric", "_frombuffer"): np._core.numeric._frombuffer,
    ("numpy._core.numeric", "_frombuffer"): np._core.numeric._frombuffer,
}


class _RefusedGlobal(pickle.UnpicklingError):
    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"refused global {module}.{name}")
        self.qualified = f"{module}.{name}"


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles plain containers and NumPy arrays/scalars only; any other global is refused before it runs."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ADMITTED_GLOBALS[(module, name)]
        except KeyError:
            raise _RefusedGlobal(module, name) from None


def load_pickle(path: str | os.PathLike[str]) -> Any:
    """Load a pickle with :class:`RestrictedUnpickler`; a refused global or a broken file raises InputError."""
    try:
        with open(path, "rb") as handle:
            return RestrictedUnpickler(handle).load()
    except _RefusedGlobal as err:
        raise InputError(path, f"{err}: only containers and numpy arrays may be unpickled (nothing was run)") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise InputError(path, f"not a readable detections pickle: {err}") from None


# ----------------------------------------------------------------------------------------- COCO-video annotation


@dataclass(frozen=True)
class TrackingAnnotation:
    """A parsed ``tracking_ego_rgb.json``: sequences, their images and per-sequence ground truth."""

    path: Path
    sequences: pd.DataFrame  # name, video_id, length (frames), images, width, height, fps (NaN when unknown)
    images: pd.DataFrame  # IMAGE_COLUMNS, sorted by sequence and frame
    ground_truth: dict[str, pd.DataFrame]  # sequence -> GT_COLUMNS, sorted by frame and id


def _records(doc: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    records = doc.get(key)
    if not isinstance(records, list):
        raise InputError(path, f"top-level '{key}' must be a list")
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise InputError(path, f"'{key}' entries must be objects", row=f"{key}[{i}]")
    return records


def _field(records: list[dict[str, Any]], key: str, field: str, path: Path, default: Any = ...) -> list[Any]:
    """One field of every record; a missing field raises unless a default is given."""
    values = []
    for i, record in enumerate(records):
        if field in record:
            values.append(record[field])
        elif default is ...:
            raise InputError(path, f"missing field '{field}'", row=f"{key}[{i}]")
        else:
            values.append(default)
    return values


def _int_array(values: list[Any], key: str, field: str, path: Path) -> np.ndarray:
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InputError(path, f"'{field}' must be an integer, got {value!r}", row=f"{key}[{i}]")
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _float_matrix(values: list[Any], width: int, key: str, field: str, path: Path) -> np.ndarray:
    """Rows of ``width`` finite numbers; the first bad row is named."""
    out = np.empty((len(values), width), dtype=np.float64)
    for i, value in enumerate(values):
        try:
            row = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            row = None
        if row is None or row.shape != (width,):
            raise InputError(path, f"'{field}' must be {width} numbers, got {value!r}", row=f"{key}[{i}]")
        out[i] = row
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if bad.size:
        raise InputError(path, f"'{field}' holds NaN or infinity: {values[bad[0]]!r}", row=f"{key}[{bad[0]}]")
    return out


def _first_duplicate(keys: pd.DataFrame) -> int | None:
    dup = np.flatnonzero(keys.duplicated().to_numpy())
    return int(dup[0]) if dup.size else None


def _check_name(name: Any, path: Path, row: str) -> str:
    if not isinstance(name, str) or not name or name in {".", ".."} or "/" in name or "\\" in name:
        raise InputError(path, f"video name must be a plain file name, got {name!r}", row=row)
    return name


def _read_videos(doc: dict[str, Any], path: Path) -> pd.DataFrame:
    """``videos``: unique integer ids and unique names that are plain file names; optional fps."""
    videos = _records(doc, "videos", path)
    ids = _int_array(_field(videos, "videos", "id", path), "videos", "id", path)
    names = [_check_name(v, path, f"videos[{i}]") for i, v in enumerate(_field(videos, "videos", "name", path))]
    fps = [
        float(v) if isinstance(v, int | float) and not isinstance(v, bool) else np.nan
        for v in _field(videos, "videos", "fps", path, default=None)
    ]
    for key, column in (("id", ids), ("name", names)):
        dup = _first_duplicate(pd.DataFrame({key: column}))
        if dup is not None:
            raise InputError(path, f"video {key} {column[dup]!r} appears twice", row=f"videos[{dup}]")
    return pd.DataFrame({"video_id": ids, "name": pd.array(names, dtype="str"), "fps": fps})


def _read_images(doc: dict[str, Any], path: Path, videos: pd.DataFrame) -> pd.DataFrame:
    """``images`` as IMAGE_COLUMNS plus ``video_id``, in file order."""
    images = _records(doc, "images", path)
    ids = _int_array(_field(images, "images", "id", path), "images", "id", path)
    video_ids = _int_array(_field(images, "images", "video_id", path), "images", "video_id", path)
    frame_ids = _int_array(_field(images, "images", "frame_id", path), "images", "frame_id", path)
    widths = _int_array(_field(images, "images", "width", path), "images", "width", path)
    heights = _int_array(_field(images, "images", "height", path), "images", "height", path)
    file_names = _field(images, "images", "file_name", path)
    extrinsics = _field(images, "images", "extrinsics", path, default=[])
    name_of = dict(zip(videos["video_id"].tolist(), videos["name"].tolist(), strict=True))
    for i in range(len(images)):
        if int(video_ids[i]) not in name_of:
            raise InputError(path, f"unknown video id {video_ids[i]}", row=f"images[{i}]")
        if frame_ids[i] < 0 or widths[i] <= 0 or heights[i] <= 0:
            raise InputError(path, "frame_id must be >= 0 and width, height > 0", row=f"images[{i}]")
        if not isinstance(file_names[i], str) or not file_names[i]:
            raise InputError(path, f"file_name must be a non-empty string, got {file_names[i]!r}", row=f"images[{i}]")
        ext = extrinsics[i]
        if not isinstance(ext, list) or not all(isinstance(v, int | float) and np.isfinite(v) for v in ext):
            raise InputError(path, "extrinsics must be a list of finite numbers", row=f"images[{i}]")
    for label, keys in (
        ("image id", pd.DataFrame({"id": ids})),
        ("frame_id within its video", pd.DataFrame({"v": video_ids, "f": frame_ids})),
        ("file_name", pd.DataFrame({"f": file_names})),
    ):
        dup = _first_duplicate(keys)
        if dup is not None:
            raise InputError(path, f"duplicate {label}", row=f"images[{dup}]")
    return pd.DataFrame(
        {
            "image_id": ids,
            "video_id": video_ids,
            "sequence": pd.array([name_of[v] for v in video_ids.tolist()], dtype="str"),
            "frame": frame_ids + 1,
            "file_name": pd.array(file_names, dtype="str"),
            "width": widths,
            "height": heights,
            "extrinsics": [[float(v) for v in ext] for ext in extrinsics],
        }
    )


def _read_ground_truth(doc: dict[str, Any], path: Path, images: pd.DataFrame, videos: pd.DataFrame) -> pd.DataFrame:
    """``annotations`` as MOTChallenge rows with a ``sequence`` column (see the module docstring for the rules)."""
    category_ids = _int_array(
        _field(_records(doc, "categories", path), "categories", "id", path), "categories", "id", path
    )
    anns = _records(doc, "annotations", path)
    image_ids = _int_array(_field(anns, "annotations", "image_id", path), "annotations", "image_id", path)
    video_ids = _int_array(_field(anns, "annotations", "video_id", path), "annotations", "video_id", path)
    categories = _int_array(_field(anns, "annotations", "category_id", path), "annotations", "category_id", path)
    instances = _int_array(_field(anns, "annotations", "instance_id", path), "annotations", "instance_id", path)
    boxes = _float_matrix(_field(anns, "annotations", "bbox", path), 4, "annotations", "bbox", path)
    ignored = [
        bool(i) or bool(c)
        for i, c in zip(
            _field(anns, "annotations", "ignore", path, default=False),
            _field(anns, "annotations", "iscrowd", path, default=False),
            strict=True,
        )
    ]
    positions = pd.Index(images["image_id"]).get_indexer(image_ids)
    checks: list[tuple[Callable[[], np.ndarray], Callable[[int], str]]] = [
        (lambda: positions < 0, lambda i: f"unknown image id {image_ids[i]}"),
        (lambda: ~np.isin(video_ids, videos["video_id"]), lambda i: f"unknown video id {video_ids[i]}"),
        (lambda: ~np.isin(categories, category_ids), lambda i: f"unknown category id {categories[i]}"),
        (lambda: (boxes[:, 2] < 0) | (boxes[:, 3] < 0), lambda i: f"negative box size {boxes[i, 2:].tolist()}"),
        (
            lambda: images["video_id"].to_numpy()[positions] != video_ids,
            lambda i: f"video id {video_ids[i]} differs from its image's {images['video_id'].iloc[positions[i]]}",
        ),
        (
            lambda: pd.DataFrame({"image": image_ids, "instance": instances}).duplicated().to_numpy(),
            lambda i: f"instance id {instances[i]} appears twice in image {image_ids[i]}",
        ),
    ]
    for check, message in checks:  # in order: later checks rely on the earlier ones
        bad = np.flatnonzero(check())
        if bad.size:
            raise InputError(path, message(int(bad[0])), row=f"annotations[{bad[0]}]")
    x, y, w, h = boxes.T
    width, height = images["width"].to_numpy()[positions], images["height"].to_numpy()[positions]
    overlaps = (np.minimum(x + w, width) > np.maximum(x, 0)) & (np.minimum(y + h, height) > np.maximum(y, 0))
    gt = pd.DataFrame(
        {
            "sequence": images["sequence"].to_numpy()[positions],
            "frame": images["frame"].to_numpy()[positions],
            "id": instances,
            "x": x,
            "y": y,
            "w": w,
            "h": h,
            "conf": np.where(ignored, 0.0, 1.0),
        }
    )
    return gt[overlaps & (w >= 1) & (h >= 1)]


def read_tracking_annotation(path: str | os.PathLike[str]) -> TrackingAnnotation:
    """Read and validate a COCO-video tracking annotation (``tracking_ego_rgb.json`` layout)."""
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "the annotation must be a JSON object")
    videos = _read_videos(doc, path)
    images = _read_images(doc, path, videos)
    gt = _read_ground_truth(doc, path, images, videos)
    ground_truth = {
        name: gt.loc[gt["sequence"] == name, GT_COLUMNS].sort_values(["frame", "id"]).reset_index(drop=True)
        for name in sorted(videos["name"])
    }
    images = images.sort_values(["sequence", "frame"]).reset_index(drop=True)
    per_seq = images.groupby("sequence", sort=True).agg(
        length=("frame", "max"), images=("frame", "size"), width=("width", "max"), height=("height", "max")
    )
    sequences = videos.sort_values("name").reset_index(drop=True).join(per_seq, on="name")
    counts = ["length", "images", "width", "height"]
    sequences[counts] = sequences[counts].fillna(0).astype(np.int64)
    return TrackingAnnotation(
        path=path,
        sequences=sequences[["name", "video_id", *counts, "fps"]],
        images=images[IMAGE_COLUMNS],
        ground_truth=ground_truth,
    )


# ----------------------------------------------------------------------------------------- detections


def _validated_detections(df: pd.DataFrame, path: Path, row_of: Callable[[int], Any] | None = None) -> pd.DataFrame:
    """Check NaN, negative sizes and frames < 1; name the offending row (``row_of(i)`` or the 0-based index)."""
    values = df[["frame", "x", "y", "w", "h", "score"]].to_numpy(dtype=np.float64)
    for check, message in (
        (~np.isfinite(values).all(axis=1), "NaN or infinity in a detection"),
        ((values[:, 3] < 0) | (values[:, 4] < 0), "negative box size"),
        ((values[:, 0] < 1) | (values[:, 0] != np.round(values[:, 0])), "frame must be an integer >= 1"),
    ):
        bad = np.flatnonzero(check)
        if bad.size:
            i = int(bad[0])
            raise InputError(path, message, row=i if row_of is None else row_of(i))
    out = pd.DataFrame(
        {
            "sequence": pd.array(df["sequence"].astype(str).to_numpy(), dtype="str"),
            "frame": values[:, 0].astype(np.int64),
            "x": values[:, 1],
            "y": values[:, 2],
            "w": values[:, 3],
            "h": values[:, 4],
            "score": values[:, 5],
        }
    )
    return sort_detections(out)


def empty_detections() -> pd.DataFrame:
    """A detections table with no rows and the canonical dtypes."""
    return pd.DataFrame(
        {
            "sequence": pd.array([], dtype="str"),
            "frame": np.zeros(0, dtype=np.int64),
            **{c: np.zeros(0, dtype=np.float64) for c in ("x", "y", "w", "h", "score")},
        }
    )


def sort_detections(df: pd.DataFrame) -> pd.DataFrame:
    """The canonical row order of a detections table (for byte-identical outputs)."""
    order = ["sequence", "frame", "score", "x", "y", "w", "h"]
    ascending = [True, True, False, True, True, True, True]
    return df.sort_values(order, ascending=ascending, kind="mergesort").reset_index(drop=True)


def _box_array(value: Any) -> np.ndarray | None:
    """An N x 5 float array from a per-class list of arrays (element 0: pedestrian) or one array; None if neither."""
    if isinstance(value, list | tuple):
        if not value:
            return np.zeros((0, 5))
        value = value[0]
    if not isinstance(value, np.ndarray):
        return None
    try:
        arr = value.astype(np.float64)
    except (TypeError, ValueError):
        return None
    if arr.size == 0:
        arr = arr.reshape(0, 5)
    return arr if arr.ndim == 2 and arr.shape[1] == 5 else None


def read_detection_pickle(path: str | os.PathLike[str], images: pd.DataFrame) -> pd.DataFrame:
    """EgoHumans' detections pickle ``{"det_bboxes": {file_name: [array Nx5 x1,y1,x2,y2,score]}}``.

    Keys are the images' ``file_name`` (as mmtracking looks them up); the value is the per-class list of arrays
    (the single class, pedestrian, is element 0) or one array. ``images`` is :attr:`TrackingAnnotation.images`.
    Errors name the image path (and the box's position in its array).
    """
    path = Path(path)
    doc = load_pickle(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("det_bboxes"), dict):
        raise InputError(path, "expected a dict with a 'det_bboxes' dict keyed by image path")
    keys, arrays = list(doc["det_bboxes"]), []
    for key, value in doc["det_bboxes"].items():
        arr = _box_array(value)
        if arr is None:
            raise InputError(path, "detections must be an N x 5 array (x1, y1, x2, y2, score)", row=key)
        arrays.append(arr)
    positions = pd.Index(images["file_name"]).get_indexer(pd.Index(keys, dtype=object))
    if (positions < 0).any():
        key = keys[int(np.argmax(positions < 0))]
        raise InputError(path, f"unknown image path {key!r} (not a file_name of the annotation)", row=key)
    counts = np.array([len(a) for a in arrays], dtype=np.int64)
    boxes = np.concatenate([np.zeros((0, 5)), *arrays])
    rows = np.repeat(positions, counts)
    df = pd.DataFrame(
        {
            "sequence": images["sequence"].to_numpy()[rows],
            "frame": images["frame"].to_numpy()[rows],
            "x": boxes[:, 0],
            "y": boxes[:, 1],
            "w": boxes[:, 2] - boxes[:, 0],
            "h": boxes[:, 3] - boxes[:, 1],
            "score": boxes[:, 4],
        }
    )
    starts = np.cumsum(counts) - counts

    def row_of(i: int) -> str:
        k = int(np.searchsorted(starts, i, side="right")) - 1
        return f"{keys[k]} box {i - starts[k]}"

    return _validated_detections(df, path, row_of)


def read_det_txt(path: str | os.PathLike[str], sequence: str) -> pd.DataFrame:
    """MOTChallenge ``det.txt``: ``frame, id (-1), x, y, w, h, score[, ...]`` per line, frames 1-based."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise InputError(
            path, f"not UTF-8 text (byte {error.object[error.start]:#x}); save it as UTF-8", row=line
        ) from None
    except OSError as error:
        raise InputError(path, f"cannot be read: {error.strerror}") from None
    rows, values = [], []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.replace(" ", "").split(",")
        if len(fields) < 7:
            raise InputError(path, f"expected at least 7 comma-separated fields, got {len(fields)}", row=lineno)
        try:
            values.append([float(f) for f in fields[:7]])
        except ValueError:
            raise InputError(path, f"not a number in {line!r}", row=lineno) from None
        rows.append(lineno)
    arr = np.asarray(values, dtype=np.float64).reshape(-1, 7)
    df = pd.DataFrame(
        {
            "sequence": sequence,
            "frame": arr[:, 0],
            "x": arr[:, 2],
            "y": arr[:, 3],
            "w": arr[:, 4],
            "h": arr[:, 5],
            "score": arr[:, 6],
        }
    )
    return _validated_detections(df, path, lambda i: rows[i])


def read_detections_parquet(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The project's own detections table (``DETECTION_COLUMNS``), validated and in canonical order."""
    path = Path(path)
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise InputError(path, f"not a readable parquet file: {err}") from None
    missing = [c for c in DETECTION_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"missing columns {missing}")
    return _validated_detections(df, path)


def check_detections_known(df: pd.DataFrame, images: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Every detection must fall on an image of the annotation (known sequence and frame)."""
    known = pd.MultiIndex.from_frame(images[["sequence", "frame"]])
    found = pd.MultiIndex.from_frame(df[["sequence", "frame"]]).isin(known)
    bad = np.flatnonzero(~found)
    if bad.size:
        sequence, frame = df["sequence"].iloc[bad[0]], int(df["frame"].iloc[bad[0]])
        what = "unknown sequence" if sequence not in set(images["sequence"]) else "no image in the annotation"
        raise InputError(path, f"{what} for this detection", row=f"{sequence} frame {frame}")
