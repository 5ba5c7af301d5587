"""EgoNormia inference: every model (the one under evaluation and the baselines) asked every question.

``protocol`` (``infer_params["protocol"]``, from ``egonormia.protocol``) decides the requests:

- ``egoeval``: for each clip x setting x model, the action question then, in the same conversation, the
  justification question; and the sensible question in a conversation of its own (two units of work);
  options in a seeded permutation recorded with the answer;
- ``official``: ``egoeval.egonormia.official``, one unit per clip x setting x model: the action call; the
  justification call only after a valid action answer; the sensible call unless an earlier call failed.
  A call the protocol does not make is recorded with an error starting ``not sent: ``.

Units run concurrently (a thread pool per model, paced by its adaptive limiter); every call goes through the
durable response cache, whose key includes the protocol. Used by the egonormia_infer stage and by its sharded
form (flows/shard.py).
"""

from __future__ import annotations

import sys
from concurrent.futures import as_completed
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from tqdm import tqdm

from egoeval.backends import Decoding
from egoeval.backends.client import Completion, ModelClient, call_pool
from egoeval.cache import ResponseCache, cache_file, cache_only
from egoeval.egonormia import official
from egoeval.egonormia.artifacts import (
    DESCRIPTIONS,
    FRAMES,
    ITEMS,
    NO_DESCRIPTION,
    NOT_SENT,
    RESPONSE_COLUMNS,
    FrameStore,
    Unavailable,
    read_items,
    read_table,
    results_key,
)
from egoeval.egonormia.prompts import (
    SETTINGS,
    Scene,
    action_request,
    displayed_options,
    justification_request,
    permutation,
    sensible_request,
)
from egoeval.io import PARAMS_FILE, InputError
from egoeval.settings import load_settings
from egoeval.stage import TransientFailure


@dataclass(frozen=True)
class Conversation:
    """One unit of work: the action+justification conversation or the sensible one, for a clip/setting/model."""

    clip_id: str
    behaviors: tuple[str, ...]
    justifications: tuple[str, ...]
    setting: str
    chain: str  # "action" (then justification) | "sensible" | "official" (all three, the official way)


