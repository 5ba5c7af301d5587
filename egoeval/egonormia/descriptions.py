"""EgoNormia's scene descriptions, the text each clip's pipeline setting is given (the egonormia_describe stage).

``egonormia.describe.source``: ``dataset`` copies the pinned description text from items.parquet; ``model`` asks
the vision-language model of ``egonormia.model`` for one, given the frames image, through the same response cache,
limiter and retries as inference. Output: data/egonormia/descriptions.parquet (id, description, source, error;
error "" when fine; request_key, "" unless asked of a model), sorted by id. With ``model``, the stage writes nothing
and fails when more than ``max_failure_rate`` of the clips failed.
"""

from __future__ import annotations

import sys
from typing import Any

import pandas as pd
from tqdm import tqdm

from egoeval.backends import Decoding
from egoeval.backends.client import ModelClient, call_pool
from egoeval.cache import ResponseCache, cache_file, cache_only
from egoeval.core.errors import ArtifactUnavailable, TransientFailure
from egoeval.core.io.atomic import write_parquet
from egoeval.egonormia.artifacts import DESCRIPTIONS, FRAMES, ITEMS, NO_DESCRIPTION, FrameStore, read_table
from egoeval.egonormia.protocols.egoeval import describe_request
from egoeval.egonormia.settings import EgoNormiaSettings, ModelSpec

COLUMNS = ["id", "description", "source", "error", "request_key"]  # request_key: "" unless asked


def from_dataset(items: pd.DataFrame) -> pd.DataFrame:
    """The pinned description of every clip; a clip without one gets an error."""
    text = items["description"].fillna("").astype(str) if "description" in items else pd.Series("", items.index)
    table = pd.DataFrame({"id": items["id"], "description": text, "source": "dataset", "request_key": ""})
    table["error"] = text.str.strip().eq("").map({True: NO_DESCRIPTION, False: ""})
    return table[COLUMNS].sort_values("id", ignore_index=True)


def from_model(items: pd.DataFrame, frames: FrameStore, model: ModelSpec, cache: ResponseCache) -> pd.DataFrame:
    """Ask the model (one that sees images: the settings see to it) for a description of every clip's frames;
    failures are recorded, not raised."""
    client = ModelClient.from_spec(model, cache, cache_only=cache_only())
    decoding = Decoding.from_spec(model)
    source = f"model:{model.name}"

    def describe(clip_id: str) -> dict[str, Any]:
        try:
            done = client.complete(describe_request(frames.jpeg(clip_id), decoding))
        except ArtifactUnavailable as error:
            return {"id": clip_id, "description": "", "source": source, "error": str(error), "request_key": ""}
        return {
            "id": clip_id,
            "description": done.response or "",
            "source": source,
            "error": done.error,
            "request_key": done.key,
        }

    try:
        with call_pool(client.concurrency, "describe") as pool:
            ids = list(items["id"])
            rows = list(tqdm(pool.map(describe, ids), total=len(ids), desc="describe", unit="clip", file=sys.stderr))
    finally:
        client.close()
    if client.served_note():
        print(f"describe: warning: {client.served_note()}", file=sys.stderr)
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("id", ignore_index=True)


def write_descriptions(settings: EgoNormiaSettings) -> None:
    """The egonormia_describe stage: every clip's description (dataset or model) -> ``DESCRIPTIONS``."""
    source = settings.describe.source
    items = read_table(ITEMS, ["id"])
    if source == "dataset":
        table = from_dataset(items)
    else:
        frames = FrameStore(read_table(FRAMES / "index.parquet", ["id", "image", "error"]), FRAMES)
        with ResponseCache(cache_file(settings.infer.cache_dir)) as cache:
            table = from_model(items, frames, settings.model, cache)
        failed = table[table["error"] != ""]
        if len(table) and len(failed) / len(table) > settings.describe.max_failure_rate:
            named = "; ".join(f"{r.id}: {r.error}" for r in failed.head(20).itertuples())
            raise TransientFailure(f"{len(failed)} of {len(table)} descriptions failed; nothing written: {named}")
    write_parquet(DESCRIPTIONS, table)
    for row in table[table["error"] != ""].itertuples():
        print(f"describe: {row.id}: {row.error}", file=sys.stderr)
    print(f"describe: {len(table)} clips ({source}) written to {DESCRIPTIONS}", file=sys.stderr)
