"""EgoHumans inputs: the COCO-video tracking annotation, Aria calibration, detections (pickle, det.txt, parquet).

Everything is validated on the way in; a bad value raises :class:`~egoeval.core.errors.InputError` naming the file
and the row (``annotations[12]``, ``images[3]``, a 1-based line of a text file, a 0-based parquet row, an image
path).

Ground truth follows the EgoHumans/mmtracking reading of the annotation
(:func:`~egoeval.egohumans.evaluators.dataset.dataset_keeps`): a box with no overlap with its image, with
``area <= 0`` (the annotation's ``area``; ``w * h`` where it has none) or narrower or lower than one pixel is dropped;
``ignore`` or ``iscrowd`` boxes are kept with ``conf == 0`` (the MOTChallenge mark for "ignore"); every other box has
``conf == 1``. Frames are MOTChallenge frames, ``frame = frame_id + 1``; the
boxes of a frame keep the annotation's order (mmtracking's, which decides exact ties in the matching).

Images keep what the ego-motion work needs: ``extrinsics`` as a 4 x 4 world-to-camera matrix flattened row-major
(the official 16 numbers; a 3 x 4 ``[R | t]`` gets the row ``0 0 0 1``; none: an empty list), ``time_stamp`` (the
annotations' ``time_stamp``, one per image) and, for Aria images (``<seq>/ego/ariaXX/images/{rgb,left,right}/N.jpg``),
the per-frame calibration file ``<seq>/ego/ariaXX/calib/N.txt`` (:func:`read_aria_calibration`).

Duplicate video names (the official concatenation scripts list ``003_fencing`` twice, so its videos, images and
annotations appear twice) are an error by default; ``duplicate_videos="drop"`` keeps the first video of each name and
drops the later ones with their images and annotations (the names of the dropped ones are reported).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError, RefusedPickleGlobal
from egoeval.core.io.bounded import MAX_DEPTH, MAX_ELEMENTS, read_bounded, read_json, read_parquet, read_text
from egoeval.core.io.paths import relative_path_problem
from egoeval.egohumans.evaluators.dataset import dataset_keeps
from egoeval.egohumans.official_conversion import decode_released_roots
from egoeval.tracking.mot import WORLD_COLUMNS

GT_COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf"]
# a person's metric 3D root (pelvis) in world coordinates, metres, ONLY where the user's own detections carry one
# (mode file: det.txt's x, y, z, the roots of the user's pickle or parquet); NaN elsewhere (modes gt, official, yolo)
ROOT_COLUMNS = WORLD_COLUMNS
# the released pickle's roots_3d decoded for what they hold (decode_released_roots): the relative MiDaS depth value
# of the box, NOT metres and not comparable between frames (an unknown scale and shift each); NaN elsewhere
RELEASED_DEPTH = "released_depth"
DETECTION_COLUMNS = ["sequence", "frame", "x", "y", "w", "h", "score", *ROOT_COLUMNS, RELEASED_DEPTH]
# the released roots_3d's centre pixel may lie up to a pixel right of / below the released box's centre (the official
# box ends are int(bbx + bbw), the pixel bbx + bbw / 2), plus rounding
RELEASED_CENTRE_TOLERANCE_PX = 1.05
# ground-truth boxes, the released pickle (ground-truth boxes, score 1.0), detections the user brings, a YOLO model
DETECTION_MODES = ("gt", "official", "file", "yolo")
MODALITIES = ("ego_rgb", "ego_slam", "exo")
DUPLICATE_VIDEOS = ("error", "drop")
IMAGE_COLUMNS = ["image_id", "sequence", "frame", "file_name", "width", "height", "extrinsics", "time_stamp"]
ARIA_IMAGE = re.compile(r"^(?P<root>(?:.*/)?ego/aria\d+)/images/(?P<camera>rgb|left|right)/(?P<stem>[^/]+)\.[^/.]+$")
CALIB_CAMERAS = ("rgb", "left", "right")  # the order of the camera pairs in a calib file
CALIB_INTRINSICS = 15  # Aria's fisheye model (FisheyeRadTanThinPrism): f, cx, cy, 6 radial, 2 tangential, 4 prism
CALIB_EXTRINSICS = 12
MAX_NAME_LENGTH = 200  # a video name, which names files

# Physical bounds of the numbers the data files give, each enforced where the number enters (the annotation, a calib
# file, the COLMAP files, a fit_poses3d file): a value beyond them is a broken file, never a result.
MAX_WORLD_M = 1000.0  # |x|, |y|, |z| of a camera centre or a 3D keypoint, metres from the world origin (EgoHumans'
# takes are rooms, courts and yards tens of metres across; the world origin is the anchor wearer's first pose)
FOCAL_PX = (1.0, 100_000.0)  # a focal length, pixels (Aria's RGB: about 600; a GoPro: about 900)
MAX_PRINCIPAL_PX = 100_000.0  # |cx|, |cy|, pixels
MAX_DISTORTION = 1000.0  # |k| of a distortion coefficient (Aria's and COLMAP's fisheyes: below 10)
MAX_ASPECT = 2.0  # fy / fx (and fx / fy) of a camera with two focal lengths
ROTATION_TOLERANCE = 1e-4  # |R R^T - I| of a rotation read from a file (as CameraPose checks it)


# ----------------------------------------------------------------------------------------- restricted unpickling
#
# A pickle is a program. The one read here may build plain containers and NumPy arrays and nothing else, at a cost
# bounded by its size: admitted globals only (refused before they run); callables that allocate no more than the
# stream holds (no ``bytearray(10**9)``, no ``ndarray(shape)``, no dtype built from a nested spec, no object arrays,
# whose crafted states crash NumPy); dict keys and set members that are plain values (hashing a tuple of shared
# tuples costs 2**depth); then depth and element count (a shared object counted each time it is met) within
# MAX_DEPTH and MAX_ELEMENTS before anyone walks the result. It runs on the pure-Python unpickler, whose opcodes can
# be checked one by one (the C one's cannot): about 3 s for the real EgoHumans test pickle.


def _refuse(why: str) -> NoReturn:
    raise pickle.UnpicklingError(why)


_PLAIN = (str, bytes, int, float, bool, type(None), np.generic)


def _plain(values: Iterable[Any], what: str) -> list[Any]:
    values = list(values)
    for value in values:
        if not isinstance(value, _PLAIN):
            _refuse(f"{what} must be a string or a number, got a {type(value).__name__}")
    return values


def _latin1(text: Any, encoding: Any = "utf-8", errors: Any = "strict") -> bytes:
    """``str.encode`` as protocol-2 pickles use it for bytes (latin-1 only; other codecs are refused)."""
    if not isinstance(encoding, str) or encoding.lower().replace("_", "-") not in {"latin1", "latin-1"}:
        _refuse(f"_codecs.encode with codec {encoding!r} is not admitted")
    if not isinstance(text, str) or errors != "strict":
        _refuse("_codecs.encode takes a string, strictly")
    return text.encode("latin-1")


def _binary(kind: type[bytes] | type[bytearray]) -> Callable[..., Any]:
    """``bytes``/``bytearray`` of what the stream holds (bytes, or a string in latin-1), never of a size."""

    def make(*args: Any) -> Any:
        if not args:
            return kind()
        if isinstance(args[0], bytes | bytearray) and len(args) == 1:
            return kind(args[0])
        if not isinstance(args[0], str):
            _refuse(f"{kind.__name__}() takes bytes or a latin-1 string, never a {type(args[0]).__name__}")
        return kind(_latin1(*args))

    return make


def _set_of(kind: type[set] | type[frozenset]) -> Callable[..., Any]:
    return lambda items=(): kind(_plain(items, "a set member"))


def _ordered_dict(*args: Any) -> dict[Any, Any]:
    if args:
        _refuse("collections.OrderedDict takes its items from the stream, not as arguments")
    return {}


def restricted_dtype(spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
    """A dtype from its type code (``'f8'``), as NumPy pickles it; never a nested spec, never objects."""
    if not isinstance(spec, str) or copy is not True:
        _refuse(f"numpy.dtype must be built from a type code, got {type(spec).__name__}")
    dtype = np.dtype(spec, bool(align), True)
    if dtype.hasobject:
        _refuse("arrays of Python objects are not admitted")
    return dtype


def _shape(shape: Any) -> int:
    """The element count of an array shape (a tuple of at most MAX_DEPTH sizes >= 0)."""
    if (
        not isinstance(shape, tuple)
        or len(shape) > MAX_DEPTH
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        _refuse(f"an array shape must be a tuple of sizes, got {type(shape).__name__}")
    return math.prod(shape)


def _numeric(dtype: Any) -> np.dtype:
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        _refuse("an array needs a dtype of numbers")
    return dtype


class _NDArray:
    """What ``numpy.ndarray`` unpickles to: a name for ``_reconstruct``, not a class that allocates when called."""


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """NumPy's ``_reconstruct(ndarray, (0,), b'b')``, the empty array its state is loaded into (nothing else)."""
    if not isinstance(subtype, _NDArray) or shape != (0,) or dtype not in (b"b", "b"):
        _refuse("numpy _reconstruct is admitted only as NumPy pickles arrays: (ndarray, (0,), b'b')")
    return np._core.multiarray._reconstruct(np.ndarray, (0,), b"b")