class Runner:
    """Builds and sends one model's conversations; turns each answer (or failure) into output rows."""

    def __init__(
        self,
        spec: dict[str, Any],
        client: ModelClient,
        frames: FrameStore,
        descriptions: dict[str, tuple[str, str]],
        seed: int,
        protocol: str = "official",
    ) -> None:
        self.spec = spec
        self.client = client
        self.frames = frames
        self.descriptions = descriptions
        self.seed = seed
        self.protocol = protocol
        self.decoding = Decoding.from_spec(spec)

    def _row(self, clip_id: str, setting: str, subtask: str, perm: list[int], done: Completion) -> dict[str, Any]:
        return {
            "id": clip_id,
            "setting": setting,
            "model": str(self.spec["name"]),
            "backend": str(self.spec["backend"]),
            "protocol": self.protocol,
            "subtask": subtask,
            "permutation": perm,
            "response": done.response,
            "error": done.error,
            "request_key": done.key,
            "served_model": done.served_model,
        }

    def _scene(self, clip_id: str, setting: str) -> Scene:
        if setting == "pipeline":
            description, error = self.descriptions.get(clip_id, ("", "the clip is not in descriptions.parquet"))
            if self.protocol == "official" and error == NO_DESCRIPTION:
                error = ""  # the official code sends a blank description as is, between its triple quotes
            elif not description.strip():
                error = error or "empty description"
            if error:
                raise Unavailable(f"description unavailable: {error}")
            return Scene(setting, description=description)
        if setting == "video":
            return Scene(setting, frames_jpeg=self.frames.jpeg(clip_id))
        return Scene(setting)

    def run_official(self, work: Conversation) -> list[dict[str, Any]]:
        """The official protocol's calls for one clip and setting (see the module docstring)."""
        subtasks = ["action", "justification", "sensible"]
        try:
            scene = self._scene(work.clip_id, work.setting)
        except Unavailable as error:
            failed = Completion(None, str(error), "")
            return [self._row(work.clip_id, work.setting, s, official.IDENTITY, failed) for s in subtasks]
        context = {"description": scene.description, "frames_jpeg": scene.frames_jpeg}
        done: dict[str, Completion] = {}
        done["action"] = self.client.complete(official.action_request(work.setting, work.behaviors, **context))
        choice = official.extract_single(done["action"].response)
        action_failed = done["action"].response is None and not official.no_content(done["action"].error)
        if action_failed:
            done["justification"] = Completion(None, NOT_SENT + "the action call failed", "")
        elif choice is None:
            done["justification"] = Completion(None, NOT_SENT + "the action answer is invalid", "")
        else:
            request = official.justification_request(
                work.setting, work.behaviors[choice], work.justifications, **context
            )
            done["justification"] = self.client.complete(request)
        second = done["justification"]
        api_error = action_failed or (
            choice is not None and second.response is None and not official.no_content(second.error)
        )
        if api_error:  # the official code then records [-2, -2] and never sends the sensible call
            done["sensible"] = Completion(None, NOT_SENT + "an earlier call failed", "")
        else:
            name = str(self.spec["name"])
            done["sensible"] = self.client.complete(
                official.sensible_request(work.setting, work.behaviors, model=name, **context)
            )
        return [self._row(work.clip_id, work.setting, s, official.IDENTITY, done[s]) for s in subtasks]

    def run(self, work: Conversation) -> list[dict[str, Any]]:
        if work.chain == "official":
            return self.run_official(work)
        subtasks = ["action", "justification"] if work.chain == "action" else ["sensible"]
        perms = {s: permutation(self.seed, work.clip_id, s) for s in subtasks}
        try:
            scene = self._scene(work.clip_id, work.setting)
        except Unavailable as error:
            failed = Completion(None, str(error), "")
            return [self._row(work.clip_id, work.setting, s, perms[s], failed) for s in subtasks]
        if work.chain == "sensible":
            request = sensible_request(scene, displayed_options(work.behaviors, perms["sensible"]), self.decoding)
            return [self._row(work.clip_id, work.setting, "sensible", perms["sensible"], self.client.complete(request))]
        request = action_request(scene, displayed_options(work.behaviors, perms["action"]), self.decoding)
        action = self.client.complete(request)
        if action.response is None:
            second = Completion(None, f"action failed: {action.error}", "")
        else:
            options = displayed_options(work.justifications, perms["justification"])
            second = self.client.complete(justification_request(request, action.response, options, self.decoding))
        return [
            self._row(work.clip_id, work.setting, "action", perms["action"], action),
            self._row(work.clip_id, work.setting, "justification", perms["justification"], second),
        ]


