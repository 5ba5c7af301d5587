"""What a hostile input costs before it is refused, and what the bounds cost on real-size inputs.

Hostile: each file is read by the reader its stage uses (``load_pickle`` for the detections pickles,
``read_tracking_annotation`` for the COCO-video annotation, ``read_mot`` and ``read_det_txt`` for the text formats), in
a fresh process that reports its wall time and peak memory (the interpreter and its imports included). Goal: every
one refused in under 5 s and under 500 MB.

Real size: the official EgoHumans test set's shapes (47,740 images; detections pickle with boxes, 17 keypoints and a
root per person; annotation with per-image extrinsics), read side by side by the bounded readers and by the
unbounded library calls (``pickle.loads``, ``json.loads``): the price of the bounds.
"""

from __future__ import annotations

import json
import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import OUT, save
from egoeval.core.stage_shell import command_env

IMAGES = 47_740  # EgoHumans' test images (ego RGB)
PEOPLE = 4  # boxes per image in the real-size pickle
GOAL_S, GOAL_MB = 5.0, 500.0


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _int4(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def _memo_doubling(levels: int, tuples: bool) -> bytes:
    """Protocol-2 opcodes leaving one object on the stack: x0 = () or [], x(k+1) = (xk, xk) or [xk, xk]; a few bytes
    a level, 2**levels leaves for whoever walks it."""
    out = b"\x80\x02" + (b")" if tuples else b"]") + b"q\x000"
    for k in range(levels):
        get = b"h" + bytes([k])
        pair = get + get + b"\x86" if tuples else b"](" + get + get + b"e"
        out += pair + b"q" + bytes([k + 1]) + b"0"  # memoize, pop
    return out + b"h" + bytes([levels])


def hostile_files(folder: Path) -> dict[str, tuple[str, Path]]:
    """name -> (reader, file) of the hostile inputs (written into ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[str, bytes]] = {}
    # 14,200 calls bytearray(70,000) kept in a list (142 KB of opcodes, 1 GB if run), then a refused global
    calls = _global("builtins", "bytearray") + b"q\x00" + b"]q\x01("
    calls += (b"h\x00(" + _int4(70_000) + b"tR") * 14_200
    files["pickle: 14,200 x bytearray(70,000) in 142 KB, then os.system"] = (
        "pickle",
        b"\x80\x02" + calls + b"e" + _global("posix", "system") + b"(X\x04\x00\x00\x00truetR.",
    )
    files["pickle: bytearray(10**9), then os.system"] = (
        "pickle",
        b"\x80\x02"
        + _global("builtins", "bytearray")
        + b"("
        + _int4(10**9)
        + b"tR"
        + _global("posix", "system")
        + b".",
    )
    spec = b"\x80\x02X\x02\x00\x00\x00f8q\x00"  # dtype('f8'), then [('a', prev), ('b', prev)] 24 times
    for k in range(1, 25):
        spec += b"](X\x01\x00\x00\x00ah" + bytes([k - 1]) + b"\x86X\x01\x00\x00\x00bh" + bytes([k - 1]) + b"\x86eq"
        spec += bytes([k])
    files["pickle: numpy.dtype of a spec shared 24 levels deep"] = (
        "pickle",
        spec + _global("numpy", "dtype") + b"h\x18\x85R.",
    )
    key = _memo_doubling(60, tuples=True)[2:]  # a dict key whose hash visits 2**60 tuples
    files["pickle: a dict key of tuples shared 60 levels deep"] = ("pickle", b"\x80\x02}" + key + b"K\x01s.")
    shared = _memo_doubling(60, tuples=False)[2:]  # lists: 2**60 leaves once walked (np.asarray of roots_3d)
    files["pickle: roots_3d of lists shared 60 levels deep"] = (
        "pickle",
        b"\x80\x02}(X\x0a\x00\x00\x00det_bboxes}X\x08\x00\x00\x00roots_3d}X\x05\x00\x00\x00a.jpg" + shared + b"su.",
    )
    files["pickle: lists nested 100,000 deep"] = ("pickle", b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".")
    files["JSON annotation: arrays nested 100,000 deep"] = ("annotation", b"[" * 100_000 + b"]" * 100_000)
    files["JSON annotation: an integer of 100,000 digits"] = ("annotation", b'{"videos": ' + b"7" * 100_000 + b"}")
    line = b"1," * (32 << 20)  # one line of 64 MB: 32 million fields
    files["MOTChallenge: one line of 64 MB"] = ("mot", line)
    files["det.txt: one line of 64 MB"] = ("det", line)
    files["MOTChallenge: a first line of 30,000 fields"] = ("mot", (b"1," * 30_000 + b"\n") * 1000)
    written = {}
    for k, (name, (reader, data)) in enumerate(files.items()):
        path = folder / f"hostile-{k}.bin"
        path.write_bytes(data)
        written[name] = (reader, path)
    return written


READERS = {
    "pickle": "from egoeval.egohumans.formats import load_pickle as read",
    "annotation": "from egoeval.egohumans.formats import read_tracking_annotation as read",
    "mot": "from functools import partial; from egoeval.tracking.mot import read_mot; "
    "read = partial(read_mot, kind='gt')",
    "det": "from functools import partial; from egoeval.egohumans.formats import read_det_txt; "
    "read = partial(read_det_txt, sequence='s')",
}
CHILD = """
import json, resource, sys, time
{imports}
from egoeval.core.errors import InputError
imports_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
try:
    read(sys.argv[1])
    outcome = "read"
except InputError as error:
    outcome = str(error).split(": ", 1)[1][:90]
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "peak_mb": peak_mb, "imports_mb": imports_mb, "outcome": outcome}}))
"""


def refuse(reader: str, path: Path) -> dict[str, Any]:
    """Read ``path`` with ``reader`` in a fresh process; its time, peak memory and outcome."""
    run = subprocess.run(
        [sys.executable, "-c", CHILD.format(imports=READERS[reader]), str(path)],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=300,
        check=False,
    )
    if run.returncode != 0:
        return {"seconds": None, "peak_mb": None, "outcome": f"exit {run.returncode}: {run.stderr[-200:]}"}
    return json.loads(run.stdout.splitlines()[-1])


def real_size_files(folder: Path) -> tuple[Path, Path]:
    """A detections pickle and an annotation of the EgoHumans test set's size (random values, official layout)."""
    rng = np.random.default_rng(0)
    names = [f"01_tagging/001_tagging/ego/aria01/images/rgb/{i:05d}.jpg" for i in range(IMAGES)]
    doc = {"det_bboxes": {}, "keypoints_3d": {}, "roots_3d": {}}
    for name in names:
        doc["det_bboxes"][name] = [rng.random((PEOPLE, 5))]
        doc["keypoints_3d"][name] = [rng.random((PEOPLE, 17, 4))]
        doc["roots_3d"][name] = [rng.random((PEOPLE, 3))]
    detections = folder / "detections_ego_rgb.pkl"
    detections.write_bytes(pickle.dumps(doc, protocol=4))
    images, annotations = [], []
    for i, name in enumerate(names):
        pose = [round(float(v), 6) for v in rng.random(12)] + [0.0, 0.0, 0.0, 1.0]
        images.append({"id": i, "video_id": 1, "frame_id": i, "file_name": name, "width": 1408, "height": 1408})
        images[-1] |= {"extrinsics": pose, "depth_path": name.replace("images", "depth")}
        for person in range(PEOPLE):
            box = [int(v) for v in rng.integers(0, 1000, 4)]
            annotations.append(
                {"id": len(annotations), "image_id": i, "video_id": 1, "category_id": 0, "instance_id": person}
                | {"bbox": box, "area": box[2] * box[3], "iscrowd": False, "ignore": False, "time_stamp": i}
            )
    annotation = folder / "tracking_ego_rgb.json"
    doc = {"categories": [{"id": 0}], "videos": [{"id": 1, "name": "v"}], "images": images}
    annotation.write_text(json.dumps(doc | {"annotations": annotations}))
    return detections, annotation