def _scalar(dtype: Any, data: Any = None) -> Any:
    dtype = _numeric(dtype)
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        _refuse(f"a numpy scalar needs {dtype.itemsize} bytes")
    return np._core.multiarray.scalar(dtype, data)


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    dtype = _numeric(dtype)
    if not isinstance(buffer, bytes | bytearray) or len(buffer) != _shape(shape) * dtype.itemsize or order not in "CF":
        _refuse("a numpy buffer must hold exactly its array's bytes")
    return np._core.numeric._frombuffer(buffer, dtype, shape, order)


def _admitted() -> dict[tuple[str, str], Any]:
    ndarray = _NDArray()
    names: dict[str, Any] = {
        "set": _set_of(set),
        "frozenset": _set_of(frozenset),
        "bytearray": _binary(bytearray),
        "bytes": _binary(bytes),
    }
    numpy = {"multiarray._reconstruct": _reconstruct, "multiarray.scalar": _scalar, "numeric._frombuffer": _frombuffer}
    return {
        **{(module, name): value for module in ("builtins", "__builtin__") for name, value in names.items()},
        ("collections", "OrderedDict"): _ordered_dict,
        ("_codecs", "encode"): _latin1,
        ("numpy", "ndarray"): ndarray,
        ("numpy", "dtype"): restricted_dtype,
        **{
            (f"{package}.{name.split('.')[0]}", name.split(".")[1]): value
            for package in ("numpy.core", "numpy._core")
            for name, value in numpy.items()
        },
    }


_ADMITTED_GLOBALS = _admitted()


