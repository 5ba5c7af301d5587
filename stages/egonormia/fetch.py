"""Stage egonormia_fetch: pinned EgoNormia items and context videos -> data/egonormia/fetched/.

``python -m stages.egonormia.fetch`` reads params ``egonormia.fetch``:

- ``source``: ``sample`` or ``local`` read the folder ``path`` (official ``*.json`` layout or Hugging Face
  ``*.parquet`` layout, see ``egoeval.egonormia.schema``); ``huggingface`` downloads ``hf_repo`` at
  ``hf_revision`` (must be a 40-hex commit sha) into ``.egoeval-cache/huggingface/<repo>/<sha>`` with
  ``huggingface_hub.snapshot_download``, fetching only ``*.parquet``, ``verified_split.json`` and the
  context videos ``video/<id>/*prev*.mp4`` (``final_data.json`` would repeat the parquet's clips).
- ``manifest``: a sha256 manifest (``sha256sum`` format, paths relative to the folder). Every file fetched
  (items files and the selected clips' videos) must be in it with the same hash, or the stage fails naming it.
- ``split``: ``full`` keeps every clip, ``verified`` those marked verified.

Output: ``items.parquet`` (the schema's columns, sorted by id) and ``videos/<id>.mp4`` (copies, never links).
A clip without a context video keeps its row with ``video == ""``; the frames stage records the failure.
The folder is built beside the old one and swapped in only when complete.

``python -m stages.egonormia.fetch --write-manifest FOLDER [--manifest PATH]`` pins a local folder: it writes a
manifest (default ``FOLDER/manifest.sha256``) of every items file and every clip's context video.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from egoeval.egonormia.artifacts import FETCHED
from egoeval.egonormia.schema import find_video, item_files, read_folder, source_files, write_items
from egoeval.io import PARAMS_FILE, InputError, load_params, replaced_dir, verify_manifest, write_manifest
from egoeval.stage import run_stage

HF_DIR = Path(".egoeval-cache/huggingface")
HF_PATTERNS = ["*.parquet", "verified_split.json", "video/*/*prev*.mp4"]
SOURCES = ("sample", "local", "huggingface")
SPLITS = ("full", "verified")
_SHA_RE = re.compile(r"[0-9a-f]{40}")


def pinned_revision(revision: object) -> str:
    """The revision if it is a commit sha (40 hex digits, not the all-zero placeholder); else InputError."""
    text = str(revision).lower()
    if not _SHA_RE.fullmatch(text) or set(text) == {"0"}:
        raise InputError(
            PARAMS_FILE,
            f"egonormia.fetch.hf_revision must pin a commit: 40 hex digits, not a branch, tag or placeholder; "
            f"got {revision!r}",
        )
    return text


def download_hf(repo_id: str, revision: str, root: Path = HF_DIR) -> Path:
    """Download the pinned dataset files (items and context videos) and return the local folder."""
    revision = pinned_revision(revision)
    from huggingface_hub import snapshot_download

    local_dir = root / repo_id / revision
    snapshot_download(
        repo_id=repo_id, repo_type="dataset", revision=revision, local_dir=local_dir, allow_patterns=HF_PATTERNS
    )
    return local_dir


def _source_folder(params: dict[str, Any]) -> Path:
    source = params["source"]
    if source not in SOURCES:
        raise InputError(PARAMS_FILE, f"egonormia.fetch.source must be one of {', '.join(SOURCES)}, got {source!r}")
    if params["split"] not in SPLITS:
        raise InputError(
            PARAMS_FILE, f"egonormia.fetch.split must be one of {', '.join(SPLITS)}, got {params['split']!r}"
        )
    if source == "huggingface":
        return download_hf(params["hf_repo"], params["hf_revision"])
    return Path(params["path"])


def _check_pinned(manifest: Path, folder: Path, names: list[str]) -> None:
    if not manifest.is_file():
        raise InputError(
            manifest,
            f"no such manifest; pin the folder with `python -m stages.egonormia.fetch --write-manifest {folder}`",
        )
    verify_manifest(manifest, folder, names)


def fetch(params: dict[str, Any], out_dir: str | Path) -> pd.DataFrame:
    """Fetch, verify and normalize the items and videos into out_dir; return the items table."""
    out_dir = Path(out_dir)
    folder = _source_folder(params)
    manifest = Path(params["manifest"])
    _check_pinned(manifest, folder, item_files(folder))
    items = read_folder(folder)
    if params["split"] == "verified":
        items = items[items["verified"]].reset_index(drop=True)
        if items.empty:
            raise InputError(folder, "split 'verified' selects no clip: no row is marked verified")
    sources = {clip_id: find_video(folder, clip_id) for clip_id in items["id"]}
    _check_pinned(manifest, folder, sorted(v for v in sources.values() if v))

    with replaced_dir(out_dir) as work:
        (work / "videos").mkdir()
        videos = []
        for clip_id, source in tqdm(sources.items(), desc="fetch videos", unit="clip", file=sys.stderr):
            if source is None:
                videos.append("")
                continue
            target = Path("videos") / f"{clip_id}.mp4"
            shutil.copyfile(folder / source, work / target)
            videos.append(target.as_posix())
        items["video"] = videos
        write_items(items, work / "items.parquet")
    return items


def write_folder_manifest(folder: str | Path, manifest: str | Path | None = None) -> list[str]:
    """Pin every items file and context video of a local folder; return the pinned names."""
    folder = Path(folder)
    names = source_files(folder, read_folder(folder))
    write_manifest(manifest or folder / "manifest.sha256", folder, names)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.egonormia.fetch", description=__doc__.splitlines()[0])
    parser.add_argument("--write-manifest", metavar="FOLDER", type=Path, help="pin a local folder instead of fetching")
    parser.add_argument(
        "--manifest", type=Path, help="manifest path for --write-manifest (default FOLDER/manifest.sha256)"
    )
    args = parser.parse_args(argv)

    def body() -> None:
        if args.write_manifest is not None:
            names = write_folder_manifest(args.write_manifest, args.manifest)
            print(f"pinned {len(names)} files of {args.write_manifest}", file=sys.stderr)
            return
        items = fetch(load_params("egonormia.fetch"), FETCHED)
        with_video = int((items["video"] != "").sum())
        print(f"fetched {len(items)} clips ({with_video} with a context video) into {FETCHED}", file=sys.stderr)

    return run_stage(body, params=None if args.write_manifest else PARAMS_FILE)


if __name__ == "__main__":
    raise SystemExit(main())