def best_of(repeats: int, call: Any) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def run() -> dict[str, Any]:
    from egoeval.core.io.bounded import read_json
    from egoeval.egohumans.formats import load_pickle

    folder = OUT / "hostile_inputs"
    hostile = {}
    print("| hostile input | reader | bytes | seconds | peak MB (imports) | outcome |\n|---|---|---:|---:|---:|---|")
    for name, (reader, path) in hostile_files(folder).items():
        hostile[name] = refuse(reader, path) | {"bytes": path.stat().st_size, "reader": reader}
        row = hostile[name]
        met = row["seconds"] is not None and row["seconds"] < GOAL_S and row["peak_mb"] < GOAL_MB
        seconds = "–" if row["seconds"] is None else f"{row['seconds']:.3f}"
        peak = "–" if row["peak_mb"] is None else f"{row['peak_mb']:.0f} ({row['imports_mb']:.0f})"
        print(f"| {name} | {reader} | {row['bytes']:,} | {seconds} | {peak} | {row['outcome']}{'' if met else ' ✗'} |")
    detections, annotation = real_size_files(folder)
    real = {
        "pickle": {
            "bytes": detections.stat().st_size,
            "bounded_s": best_of(2, lambda: load_pickle(detections)),
            "unbounded_s": best_of(2, lambda: pickle.loads(detections.read_bytes())),
        },
        "annotation": {
            "bytes": annotation.stat().st_size,
            "bounded_s": best_of(2, lambda: read_json(annotation)),
            "unbounded_s": best_of(2, lambda: json.loads(annotation.read_bytes())),
        },
    }
    print("\n| real-size input | MB | bounded reader (s) | unbounded library call (s) | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, row in real.items():
        bounded, unbounded = row["bounded_s"], row["unbounded_s"]
        print(f"| {name} | {row['bytes'] / 1e6:.0f} | {bounded:.2f} | {unbounded:.2f} | {bounded / unbounded:.1f}× |")
    result = {"hostile": hostile, "real_size": real}
    save("hostile_inputs", result)
    return result


if __name__ == "__main__":
    run()