class RestrictedUnpickler(pickle._Unpickler):  # the pure-Python unpickler: its opcodes can be overridden
    """Unpickles plain containers and NumPy arrays/scalars only, each opcode that could cost more than the stream
    holds checked before it runs (see the comment above)."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ADMITTED_GLOBALS[(module, name)]
        except KeyError:
            raise RefusedPickleGlobal(module, name) from None

    # opcodes that hash what the stream gives (after a MARK, ``self.stack`` holds the marked items)
    def load_setitem(self) -> None:
        _plain([self.stack[-2]], "a dict key")
        super().load_setitem()

    def load_setitems(self) -> None:
        _plain(self.stack[::2], "a dict key")
        super().load_setitems()

    def load_dict(self) -> None:
        _plain(self.stack[::2], "a dict key")
        super().load_dict()

    def load_additems(self) -> None:
        _plain(self.stack, "a set member")
        super().load_additems()

    def load_frozenset(self) -> None:
        _plain(self.stack, "a set member")
        super().load_frozenset()

    def load_build(self) -> None:
        """State for an empty array (a plain numeric one whose bytes match its shape) or a plain dtype only."""
        state, target = self.stack[-1], self.stack[-2]
        if isinstance(target, np.ndarray):
            if not (isinstance(state, tuple) and len(state) == 5):
                _refuse("an array's state must be (version, shape, dtype, fortran, bytes)")
            count, dtype = _shape(state[1]), _numeric(state[2])
            if not isinstance(state[4], bytes | bytearray) or len(state[4]) != count * dtype.itemsize:
                _refuse("an array's bytes must match its shape")
        elif isinstance(target, np.dtype):
            if not (isinstance(state, tuple) and len(state) >= 5 and state[2:5] == (None, None, None)):
                _refuse("only plain dtypes are admitted (no fields, no subarrays)")
        else:
            _refuse(f"no state may be set on a {type(target).__name__}")
        super().load_build()

    def load_by_class(self) -> None:
        _refuse("objects built from a class (NEWOBJ, OBJ, INST) are not admitted")

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = {
        **pickle._Unpickler.dispatch,
        pickle.SETITEM[0]: load_setitem,
        pickle.SETITEMS[0]: load_setitems,
        pickle.DICT[0]: load_dict,
        pickle.ADDITEMS[0]: load_additems,
        pickle.FROZENSET[0]: load_frozenset,
        pickle.BUILD[0]: load_build,
        pickle.NEWOBJ[0]: load_by_class,
        pickle.NEWOBJ_EX[0]: load_by_class,
        pickle.OBJ[0]: load_by_class,
        pickle.INST[0]: load_by_class,
    }


def _check_cost(doc: Any) -> None:
    """Refuse ``doc`` when its containers nest deeper than MAX_DEPTH, when it holds more than MAX_ELEMENTS values
    (an array counting its size; a shared object each time it is reached), or when it contains itself. Each object
    is visited once, without recursion."""
    containers = (dict, list, tuple, set, frozenset)
    cost: dict[int, tuple[int, int]] = {}  # id -> (depth, elements) of each container done
    open_ids: set[int] = set()  # containers whose parts are being costed (a path from doc)
    pending: list[tuple[Any, list[Any] | None]] = [(doc, None)]  # (container, its parts once they are pending)
    while pending:
        node, parts = pending.pop()
        if parts is not None:  # every part is costed: cost the container
            depth, count = 1, 1
            for part in parts:
                if isinstance(part, containers):
                    depth, count = max(depth, cost[id(part)][0] + 1), count + cost[id(part)][1]
                else:
                    count += part.size if isinstance(part, np.ndarray) else 1
            if depth > MAX_DEPTH:
                _refuse(f"nested more than {MAX_DEPTH} deep")
            if count > MAX_ELEMENTS:
                _refuse(f"more than {MAX_ELEMENTS:,} values (a shared object counted each time it is used)")
            cost[id(node)] = (depth, count)
            open_ids.discard(id(node))
        elif isinstance(node, containers) and id(node) not in cost:
            if id(node) in open_ids:
                _refuse("a container holds itself")
            open_ids.add(id(node))
            parts = [*node.keys(), *node.values()] if isinstance(node, dict) else list(node)
            pending.append((node, parts))
            pending.extend((part, None) for part in parts if isinstance(part, containers) and id(part) not in cost)


def load_pickle(path: str | os.PathLike[str]) -> Any:
    """Load a pickle with :class:`RestrictedUnpickler` (at most MAX_INPUT_BYTES) and bound what it built; a refused
    global, a file beyond the limits or a broken one raises InputError naming the file."""
    data = read_bounded(path)
    try:
        doc = RestrictedUnpickler(io.BytesIO(data)).load()
        _check_cost(doc)
    except RefusedPickleGlobal as err:
        raise InputError(path, f"{err}: only containers and numpy arrays may be unpickled (nothing was run)") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OverflowError,
        struct.error,
    ) as err:
        raise InputError(path, f"not a readable detections pickle: {err}") from None
    return doc


# ----------------------------------------------------------------------------------------- COCO-video annotation


@dataclass(frozen=True)
class TrackingAnnotation:
    """A parsed ``tracking_ego_rgb.json``: sequences, their images and per-sequence ground truth."""

    path: Path
    sequences: pd.DataFrame  # name, video_id, length (frames), images, width, height, fps (NaN when unknown)
    images: pd.DataFrame  # IMAGE_COLUMNS, sorted by sequence and frame; also "order" (mmtracking's image order)
    # and "file_index" (the image's position in its annotation file: images[i])
    ground_truth: dict[str, pd.DataFrame]  # sequence -> GT_COLUMNS by frame, a frame's boxes in file order
    dropped_videos: list[str]  # duplicate video names dropped (duplicate_videos="drop")


def drop_duplicate_videos(doc: dict[str, Any], path: Path, policy: str) -> list[str]:
    """Apply the duplicate-video policy to the raw JSON in place; returns the names whose later copies were dropped."""
    if policy not in DUPLICATE_VIDEOS:
        raise InputError(path, f"duplicate_videos must be one of {DUPLICATE_VIDEOS}, got {policy!r}")
    videos = _records(doc, "videos", path)
    first: dict[Any, int] = {}
    kept, dropped_ids, dropped_names = [], set(), []
    for i, video in enumerate(videos):
        name = video.get("name")
        if name not in first:
            first[name] = i
            kept.append(video)
            continue
        if policy == "error":
            raise InputError(
                path,
                f"video name {name!r} appears twice (videos[{first[name]}] and videos[{i}]; the official concatenation "
                "scripts list 003_fencing twice): set egohumans.fetch.duplicate_videos: drop to keep the first copy",
                row=f"videos[{i}]",
            )
        dropped_ids.add(video.get("id"))
        dropped_names.append(str(name))
    if dropped_ids:
        dropped_ids -= {v.get("id") for v in kept}
        doc["videos"] = kept
        doc["images"] = [i for i in _records(doc, "images", path) if i.get("video_id") not in dropped_ids]
        doc["annotations"] = [a for a in _records(doc, "annotations", path) if a.get("video_id") not in dropped_ids]
    return sorted(set(dropped_names))


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
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not _INT64_MIN <= value <= _INT64_MAX:
            message = f"'{field}' must be an integer of at most 64 bits, got {_shown(value)}"
            raise InputError(path, message, row=f"{key}[{i}]")
    return np.asarray(values, dtype=np.int64).reshape(-1)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _float_matrix(values: list[Any], width: int, key: str, field: str, path: Path) -> np.ndarray:
    """Rows of ``width`` finite numbers; the first bad row is named."""
    out = np.empty((len(values), width), dtype=np.float64)
    for i, value in enumerate(values):
        numbers = isinstance(value, list) and len(value) == width
        if not numbers or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            raise InputError(path, f"'{field}' must be {width} numbers, got {_shown(value)}", row=f"{key}[{i}]")
        try:
            out[i] = value
        except OverflowError:  # an integer beyond a float
            raise InputError(
                path, f"'{field}' holds a number beyond a float: {_shown(value)}", row=f"{key}[{i}]"
            ) from None
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if bad.size:
        raise InputError(path, f"'{field}' holds NaN or infinity: {values[bad[0]]!r}", row=f"{key}[{bad[0]}]")
    return out


def _finite(value: Any) -> bool:
    """Whether a JSON value is a finite number (an integer too large for a float is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    """A value for a message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}…"


def _first_duplicate(keys: pd.DataFrame) -> int | None:
    dup = np.flatnonzero(keys.duplicated().to_numpy())
    return int(dup[0]) if dup.size else None


def _check_name(name: Any, path: Path, row: str) -> str:
    """A video name, which names files (``gt/<name>.txt``, ``<run>/<name>.txt``): a plain, visible file name."""
    plain = isinstance(name, str) and 0 < len(name) <= MAX_NAME_LENGTH and not name.startswith(".")
    if not plain or "/" in name or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError(
            path,
            f"video name must be a plain file name (at most {MAX_NAME_LENGTH} characters, no '/', no control "
            f"character, no leading '.'), got {_shown(name)}",
            row=row,
        )
    return name


def _read_videos(doc: dict[str, Any], path: Path) -> pd.DataFrame:
    """``videos``: unique integer ids and unique names that are plain file names; optional fps."""
    videos = _records(doc, "videos", path)
    ids = _int_array(_field(videos, "videos", "id", path), "videos", "id", path)
    names = [_check_name(v, path, f"videos[{i}]") for i, v in enumerate(_field(videos, "videos", "name", path))]
    fps = [float(v) if _finite(v) else np.nan for v in _field(videos, "videos", "fps", path, default=None)]
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
        if (problem := relative_path_problem(file_names[i])) is not None:
            raise InputError(path, f"file_name: {problem}", row=f"images[{i}]")
        extrinsics[i] = _extrinsics(extrinsics[i], path, f"images[{i}]")
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
            "extrinsics": extrinsics,
        }
    )


def _extrinsics(value: Any, path: Path, row: str) -> list[float]:
    """A 4 x 4 world-to-camera matrix, row-major (16 numbers; 12 = 3 x 4 gets ``0 0 0 1``), or ``[]`` when absent."""
    if value is None or value == []:
        return []
    if not isinstance(value, list) or not all(_finite(v) for v in value):
        raise InputError(path, "extrinsics must be a list of finite numbers", row=row)
    if len(value) == CALIB_EXTRINSICS:
        value = [*value, 0.0, 0.0, 0.0, 1.0]
    if len(value) != 16:
        raise InputError(path, f"extrinsics must hold 16 numbers (4 x 4) or 12 (3 x 4), got {len(value)}", row=row)
    if not np.allclose(value[12:], [0, 0, 0, 1], atol=1e-6):
        raise InputError(path, f"extrinsics' last row must be 0 0 0 1, got {value[12:]}", row=row)
    if (problem := rigid_problem(np.reshape(np.asarray(value, dtype=np.float64), (4, 4))[:3])) is not None:
        raise InputError(path, f"extrinsics: {problem}", row=row)
    return [float(v) for v in value]


def rigid_problem(matrix: np.ndarray) -> str | None:
    """Why a 3 x 4 world-to-camera ``[R | t]`` is no camera pose (None when it is one): R a proper rotation within
    ROTATION_TOLERANCE, the camera centre ``-R^T t`` within MAX_WORLD_M of the world origin on each axis."""
    rotation, translation = matrix[:, :3], matrix[:, 3]
    if not np.isfinite(matrix).all():
        return "NaN or infinity in the matrix"
    if not np.allclose(rotation @ rotation.T, np.eye(3), atol=ROTATION_TOLERANCE) or np.linalg.det(rotation) < 0:
        return f"the 3 x 3 block is not a rotation (within {ROTATION_TOLERANCE:g}): {_shown(rotation.tolist())}"
    centre = -rotation.T @ translation
    if not (np.abs(centre) <= MAX_WORLD_M).all():
        return f"the camera centre {_shown(centre.tolist())} lies beyond {MAX_WORLD_M:g} m of the world origin"
    return None


def intrinsics_problem(focal: Any, centre: Any, distortion: Any) -> str | None:
    """Why camera intrinsics cannot be a camera's (None when they can): finite, each focal length in FOCAL_PX (and
    within MAX_ASPECT of each other), the principal point within MAX_PRINCIPAL_PX, each distortion coefficient
    within MAX_DISTORTION."""
    focal, centre, distortion = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (focal, centre, distortion))
    if not all(np.isfinite(v).all() for v in (focal, centre, distortion)):
        return "NaN or infinity among the intrinsics"
    if not ((focal >= FOCAL_PX[0]) & (focal <= FOCAL_PX[1])).all():
        return f"focal length {_shown(focal.tolist())} outside {FOCAL_PX[0]:g}..{FOCAL_PX[1]:g} px"
    if focal.max() > MAX_ASPECT * focal.min():
        return f"focal lengths {_shown(focal.tolist())} differ by more than a factor {MAX_ASPECT:g}"
    if not (np.abs(centre) <= MAX_PRINCIPAL_PX).all():
        return f"principal point {_shown(centre.tolist())} beyond {MAX_PRINCIPAL_PX:g} px"
    if not (np.abs(distortion) <= MAX_DISTORTION).all():
        return f"a distortion coefficient beyond {MAX_DISTORTION:g}: {_shown(distortion.tolist())}"
    return None


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
    areas = _field(anns, "annotations", "area", path, default=None)
    time_stamps = _field(anns, "annotations", "time_stamp", path, default=None)
    positions = pd.Index(images["image_id"]).get_indexer(image_ids)
    _image_time_stamps(time_stamps, positions, images, path)
    checks: list[tuple[Callable[[], np.ndarray], Callable[[int], str]]] = [
        (lambda: positions < 0, lambda i: f"unknown image id {image_ids[i]}"),
        (lambda: ~np.isin(video_ids, videos["video_id"]), lambda i: f"unknown video id {video_ids[i]}"),
        (lambda: ~np.isin(categories, category_ids), lambda i: f"unknown category id {categories[i]}"),
        (lambda: (boxes[:, 2] < 0) | (boxes[:, 3] < 0), lambda i: f"negative box size {boxes[i, 2:].tolist()}"),
        (
            lambda: ~np.isfinite(_far_corners(boxes)).all(axis=1),
            lambda i: f"the box's far corner (x + w, y + h) is beyond a float: {boxes[i].tolist()}",
        ),
        (lambda: instances < 0, lambda i: f"instance_id {instances[i]} is negative (a person's id is >= 0)"),
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
    area = np.array([w[i] * h[i] if a is None else _area(a, path, i) for i, a in enumerate(areas)], dtype=np.float64)
    width, height = images["width"].to_numpy()[positions], images["height"].to_numpy()[positions]
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
    return gt[dataset_keeps(boxes, area, width, height)]


def _area(value: Any, path: Path, index: int) -> float:
    """An annotation's ``area``: a finite number."""
    try:
        area = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan
    except OverflowError:
        area = np.nan
    if not np.isfinite(area):
        raise InputError(path, f"'area' must be a finite number, got {str(value)[:40]}", row=f"annotations[{index}]")
    return area


