"""EgoNormia's pinned items and media -> data/egonormia/fetched/ (the egonormia_fetch stage).

``python -m stages.egonormia.fetch`` reads params ``egonormia.fetch``:

- ``dataset``: ``egonormia`` (``final_data.json``, 1,853 clips) or ``ood_robot`` (``ood_robot.json``, 11 robot
  clips); the two never mix and ``*_eval.json`` result files are never items (``egoeval.egonormia.schema``).
- ``source``: ``sample`` or ``local`` read the folder ``path`` as distributed (the official GitHub folder
  ``src/final_dataset``, a Hugging Face snapshot, or the bundled sample); ``huggingface`` downloads ``hf_repo``
  at ``hf_revision`` (a 40-hex commit sha) into ``.egoeval-cache/huggingface/<repo>/<sha>``: ``final_data.json``
  first, then for the selected clips ``video/<id>/video_prev.mp4`` and ``video/<id>/frame_all_prev.jpg``
  (``egoeval.egonormia.hub``).
- ``media_path``: where ``video/<id>/…`` lives when it is not beside the items (the GitHub folder has no
  media); null means the items' folder.
- ``manifest``: a sha256 manifest (``sha256sum`` format). Items files are named relative to ``path``, media
  relative to the media folder. Every file fetched must be in it with the same hash, or the stage fails
  naming it. With ``source: huggingface`` the commit sha pins the files and no manifest is read.
- ``split``: ``full`` keeps every clip, ``verified`` the 200 EgoNormia-verified ones (the split ships with
  the project, so it works from any source).
- ``limit`` (null: every clip) and ``limit_seed``: a smoke run keeps ``limit`` clips of the split, a seeded sample
  stratified by the correct option's first norm category (``egoeval.egonormia.schema.limit_items``); only their
  media is fetched and verified. The score stage records the limit in metrics/egonormia.json.

Output: ``items.parquet`` (the schema's columns, sorted by id), ``videos/<id>.mp4`` (the context video) and
``strips/<id>.jpg`` (the dataset's pre-rendered ``frame_all_prev.jpg``), copies, never links. A clip without a
context video keeps its row with ``video == ""`` (the frames stage records the failure); ``strip == ""`` the
same. Rows read leniently (as the official code reads them) are counted in the log.

``python -m stages.egonormia.fetch --write-manifest FOLDER [--media PATH] [--manifest PATH]`` pins a local folder
for any dataset and split: a manifest (default ``FOLDER/manifest.sha256``) of every items file there
(``final_data.json``, ``ood_robot.json``, ``verified_split.json``) and every clip's media.

Every media path, symlinks followed, must lie in ``path`` or ``media_path`` (a Hugging Face snapshot's blob store
counts as part of it); anything else stops the stage naming the items file and the clip.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.io.commit import replaced_dir
from egoeval.core.io.manifest import sha256_file, verify_manifest
from egoeval.core.io.paths import data_file, data_roots
from egoeval.egonormia.artifacts import FETCHED
from egoeval.egonormia.hub import download_hf
from egoeval.egonormia.schema import (
    clip_media,
    datasets_in,
    item_files,
    items_file,
    media_files,
    read_folder,
    select_clips,
    write_items,
)
from egoeval.egonormia.settings import FetchSettings


def _folders(settings: FetchSettings) -> tuple[Path, Path]:
    """(items folder, media folder) of a local or sample source."""
    folder = Path(settings.path)
    return folder, Path(settings.media_path) if settings.media_path else folder


def _check_pinned(manifest: Path, folder: Path, names: list[str]) -> None:
    if not manifest.is_file():
        raise InputError(
            manifest,
            f"no such manifest; pin the folder with `python -m stages.egonormia.fetch --write-manifest {folder}`",
        )
    verify_manifest(manifest, folder, names)


def _log_notes(notes: Counter, where: Path) -> None:
    for note, count in sorted(notes.items()):
        print(f"fetch: {where}: {count} rows: {note}", file=sys.stderr)


def fetch(settings: FetchSettings, out_dir: str | Path) -> pd.DataFrame:
    """Fetch, verify and normalize the items and media into out_dir; return the items table."""
    out_dir = Path(out_dir)
    dataset = settings.dataset
    notes: Counter = Counter()
    if settings.source == "huggingface":
        folder, media, items = download_hf(settings, notes)
    else:
        folder, media = _folders(settings)
        manifest = Path(settings.manifest)
        _check_pinned(manifest, folder, item_files(folder, dataset))
        items = select_clips(
            read_folder(folder, dataset, notes), settings.split, settings.limit, settings.limit_seed, folder
        )
    where = folder / items_file(folder, dataset)
    roots = (*data_roots(folder), *data_roots(media))  # a folder may link into the other (the params name both)
    media_of = clip_media(media, items, where, roots)
    if settings.source != "huggingface":
        _check_pinned(manifest, media, sorted(n for found in media_of.values() for n in found.values() if n))
    _log_notes(notes, folder)
    with replaced_dir(out_dir) as work:
        for sub in ("videos", "strips"):
            (work / sub).mkdir()
        copied: dict[str, list[str]] = {"video": [], "strip": []}
        for clip_id in tqdm(items["id"], desc="fetch media", unit="clip", file=sys.stderr):
            targets = {"video": Path("videos") / f"{clip_id}.mp4", "strip": Path("strips") / f"{clip_id}.jpg"}
            for column, target in targets.items():
                source = media_of[clip_id][column]
                if source:
                    shutil.copyfile(data_file(media, source, where, clip_id, roots), work / target)
                copied[column].append(target.as_posix() if source else "")
        items["video"], items["strip"] = copied["video"], copied["strip"]
        write_items(items, work / "items.parquet")
    return items


def write_folder_manifest(
    folder: str | Path, manifest: str | Path | None = None, media: str | Path | None = None
) -> list[str]:
    """Pin what any dataset and split of ``folder`` needs: every items file there (``final_data.json``,
    ``ood_robot.json``, the verified split; relative to ``folder``) and every clip's media (relative to ``media``);
    return the names."""
    folder = Path(folder)
    media = Path(media) if media else folder
    roots = (*data_roots(folder), *data_roots(media))
    pinned: set[tuple[Path, str]] = set()
    for dataset in datasets_in(folder):
        items = read_folder(folder, dataset)
        where = folder / items_file(folder, dataset)
        pinned |= {(folder, name) for name in item_files(folder, dataset)}
        pinned |= {(media, name) for name in media_files(media, items, where, roots)}
    lines = sorted(f"{sha256_file(root / name)}  {name}" for root, name in pinned)
    atomic_write_text(manifest or folder / "manifest.sha256", "\n".join(lines) + "\n")
    return sorted(name for _, name in pinned)


def write_fetched(settings: FetchSettings) -> None:
    """The egonormia_fetch stage: fetch into data/egonormia/fetched/ and say what came."""
    items = fetch(settings, FETCHED)
    with_video, with_strip = int((items["video"] != "").sum()), int((items["strip"] != "").sum())
    print(
        f"fetched {len(items)} clips ({with_video} with a context video, {with_strip} with a frames strip) "
        f"into {FETCHED}",
        file=sys.stderr,
    )


def pin_folder(folder: Path, manifest: Path | None = None, media: Path | None = None) -> None:
    """``--write-manifest``: pin ``folder`` (``write_folder_manifest``) and say how many files."""
    names = write_folder_manifest(folder, manifest, media)
    print(f"pinned {len(names)} files of {folder}", file=sys.stderr)