def run_inference(
    items: pd.DataFrame,
    frames_index: pd.DataFrame,
    frames_dir: Path,
    descriptions: pd.DataFrame,
    model_specs: list[dict[str, Any]],
    infer_params: dict[str, Any],
) -> pd.DataFrame:
    """Every answer of every model, one row per (id, setting, model, subtask), failures recorded in ``error``."""
    settings = list(infer_params["settings"])
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise InputError(PARAMS_FILE, f"unknown settings {unknown}; known: {', '.join(SETTINGS)}")
    names = [str(spec.get("name")) for spec in model_specs]
    if len(set(names)) != len(names):
        raise InputError(PARAMS_FILE, f"model names must be unique, got {names}")
    for setting in settings:  # the official results' name of every run, checked before any call is paid for
        for name in names:
            try:
                results_key(setting, name)
            except ValueError as error:
                raise InputError(PARAMS_FILE, str(error)) from None
    frames = FrameStore(frames_index, frames_dir)
    texts = {row.id: (row.description or "", row.error) for row in descriptions.itertuples(index=False)}
    seed = int(infer_params["seed"])
    protocol = str(infer_params.get("protocol", "official"))
    chains = ("official",) if protocol == "official" else ("action", "sensible")

    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        cache = ResponseCache(cache_file(infer_params["cache_dir"]))
        stack.callback(cache.close)
        futures = []
        runners = []
        for spec in model_specs:
            client = ModelClient.from_spec(spec, cache, cache_only=cache_only())
            stack.callback(client.close)
            runner = Runner(spec, client, frames, texts, seed, protocol)
            runners.append(runner)
            usable = [s for s in settings if s != "video" or client.backend.supports_images]
            for skipped in sorted(set(settings) - set(usable)):
                print(
                    f"infer: {spec['name']} ({spec['backend']}) skips the {skipped} setting (no image input)",
                    file=sys.stderr,
                )
            # twice as many threads as call slots: while one thread builds its next request or writes the
            # cache, another already holds the freed slot; the limiter alone bounds the calls in flight
            workers = 2 * client.backend.concurrency
            pool = stack.enter_context(call_pool(workers, f"infer-{spec['name']}"))
            for chain in chains:  # egoeval: two-call conversations first, a shorter tail at the end
                for item in items.itertuples(index=False):
                    for setting in usable:
                        work = Conversation(item.id, tuple(item.behaviors), tuple(item.justifications), setting, chain)
                        futures.append(pool.submit(runner.run, work))
        with tqdm(total=len(futures), desc="infer", unit="conversation", file=sys.stderr) as bar:
            for future in as_completed(futures):
                rows.extend(future.result())
                bar.update()
        for runner in runners:
            client = runner.client
            print(
                f"infer: {runner.spec['name']}: {client.calls} calls, {client.hits} cache hits, "
                f"limit {client.limiter.limit}/{client.limiter.max_limit}",
                file=sys.stderr,
            )
            if client.served_note():
                print(f"infer: warning: {client.served_note()}", file=sys.stderr)
    table = pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS))
    return table.sort_values(["id", "setting", "model", "subtask"], ignore_index=True)


def check_failures(responses: pd.DataFrame, max_failure_rate: float) -> None:
    """Raise TransientFailure naming the failed answers when their share exceeds ``max_failure_rate``.

    Calls the protocol did not make (``not sent: ``) are not failures of their own.
    """
    failed = responses[(responses["error"] != "") & ~responses["error"].str.startswith(NOT_SENT)]
    rate = len(failed) / len(responses) if len(responses) else 0.0
    if rate > max_failure_rate:
        named = [f"{r.id}/{r.setting}/{r.model}/{r.subtask}: {r.error}" for r in failed.head(20).itertuples()]
        more = f"; and {len(failed) - len(named)} more" if len(failed) > len(named) else ""
        raise TransientFailure(
            f"{len(failed)} of {len(responses)} answers failed ({rate:.1%} > {max_failure_rate:.1%}); "
            f"nothing written, cached successes make a rerun cheap: {'; '.join(named)}{more}"
        )


class InferenceInputs(NamedTuple):
    """``run_inference``'s arguments, in its order (``run_inference(*inputs)``)."""

    items: pd.DataFrame
    frames_index: pd.DataFrame
    frames_dir: Path
    descriptions: pd.DataFrame
    model_specs: list[dict[str, Any]]
    infer_params: dict[str, Any]


def inference_inputs(root: Path = Path(".")) -> InferenceInputs:
    """``run_inference``'s arguments as the infer stage reads them under ``root``."""
    params = load_settings(root / PARAMS_FILE).egonormia
    infer = params.infer.model_dump()
    return InferenceInputs(
        read_items(root / ITEMS),
        read_table(root / FRAMES / "index.parquet", ["id", "image", "error"]),
        root / FRAMES,
        read_table(root / DESCRIPTIONS, ["id", "description", "error"]),
        [params.model.model_dump(), *(model.model_dump() for model in params.baselines)],
        {**infer, "cache_dir": str(root / infer["cache_dir"]), "protocol": params.protocol},
    )