def _image_time_stamps(values: list[Any], positions: np.ndarray, images: pd.DataFrame, path: Path) -> None:
    """``annotations[].time_stamp`` per image (in place, column ``time_stamp``; NA when no annotation has one): an
    integer >= 0, the same for every annotation of an image, and increasing with the frames of its video (one
    camera's clock: a time stamp frozen or running back is refused at the annotation that gives it)."""
    stamps = np.full(len(images), -1, dtype=np.int64)
    given_by = np.full(len(images), -1, dtype=np.int64)  # the first annotation that gave each image its time stamp
    for i, (value, pos) in enumerate(zip(values, positions.tolist(), strict=True)):
        if value is None or pos < 0:
            continue  # unknown images are reported by the checks that follow
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
            message = f"time_stamp must be an integer >= 0 of at most 64 bits, got {_shown(value)}"
            raise InputError(path, message, row=f"annotations[{i}]")
        if stamps[pos] not in (-1, value):
            message = f"time_stamp {value} differs from {stamps[pos]} of another box in its image"
            raise InputError(path, message, row=f"annotations[{i}]")
        stamps[pos] = value
        given_by[pos] = i if given_by[pos] < 0 else given_by[pos]
    known = np.flatnonzero(stamps >= 0)
    video, frame = images["video_id"].to_numpy()[known], images["frame"].to_numpy()[known]
    order = known[np.lexsort((frame, video))]
    same_video = images["video_id"].to_numpy()[order][1:] == images["video_id"].to_numpy()[order][:-1]
    bad = np.flatnonzero(same_video & (stamps[order][1:] <= stamps[order][:-1]))
    if bad.size:
        earlier, later = int(order[bad[0]]), int(order[bad[0] + 1])
        message = (
            f"time_stamp {stamps[later]} of images[{later}] does not follow {stamps[earlier]} of images[{earlier}], "
            "its video's previous frame: a camera's time stamps must increase with its frames (frozen or reversed)"
        )
        raise InputError(path, message, row=f"annotations[{given_by[later]}]")
    images["time_stamp"] = pd.array(np.where(stamps < 0, None, stamps), dtype="Int64")


