"""Published EgoNormia figures (``data/published.json``) and ours beside them (``egoeval compare``).

The figures are data with their source: per dataset (``egonormia``, ``ood_robot``), setting and published model
name, the official scorer's action, justification, both and sensible IoU (percent) and n, computed from an
official results file in the eval-JSON layout (``*_eval.json``: a model key ``blind_<name>`` is the blind
setting, ``desc_<name>`` the description (pipeline) setting, any other the video setting).
``python -m egoeval.egonormia.published EVAL_JSON --dataset NAME --source TEXT`` adds or replaces a dataset's
figures from such a file.

``egonormia.model.published_as`` (and the same key on a baseline) maps our model names to published ones; each
mapped figure is printed beside ours with the difference and whether it lies inside our bootstrap interval.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from egoeval.egonormia.scoring import score_official
from egoeval.io import InputError, write_json
from egoeval.reported import Difference, Metric

PUBLISHED_FILE = Path(__file__).parent / "data" / "published.json"
METRICS = ("action", "justification", "both", "sensible_iou")
_PREFIXES = (("blind_", "blind"), ("desc_", "pipeline"))


def setting_of(model_key: str) -> tuple[str, str]:
    """(setting, published model name) of an official eval-JSON model key."""
    for prefix, setting in _PREFIXES:
        if model_key.startswith(prefix):
            return setting, model_key[len(prefix) :]
    return "video", model_key


def figures_from_eval_json(data: Any) -> dict[str, dict[str, dict[str, float | int]]]:
    """``{setting: {model: {metric: value, n}}}`` by the official scorer from an eval JSON."""
    figures: dict[str, dict[str, dict[str, float | int]]] = {}
    for key, scores in score_official(data).items():
        setting, model = setting_of(key)
        figures.setdefault(setting, {})[model] = scores
    return figures


def load_published(path: Path = PUBLISHED_FILE) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(path, f"cannot read the published figures: {error}") from None


def comparison_lines(
    metrics: dict[str, Any], published: dict[str, Any], dataset: str, mapping: dict[str, str]
) -> list[str]:
    """The report ``egoeval compare`` prints: every published figure of ``dataset``, ours beside the mapped ones."""
    entry = published.get("datasets", {}).get(dataset)
    if not entry or not entry.get("figures"):
        have = sorted(k for k, v in published.get("datasets", {}).items() if v.get("figures"))
        return [f"no published figures for dataset {dataset!r} bundled (figures for: {', '.join(have) or 'none'})"]
    lines = [f"published: {dataset}: {entry['source']}"]
    reverse: dict[str, list[str]] = {}
    for ours, theirs in sorted(mapping.items()):
        reverse.setdefault(theirs, []).append(ours)
    for setting, models in sorted(entry["figures"].items()):
        for model, figures in sorted(models.items()):
            shown = ", ".join(f"{m} {figures[m]:.2f}" for m in METRICS)
            lines.append(f"{setting}/{model}: {shown} (n {figures['n']})")
            for ours in reverse.get(model, []):
                mine = metrics.get(setting, {}).get(ours)
                if mine is None:
                    lines.append(f"  ours {ours}: no {setting} result in the metrics file")
                    continue
                lines.append(f"  ours {ours} (n {mine['n']}, protocol {mine.get('protocol', 'unrecorded')}):")
                for metric in METRICS:
                    lines.append("    " + _beside(metric, mine, float(figures[metric])))
    unmatched = sorted(set(mapping.values()) - {m for models in entry["figures"].values() for m in models})
    for name in unmatched:
        lines.append(f"note: published_as {name!r} is not among the published {dataset} models")
    return lines


def _beside(metric: str, mine: dict[str, Any], published: float) -> str:
    """``action: ours 12.50 [0.00, 31.25], published 45.45, ours - published -32.95, outside our 95% interval``."""
    interval = (mine.get("ci95") or {}).get(metric)
    ours = Metric(float(mine[metric]), tuple(interval) if interval else None)
    found = Difference(metric, Metric(published), ours)  # inside_interval: published within our interval
    where = {True: "inside our 95% interval", False: "outside our 95% interval", None: "no interval"}
    shown = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return (
        f"{metric}: ours {ours.value:.2f}{shown}, published {published:.2f}, ours - published "
        f"{-found.delta:+.2f}, {where[found.inside_interval]}"
    )


def compare_report(
    metrics: dict[str, Any], params: dict[str, Any], dataset: str | None = None, mapping: dict[str, str] | None = None
) -> str:
    """``egoeval compare``'s EgoNormia half: ``params`` is params.yaml whole; options override the dataset and add
    name mappings to ``published_as``."""
    section = params.get("egonormia", {})
    names = mapping_from_params(section) | (mapping or {})
    chosen = dataset or section.get("fetch", {}).get("dataset", "egonormia")
    return "\n".join(comparison_lines(metrics, load_published(), chosen, names))


def mapping_from_params(params: dict[str, Any]) -> dict[str, str]:
    """``{our model name: published name}`` from ``egonormia.model`` and ``egonormia.baselines``."""
    specs = [params["model"], *(params.get("baselines") or [])] if "model" in params else []
    return {str(s["name"]): str(s["published_as"]) for s in specs if s.get("published_as")}


def main(argv: list[str] | None = None) -> int:
    """Add or replace one dataset's published figures from an official eval JSON."""
    parser = argparse.ArgumentParser(prog="python -m egoeval.egonormia.published", description=main.__doc__)
    parser.add_argument("eval_json", type=Path)
    parser.add_argument("--dataset", required=True, choices=["egonormia", "ood_robot"])
    parser.add_argument("--source", required=True, help="repository, commit and path of the eval JSON")
    parser.add_argument("--out", type=Path, default=PUBLISHED_FILE)
    args = parser.parse_args(argv)
    raw = args.eval_json.read_bytes()
    published = load_published(args.out) if args.out.exists() else {"datasets": {}}
    published["datasets"][args.dataset] = {
        "source": f"{args.source}, sha256 {hashlib.sha256(raw).hexdigest()}, scored with the official scorer",
        "figures": figures_from_eval_json(json.loads(raw)),
    }
    write_json(args.out, published)
    print(f"{args.out}: {args.dataset} figures from {args.eval_json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
