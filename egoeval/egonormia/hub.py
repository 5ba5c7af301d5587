"""``source: huggingface``: the EgoNormia dataset repository at a pinned commit, downloaded file by file.

What the official evaluation reads: ``final_data.json`` (the 1,853 items; the repository's
``train-norm-updated.parquet`` is a subset of about 1.74k rows and is not fetched) and, for the selected clips
only, ``video/<id>/video_prev.mp4`` and ``video/<id>/frame_all_prev.jpg``. The verified split is not on the hub;
it ships with the project (``egoeval.egonormia.schema.SHIPPED_SPLIT``). A media file the repository does not
have (404) is left out and becomes that clip's recorded failure later. Files land in
``.egoeval-cache/huggingface/<repo>/<sha>/`` in the repository's own layout.
"""

from __future__ import annotations

import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from egoeval.core.errors import InputError, TransientFailure
from egoeval.egonormia.schema import DATASETS, PREV_STRIP, PREV_VIDEO, read_folder, select_clips
from egoeval.egonormia.settings import FetchSettings

HF_DIR = Path(".egoeval-cache/huggingface")
DOWNLOAD_THREADS = 8


def _download(repo_id: str, revision: str, name: str, local_dir: Path, endpoint: str | None) -> bool:
    """One file into ``local_dir``; False when the repository has no such file. A hub that cannot answer now (5xx,
    429, no connection) is a TransientFailure (exit 75), one that refuses the repository or revision an InputError
    naming the param; each message names the address asked."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    address = f"{endpoint or constants.ENDPOINT}/datasets/{repo_id}/resolve/{revision}/{name}"
    try:
        hf_hub_download(repo_id, name, repo_type="dataset", revision=revision, local_dir=local_dir, endpoint=endpoint)
    except RemoteEntryNotFoundError:  # 404 from the hub; offline mode still raises
        return False
    except RepositoryNotFoundError as error:  # also a gated or private repository
        raise InputError("egonormia.fetch.hf_repo", f"{address}: {_first_line(error)}") from None
    except RevisionNotFoundError as error:
        raise InputError("egonormia.fetch.hf_revision", f"{address}: {_first_line(error)}") from None
    except (LocalEntryNotFoundError, HfHubHTTPError) as error:  # no answer, or an error status (and no local copy)
        if constants.HF_HUB_OFFLINE:
            raise InputError("egonormia.fetch", f"{address}: HF_HUB_OFFLINE is set and no local copy exists") from None
        cause = error if isinstance(error, HfHubHTTPError) else error.__cause__
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if status is not None and status < 500 and status != 429:
            shown = _first_line(cause or error)
            raise InputError("egonormia.fetch", f"{address} answered {status}: {shown}") from None
        answer = f"answered {status}" if status is not None else "did not answer"
        raise TransientFailure(f"{address}: the hub {answer} (after huggingface_hub's retries)") from None
    except OSError as error:  # the connection dropped mid-file
        raise TransientFailure(f"{address}: {error}") from None
    return True


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def download_hf(
    settings: FetchSettings, notes: Counter, root: Path = HF_DIR, endpoint: str | None = None
) -> tuple[Path, Path, pd.DataFrame]:
    """(folder, media folder, selected items) after downloading ``final_data.json`` and the selected media.

    ``settings`` is ``egonormia.fetch`` with source ``huggingface`` (the settings see to a pinned revision and the
    dataset the repository holds); ``endpoint`` overrides the hub address (default: ``HF_ENDPOINT`` or huggingface.co).
    """
    revision, dataset, repo_id = settings.hf_revision, settings.dataset, settings.hf_repo
    if revision is None:  # the settings refuse source huggingface without one; a caller that built it by hand gets this
        raise ValueError("source huggingface needs a pinned hf_revision")
    local_dir = root / repo_id / revision
    if not _download(repo_id, revision, DATASETS[dataset], local_dir, endpoint):
        raise InputError("egonormia.fetch", f"{repo_id}@{revision} has no {DATASETS[dataset]}")
    items = select_clips(
        read_folder(local_dir, dataset, notes), settings.split, settings.limit, settings.limit_seed, local_dir
    )
    names = [f"video/{clip_id}/{name}" for clip_id in items["id"] for name in (PREV_VIDEO, PREV_STRIP)]
    with ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:
        found = list(pool.map(lambda name: _download(repo_id, revision, name, local_dir, endpoint), names))
    missing = [name for name, ok in zip(names, found, strict=True) if not ok]
    if missing:
        print(f"fetch: {repo_id}@{revision}: {len(missing)} media files not in the repository", file=sys.stderr)
    return local_dir, local_dir, items