def read_tracking_annotation(path: str | os.PathLike[str], duplicate_videos: str = "error") -> TrackingAnnotation:
    """Read and validate a COCO-video tracking annotation (``tracking_ego_rgb.json`` layout)."""
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "the annotation must be a JSON object")
    dropped = drop_duplicate_videos(doc, path, duplicate_videos)
    videos = _read_videos(doc, path)
    images = _read_images(doc, path, videos)
    gt = _read_ground_truth(doc, path, images, videos)
    ground_truth = {
        name: gt.loc[gt["sequence"] == name, GT_COLUMNS].sort_values("frame", kind="stable").reset_index(drop=True)
        for name in sorted(videos["name"])
    }
    # mmtracking's image order (list-layout detections): videos in file order, then frame_id
    video_rank = pd.Series(np.arange(len(videos)), index=videos["video_id"].to_numpy())
    images["order"] = np.lexsort((images["frame"].to_numpy(), video_rank[images["video_id"]].to_numpy()))
    images["order"] = np.argsort(images["order"].to_numpy())
    images["file_index"] = np.arange(len(images))  # images[i] of the file: errors found later name it
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
        images=images[[*IMAGE_COLUMNS, "order", "file_index"]],
        ground_truth=ground_truth,
        dropped_videos=dropped,
    )


