"""The official EgoHumans protocol vs mmtracking's eval_mot on py-motmetrics 1.4.0 with lap 0.4.0 in the official
environment (tests/oracle_env.py: Python 3.8, NumPy 1, built once), on the same ~200k ground-truth boxes, one run:
``egoeval.tracking.motmetrics.eval_mot`` in this process and ``egoeval score-tracks --protocol official`` as a process
on the same data written as MOTChallenge files (its start-up measured on a one-box sequence); and
``--write-manifest`` throughput on an official-layout data root.

Goals: ``egoeval score-tracks --protocol official`` (start-up, reading, validation and HOTA included) at least 10x
faster than eval_mot's own compute time in its environment, with identical numbers; pinning the 47,740 test frames
in minutes. ``python -m bench.official_protocol --baseline SRC`` adds the command run from another source tree
(``SRC/egoeval``, e.g. a ``git worktree`` of an older commit) in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from oracle_env import MotmetricsOracle, build

from bench import OUT, save
from bench.score_tracks import FRAMES, make_sequence
from egoeval.core.io.manifest import sha256_file, sha256_files
from egoeval.egohumans.evaluators import evaluator
from egoeval.egohumans.evaluators.official import official_ignore_rule
from egoeval.tracking.mot import write_mot
from egoeval.tracking.motmetrics import eval_mot

SEQUENCES = 13  # ~214k ground-truth boxes that count (2% of the rows are ignore boxes)
IMAGE = (1920, 1080)  # each sequence's imWidth x imHeight: the dataset rule drops the boxes outside it
ROUNDS = 2  # eval_mot's runs in its environment; each round also runs every command COMMAND_RUNS times
COMMAND_RUNS = 3
DATA = OUT / "official_protocol_data"
COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf"]
FIELDS = {"IDF1": "idf1", "IDP": "idp", "IDR": "idr", "MOTA": "mota", "MOTP": "motp", "Rcll": "recall"}
COUNTS = {"FP": "num_false_positives", "FN": "num_misses", "IDSW": "num_switches", "MT": "mostly_tracked"}
COUNTS |= {"PT": "partially_tracked", "ML": "mostly_lost", "Frag": "num_fragmentations"}
MANIFEST_FILES = 4000  # frames pinned (plus as many calibration files)
FRAME_BYTES = 150_000  # about an Aria RGB JPEG


def frames() -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    gt, pred = {}, {}
    for k in range(SEQUENCES):
        g, p = make_sequence(k)
        gt[f"BENCH-{k:02d}"] = pd.DataFrame(g, columns=COLUMNS).astype({"frame": np.int64, "id": np.int64})
        pred[f"BENCH-{k:02d}"] = pd.DataFrame(p, columns=COLUMNS).astype({"frame": np.int64, "id": np.int64})
    return gt, pred


def write_folders(root: Path, gt: dict[str, pd.DataFrame], pred: dict[str, pd.DataFrame]) -> tuple[Path, Path]:
    """The ground truth as a MOTChallenge tree (``<seq>/gt/gt.txt``, ``seqinfo.ini`` with the image size) and the
    tracker output as ``<seq>.txt`` files, written exactly (``write_mot``)."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "pred").mkdir(parents=True)
    for name in gt:
        (root / "gt" / name / "gt").mkdir(parents=True)
        write_mot(root / "gt" / name / "gt" / "gt.txt", gt[name])
        length = int(max(gt[name]["frame"].max(), pred[name]["frame"].max()))
        info = f"[Sequence]\nname={name}\nseqLength={length}\nimWidth={IMAGE[0]}\nimHeight={IMAGE[1]}\n"
        (root / "gt" / name / "seqinfo.ini").write_text(info)
        write_mot(root / "pred" / f"{name}.txt", pred[name])
    return root / "gt", root / "pred"