def calibration_path(file_name: str) -> tuple[str, str] | None:
    """``(calib file, camera)`` of an Aria image (``…/ego/ariaXX/images/<camera>/N.jpg`` ->
    ``…/ego/ariaXX/calib/N.txt``), or None for other images (exo cameras)."""
    match = ARIA_IMAGE.match(file_name)
    if match is None:
        return None
    return f"{match['root']}/calib/{match['stem']}.txt", match["camera"]


def read_aria_calibration(path: str | os.PathLike[str], camera: str) -> tuple[list[float], list[float]]:
    """One camera's ``(intrinsics, extrinsics)`` from an EgoHumans Aria calibration file.

    The layout the official code reads: a header line, then per person 7 lines (person id; then intrinsics and
    extrinsics lines for rgb, left and right). Intrinsics: 15 numbers (Aria's fisheye model); extrinsics: 12 (a
    3 x 4 matrix stored column-major: the official reader reshapes them to 4 x 3 and transposes).
    """
    path = Path(path)
    lines = [line.strip() for line in read_text(path).splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) != 8:
        raise InputError(path, f"expected a header and 7 lines (one person), got {len(lines)} lines")
    values = []
    for lineno in range(2, 8):
        try:
            row = [float(v) for v in lines[lineno].split()]
        except ValueError:
            raise InputError(path, f"not a number in {_shown(lines[lineno])}", row=lineno + 1) from None
        expected = CALIB_INTRINSICS if lineno % 2 == 0 else CALIB_EXTRINSICS
        if len(row) != expected or not np.isfinite(row).all():
            raise InputError(path, f"expected {expected} finite numbers, got {len(row)}", row=lineno + 1)
        if expected == CALIB_INTRINSICS:
            problem = intrinsics_problem(row[0], row[1:3], row[3:])
        else:  # 3 x 4 stored column-major, as the official reader reshapes it
            problem = rigid_problem(np.reshape(row, (4, 3)).T)
        if problem is not None:
            raise InputError(path, problem, row=lineno + 1)
        values.append(row)
    k = 2 * CALIB_CAMERAS.index(camera)
    return values[k], values[k + 1]


# ----------------------------------------------------------------------------------------- detections


def _far_corners(boxes: np.ndarray) -> np.ndarray:
    """x + w and y + h of (x, y, w, h) rows; beyond a float they are inf, with no overflow warning (it is checked)."""
    with np.errstate(over="ignore"):
        return boxes[:, :2] + boxes[:, 2:]


def _validated_detections(df: pd.DataFrame, path: Path, row_of: Callable[[int], Any] | None = None) -> pd.DataFrame:
    """Check NaN, negative sizes, frames < 1, half-given roots and infinite released depths; name the offending row
    (``row_of(i)`` or the 0-based index). Root columns or ``released_depth`` absent from ``df`` are NaN."""
    try:
        values = df[["frame", "x", "y", "w", "h", "score"]].to_numpy(dtype=np.float64)
        if all(c in df.columns for c in ROOT_COLUMNS):
            roots = df[ROOT_COLUMNS].to_numpy(dtype=np.float64)
        else:
            roots = np.full((len(df), 3), np.nan)
        depth = df[RELEASED_DEPTH].to_numpy(np.float64) if RELEASED_DEPTH in df.columns else np.full(len(df), np.nan)
    except (TypeError, ValueError) as error:
        message = f"frame, x, y, w, h, score, the roots and {RELEASED_DEPTH} must be numbers: {error}"
        raise InputError(path, message) from None
    known = np.isfinite(roots)
    for check, message in (
        (~np.isfinite(values).all(axis=1), "NaN or infinity in a detection"),
        (~np.isfinite(_far_corners(values[:, 1:5])).all(axis=1), "the box's far corner (x + w, y + h) is infinite"),
        ((values[:, 3] < 0) | (values[:, 4] < 0), "negative box size"),
        ((values[:, 0] < 1) | (values[:, 0] != np.round(values[:, 0])), "frame must be an integer >= 1"),
        (known.any(axis=1) & ~known.all(axis=1), "a 3D root must be three finite numbers, or none"),
        (np.isinf(roots).any(axis=1), "infinity in a 3D root"),
        (np.isinf(depth), f"infinity in {RELEASED_DEPTH}"),
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
            **{c: roots[:, k] for k, c in enumerate(ROOT_COLUMNS)},
            RELEASED_DEPTH: depth,
        }
    )
    return sort_detections(out)


def empty_detections() -> pd.DataFrame:
    """A detections table with no rows and the canonical dtypes."""
    return pd.DataFrame(
        {
            "sequence": pd.array([], dtype="str"),
            "frame": np.zeros(0, dtype=np.int64),
            **{c: np.zeros(0, dtype=np.float64) for c in ("x", "y", "w", "h", "score", *ROOT_COLUMNS, RELEASED_DEPTH)},
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


def read_detection_pickle(path: str | os.PathLike[str], images: pd.DataFrame, released: bool = False) -> pd.DataFrame:
    """A detections pickle in any of the four layouts mmtracking's MOTChallenge dataset accepts.

    ``{"det_bboxes": {file_name: boxes}}`` (EgoHumans' ``detections_<modality>.pkl``; other keys such as
    ``keypoints_3d`` are ignored), ``{file_name: boxes}``, ``{"det_bboxes": [boxes per image]}`` (mmtracking's
    results) and ``[boxes per image]`` (mmdet's results). Lists follow mmtracking's image order (videos in file
    order, then frame_id). ``boxes``: the per-class list of N x 5 arrays ``x1, y1, x2, y2, score`` (pedestrian is
    element 0) or one array. ``images`` is :attr:`TrackingAnnotation.images`. Errors name the image path (or list
    index) and the box's position in its array.

    ``roots_3d`` beside ``det_bboxes`` (one x, y, z per box, laid out as the boxes): in the user's own detections
    (``released`` False) each box's metric world root (the root columns); in EgoHumans' released pickle
    (``released`` True) what the official conversion wrote, decoded with the image's extrinsics
    (:func:`~egoeval.egohumans.official_conversion.decode_released_roots`) into ``released_depth`` (relative, not
    metres), the root columns left NaN; a decoded pixel away from its box's centre is an error naming the image.
    """
    path = Path(path)
    doc = load_pickle(path)
    roots_doc: Any = None
    if isinstance(doc, dict) and "det_bboxes" in doc:
        roots_doc = doc.get("roots_3d") or None  # the sample's and a pickle without 3D write {}
        doc = doc["det_bboxes"]
    if isinstance(doc, dict):
        keys, values = list(doc), list(doc.values())
        if not all(isinstance(k, str) for k in keys):
            raise InputError(path, "a dict of detections must be keyed by the images' file_name")
        positions = pd.Index(images["file_name"]).get_indexer(pd.Index(keys, dtype=object))
    elif isinstance(doc, list | tuple):
        if len(doc) != len(images):
            raise InputError(path, f"a list of detections needs one entry per image: {len(doc)} for {len(images)}")
        keys, values = [f"[{k}]" for k in range(len(doc))], list(doc)
        positions = np.argsort(images["order"].to_numpy())  # list index k -> the image of mmtracking's k-th
    else:
        raise InputError(path, "expected a dict keyed by image path (optionally under 'det_bboxes') or a list")
    arrays = []
    for key, value in zip(keys, values, strict=True):
        arr = _box_array(value)
        if arr is None:
            raise InputError(path, "detections must be an N x 5 array (x1, y1, x2, y2, score)", row=key)
        arrays.append(arr)
    if (positions < 0).any():
        key = keys[int(np.argmax(positions < 0))]
        raise InputError(path, f"unknown image path {key!r} (not a file_name of the annotation)", row=key)
    counts = np.array([len(a) for a in arrays], dtype=np.int64)
    boxes = np.concatenate([np.zeros((0, 5)), *arrays])
    roots = _pickle_roots(path, roots_doc, keys, arrays, isinstance(doc, dict))
    depth = np.full(len(boxes), np.nan)
    if released:
        depth = _released_depths(path, roots, boxes, keys, counts, images["extrinsics"].to_numpy()[positions])
        roots = np.full_like(roots, np.nan)
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
            **{c: roots[:, k] for k, c in enumerate(ROOT_COLUMNS)},
            RELEASED_DEPTH: depth,
        }
    )
    starts = np.cumsum(counts) - counts

    def row_of(i: int) -> str:
        k = int(np.searchsorted(starts, i, side="right")) - 1
        return f"{keys[k]} box {i - starts[k]}"

    return _validated_detections(df, path, row_of)