def run_command(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def max_difference(ours: dict, theirs: dict) -> tuple[float, bool]:
    """Largest percentage difference and whether every count is equal, per sequence and overall."""
    pairs = [(ours["sequences"][n], theirs["sequences"][n]) for n in theirs["sequences"]]
    pairs.append((ours["COMBINED"], theirs["COMBINED"]))
    diff = max(abs(o[k] - 100 * t[f]) for o, t in pairs for k, f in FIELDS.items())
    counts = all(o[k] == int(t[f]) for o, t in pairs for k, f in COUNTS.items())
    return float(diff), counts


def bench_protocol(baseline: Path | None = None) -> dict:
    """eval_mot in its environment (ROUNDS runs) against eval_mot here (best of 3) and ``egoeval score-tracks
    --protocol official`` as a process (best of ROUNDS x COMMAND_RUNS, interleaved with eval_mot's runs), and that
    command on a one-box sequence (its start-up); with ``baseline``, the same commands from that source tree."""
    gt, pred = frames()
    scoring = evaluator("official")
    gt = {name: scoring.dataset_ground_truth(table, IMAGE).to_frame() for name, table in gt.items()}  # the command's
    boxes = sum(int((np.trunc(df["conf"]) != 0).sum()) for df in gt.values())
    gt_dir, pred_dir = write_folders(DATA / "full", gt, pred)
    one = {"ONE": gt["BENCH-00"].iloc[:1]}
    one_gt, one_pred = write_folders(DATA / "one", one, {"ONE": pred["BENCH-00"].iloc[:1]})
    egoeval = str(Path(sys.executable).with_name("egoeval"))
    env = dict(os.environ)
    sources = {"egoeval": env} | ({} if baseline is None else {"baseline": env | {"PYTHONPATH": str(baseline)}})
    output = DATA / "score_tracks.json"
    commands = {}
    for source, source_env in sources.items():
        full = [egoeval, "score-tracks", str(gt_dir), str(pred_dir), "--protocol", "official", "--json", str(output)]
        commands[f"{source} full"] = (full, source_env)
        commands[f"{source} start-up"] = (
            [egoeval, "score-tracks", str(one_gt), str(one_pred), "--protocol", "official"],
            source_env,
        )
    oracle = MotmetricsOracle(build())
    sizes = dict.fromkeys(gt, IMAGE)
    oracle_runs, command_runs = [], {name: [] for name in commands}
    try:
        for _ in range(ROUNDS):
            theirs = oracle.evaluate_mot(gt, pred, sizes)  # its own compute time, without the transfer
            oracle_runs.append((theirs["seconds"], theirs["cpu_seconds"]))
            for _ in range(COMMAND_RUNS):
                for name, (command, command_env) in commands.items():
                    command_runs[name].append(run_command(command, command_env))
                    if name == "egoeval full":
                        cli_diff, cli_counts = max_difference(json.loads(output.read_text()), theirs)
    finally:
        oracle.close()
    best, ours = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        ours = eval_mot({n: official_ignore_rule(t) for n, t in gt.items()}, pred)
        best = min(best, time.perf_counter() - start)
    diff, counts = max_difference(ours, theirs)
    motmetrics_s = min(wall for wall, _ in oracle_runs)
    motmetrics_cpu = min(cpu for _, cpu in oracle_runs)
    timings = {name: (min(w for w, _ in runs), min(c for _, c in runs)) for name, runs in command_runs.items()}
    result = {
        "sequences": SEQUENCES,
        "frames": SEQUENCES * FRAMES,
        "gt_boxes": boxes,
        "image_size": IMAGE,
        "py_motmetrics_s": motmetrics_s,
        "py_motmetrics_cpu_s": motmetrics_cpu,
        "py_motmetrics_runs": oracle_runs,
        "official_s": best,
        "speedup": motmetrics_s / best,
        "max_abs_difference": diff,
        "counts_equal": counts,
        "command_max_abs_difference": cli_diff,
        "command_counts_equal": cli_counts,
        "commands": {name: {"wall_s": w, "cpu_s": c, "runs": command_runs[name]} for name, (w, c) in timings.items()},
        "command_speedup_wall": motmetrics_s / timings["egoeval full"][0],
        "command_speedup_cpu": motmetrics_cpu / timings["egoeval full"][1],
        "load_average": os.getloadavg(),
    }
    print("| scorer | wall s | CPU s | eval_mot / this, wall | CPU | max abs difference | counts equal |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| eval_mot, py-motmetrics 1.4.0 + lap 0.4.0 (NumPy 1), best of {ROUNDS} | {motmetrics_s:.3f} | "
        f"{motmetrics_cpu:.3f} | 1.0× | 1.0× | – | – |"
    )
    print(
        f"| egoeval eval_mot in process (best of 3) | {best:.3f} | – | {motmetrics_s / best:.1f}× | – | "
        f"{diff:.1e} | {counts} |"
    )
    for name, (wall, cpu) in timings.items():
        source, data = name.split(" ", 1)
        label = "`egoeval score-tracks --protocol official`" + (" on one box (start-up)" if data == "start-up" else "")
        label = f"{label}, {'this tree' if source == 'egoeval' else baseline} (best of {ROUNDS * COMMAND_RUNS})"
        check = f"{cli_diff:.1e} | {cli_counts}" if name == "egoeval full" else "– | –"
        print(
            f"| {label} | {wall:.3f} | {cpu:.3f} | {motmetrics_s / wall:.1f}× | {motmetrics_cpu / cpu:.1f}× | {check} |"
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"({boxes} ground-truth boxes, {SEQUENCES * FRAMES} frames, images {IMAGE[0]} x {IMAGE[1]}; load {load})")
    return result


def bench_manifest() -> dict:
    from egoeval.egohumans.fetching import write_root_manifest
    from egoeval.egohumans.settings import FetchSettings

    root = OUT / "manifest_root"
    shutil.rmtree(root, ignore_errors=True)
    camera = "01_tagging/001_tagging/ego/aria01"
    (root / camera / "images/rgb").mkdir(parents=True)
    (root / camera / "calib").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images, annotations = [], []
    calib = "header\naria01\n" + ("1 " * 15 + "\n" + "0 " * 12 + "\n") * 3
    for t in range(1, MANIFEST_FILES + 1):
        name = f"{camera}/images/rgb/{t:05d}.jpg"
        (root / name).write_bytes(rng.bytes(FRAME_BYTES))
        (root / camera / f"calib/{t:05d}.txt").write_text(calib)
        images.append({"file_name": name, "height": 1408, "width": 1408, "id": t - 1, "video_id": 1, "frame_id": t - 1})
        annotations.append(
            {"id": t - 1, "image_id": t - 1, "video_id": 1, "category_id": 0, "instance_id": 2, "bbox": [1, 1, 9, 9]}
        )
    doc = {"categories": [{"id": 0, "name": "pedestrian"}], "videos": [{"id": 1, "name": "v"}]}
    doc |= {"images": images, "annotations": annotations}
    annotation = root / "benchmark/x/all/coco_track/tracking_ego_rgb.json"
    annotation.parent.mkdir(parents=True)
    import json

    annotation.write_text(json.dumps(doc))
    settings = FetchSettings(
        source="local",
        path=str(root),
        annotation="benchmark/x/all/coco_track/tracking_{modality}.json",
        modality="ego_rgb",
        manifest=str(root / "manifest.sha256"),
        detections=None,
        duplicate_videos="error",
        camera_model="aria_fisheye",
    )
    os.sync()
    start = time.perf_counter()
    names = write_root_manifest(root, settings, ["gt"])
    parallel_s = time.perf_counter() - start
    start = time.perf_counter()
    sha256_files(root, names)
    hashing_s = time.perf_counter() - start
    start = time.perf_counter()
    for name in names:
        sha256_file(root / name)
    serial_s = time.perf_counter() - start
    result = {
        "files": len(names),
        "megabytes": sum((root / n).stat().st_size for n in names) / 1e6,
        "write_manifest_s": parallel_s,
        "files_per_s": len(names) / parallel_s,
        "parallel_hash_s": hashing_s,
        "serial_hash_s": serial_s,
        "serial_files_per_s": len(names) / serial_s,
    }
    per_frame = parallel_s / MANIFEST_FILES  # a frame and its calibration file
    print("| pinning | files | MB | seconds | files/s | 47,740 frames + calib (est.) |")
    print("|---|---|---|---|---|---|")
    print(
        f"| `--write-manifest` (parallel) | {len(names)} | {result['megabytes']:.0f} | {parallel_s:.2f} | "
        f"**{result['files_per_s']:.0f}** | {47_740 * per_frame / 60:.1f} min |"
    )
    print(f"| sha256 in threads only | {len(names)} | – | {hashing_s:.2f} | {len(names) / hashing_s:.0f} | – |")
    print(f"| sha256 one file at a time | {len(names)} | – | {serial_s:.2f} | {result['serial_files_per_s']:.0f} | – |")
    print("(files just written: warm page cache; on cold storage hashing waits on reads, which the threads overlap)")
    shutil.rmtree(root, ignore_errors=True)
    return result


def run(baseline: Path | None = None) -> dict:
    result = {"protocol": bench_protocol(baseline), "manifest": bench_manifest()}
    save("official_protocol", result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a source tree whose egoeval/ to time beside this one")
    run(parser.parse_args().baseline)