def _pickle_roots(path: Path, roots_doc: Any, keys: list[str], arrays: list[np.ndarray], keyed: bool) -> np.ndarray:
    """The ``roots_3d`` beside ``det_bboxes``, one x, y, z per box in the boxes' order (the same keys, or the same
    list positions); NaN where the pickle gives none."""
    total = sum(len(a) for a in arrays)
    if roots_doc is None:
        return np.full((total, 3), np.nan)
    if keyed != isinstance(roots_doc, dict) or not isinstance(roots_doc, dict | list | tuple):
        raise InputError(path, "roots_3d must be laid out as det_bboxes is (a dict by file_name, or a list)")
    parts = []
    for k, (key, boxes) in enumerate(zip(keys, arrays, strict=True)):
        value = roots_doc.get(key) if keyed else (roots_doc[k] if k < len(roots_doc) else None)
        if isinstance(value, list | tuple) and value and isinstance(value[0], np.ndarray):
            value = value[0]  # per class, pedestrian first, as the boxes
        if value is None:
            parts.append(np.full((len(boxes), 3), np.nan))
            continue
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            arr = np.zeros((0, 0))
        if arr.size != 3 * len(boxes) or (arr.size and (arr.ndim != 2 or arr.shape[1] != 3)):
            raise InputError(path, f"roots_3d must hold one x, y, z per box ({len(boxes)} boxes)", row=key)
        parts.append(arr.reshape(-1, 3))
    return np.concatenate([np.zeros((0, 3)), *parts])


def _released_depths(
    path: Path, roots: np.ndarray, boxes: np.ndarray, keys: list[str], counts: np.ndarray, extrinsics: np.ndarray
) -> np.ndarray:
    """The released ``roots_3d`` (one row per box, NaN where the pickle has none) decoded per image with its
    ``extrinsics`` (the annotation's, ``[]`` when it has none): each box's relative depth. A root of three NaN (the
    official mean over a box narrower than a pixel) leaves that box's depth NaN, and so does an image without
    extrinsics (``extrinsics: []``: nothing to decode with). A decoded pixel more than RELEASED_CENTRE_TOLERANCE_PX
    from its box's centre or a root half given raise InputError naming the image (and the box)."""
    depth = np.full(len(boxes), np.nan)
    start = 0
    for key, count, matrix in zip(keys, counts.tolist(), extrinsics, strict=True):
        rows = np.arange(start, start + count)
        start += count
        given = np.isfinite(roots[rows]).all(axis=1)
        if not (given | np.isnan(roots[rows]).all(axis=1)).all():
            box = int(np.flatnonzero(~given & ~np.isnan(roots[rows]).all(axis=1))[0])
            raise InputError(path, f"roots_3d box {box} is neither three finite numbers nor three NaN", row=key)
        if not given.any():
            continue
        if len(matrix) != 16:  # an image without extrinsics: nothing to decode its roots with (depth unknown)
            continue
        rows = rows[given]
        try:
            decoded = decode_released_roots(roots[rows], np.asarray(matrix, np.float64))
        except ValueError as error:
            raise InputError(path, f"cannot decode roots_3d: {error}", row=key) from None
        centre = np.stack([(boxes[rows, 0] + boxes[rows, 2]) / 2, (boxes[rows, 1] + boxes[rows, 3]) / 2], axis=1)
        off = np.abs(decoded[:, :2] - centre).max(axis=1)
        if (bad := np.flatnonzero(~(off <= RELEASED_CENTRE_TOLERANCE_PX))).size:
            k = int(bad[0])
            box = int(np.flatnonzero(given)[k])  # its place among the image's boxes
            raise InputError(
                path,
                f"roots_3d box {box} decodes to pixel ({decoded[k, 0]:.2f}, {decoded[k, 1]:.2f}) through the "
                f"image's extrinsics, not its box's centre ({centre[k, 0]:.2f}, {centre[k, 1]:.2f}): not the "
                "official conversion's roots_3d (box centre pixel and depth through the extrinsics)",
                row=key,
            )
        depth[rows] = decoded[:, 2]
    return depth


def read_det_txt(path: str | os.PathLike[str], sequence: str) -> pd.DataFrame:
    """MOTChallenge ``det.txt``: ``frame, id (-1), x, y, w, h, score[, wx, wy, wz]`` per line, frames 1-based; the
    world point ``wx, wy, wz`` (-1, -1, -1 for none, MOTChallenge's 2D convention) is the person's 3D root."""
    path = Path(path)
    lines = read_text(path).splitlines()
    rows, values = [], []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.replace(" ", "").split(",")
        if len(fields) < 7:
            raise InputError(path, f"expected at least 7 comma-separated fields, got {len(fields)}", row=lineno)
        try:
            row = [float(f) for f in fields[:7]]
            world = [float(f) for f in fields[7:10]] if len(fields) >= 10 else []
        except ValueError:
            raise InputError(path, f"not a number in {_shown(line)}", row=lineno) from None
        values.append(row + (world if world and world != [-1.0, -1.0, -1.0] else [np.nan] * 3))
        rows.append(lineno)
    arr = np.asarray(values, dtype=np.float64).reshape(-1, 10)
    df = pd.DataFrame(
        {
            "sequence": sequence,
            "frame": arr[:, 0],
            "x": arr[:, 2],
            "y": arr[:, 3],
            "w": arr[:, 4],
            "h": arr[:, 5],
            "score": arr[:, 6],
            **{c: arr[:, 7 + k] for k, c in enumerate(ROOT_COLUMNS)},
        }
    )
    return _validated_detections(df, path, lambda i: rows[i])


def read_detections_parquet(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The project's own detections table (``DETECTION_COLUMNS``; the root columns and ``released_depth`` may be left
    out), validated and in canonical order."""
    path = Path(path)
    df = read_parquet(path)
    missing = [c for c in DETECTION_COLUMNS if c not in df.columns and c not in [*ROOT_COLUMNS, RELEASED_DEPTH]]
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
