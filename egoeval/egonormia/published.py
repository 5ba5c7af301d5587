"""Published EgoNormia figures (``data/published.json``) and ours beside them (``egoeval compare``).

The figures are data with their source: a list of tables, each one dataset (``egonormia``, ``ood_robot``), one split
(``full``, ``verified``) and one source (``as``: ``leaderboard``, ``paper-table-1``, ...), with the repository,
commit, path, licence and sha256 of the file it was extracted from, and per setting and published model name the
action, justification, both and sensible IoU (percent) and n (null where the source gives none). One table per
dataset and split is ``primary``: the one ``egoeval compare`` and the report show unless told otherwise.

Tables are extracted from the pinned source file, never typed in, by format:

- ``leaderboard-tsx``: the authors' leaderboard page (osw-website ``components/egonormia/leaderboard/index.tsx``),
  its ``rawData = {blind: [...], pipeline: [...], video: [...], video_verified: [...]}`` entries read as the page
  reads them: blind, pipeline and video (less any ``-V`` model) are the Full Dataset tab, ``video_verified`` (and
  the video ``-V`` models, suffix dropped) the Verified tab; the rank medals before a model name are dropped.
- ``paper-table-mdx``: the paper-era Table 1 of the blog article (an HTML table in MDX: Category | Model | Both |
  Action | Justification | Sensibility of Action); the Baseline row (Constant Choice) is filed under blind and the
  Human row under video, as the leaderboard files them.
- ``eval-json``: an official results file (``*_eval.json``) scored with the official scorer (a model key
  ``blind_<name>`` is the blind setting, ``desc_<name>`` the pipeline setting, any other the video setting).

``python -m egoeval.egonormia.published FILE --format F --dataset D --as NAME --repository R --commit C --path P
--licence L [--primary] [--note TEXT]`` adds or replaces the tables that file yields.

``egoeval compare`` leads with our rows (setting, rank, model, protocol, dataset, split, n and the four figures with
their intervals). ``egonormia.model.published_as`` (and the same key on a baseline) maps our model names to
published ones; a mapped figure is printed beside ours, with the difference and whether it lies inside our bootstrap
interval, only where our rows are the published ones' dataset, split and protocol (``comparable``); otherwise one
line says why not. ``--published`` lists the published table itself.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_json
from egoeval.egonormia.artifacts import is_variant
from egoeval.egonormia.result_names import setting_of
from egoeval.egonormia.scoring import score_official
from egoeval.reported import Difference, Metric

PUBLISHED_FILE = Path(__file__).parent / "data" / "published.json"
METRICS = ("action", "justification", "both", "sensible_iou")
SPLITS = ("full", "verified")
FORMATS = ("leaderboard-tsx", "paper-table-mdx", "eval-json")
PROVENANCE = ("repository", "commit", "path", "licence")
PUBLISHED_PROTOCOL = "official"  # the authors' own runs (eval_api.py), which protocol `official` follows
K = TypeVar("K")
RANKED_BY = "both"  # the leaderboard's order: action and justification both right
# the clips behind each published table (OFFICIAL.md: final_data.json 1,853 items, verified_split.json 200 ids,
# ood_robot.json 11): a run over fewer (a local subset, a smoke run) is not the published dataset
PUBLISHED_ITEMS = {("egonormia", "full"): 1853, ("egonormia", "verified"): 200, ("ood_robot", "full"): 11}

Figures = dict[str, dict[str, dict[str, float | int | None]]]  # {setting: {model: {metric: value, n}}}


def figures_from_eval_json(data: Any) -> Figures:
    """``{setting: {model: {metric: value, n}}}`` by the official scorer from an eval JSON."""
    figures: Figures = {}
    for key, scores in score_official(data).items():
        setting, model = setting_of(key)
        figures.setdefault(setting, {})[model] = scores
    return figures


# ------------------------------------------------------------------ the leaderboard page (osw-website, TSX)

_LEADERBOARD_GROUPS = {"blind": "blind", "pipeline": "pipeline", "video": "video", "video_verified": "video"}
_LEADERBOARD_FIELDS = {"act": "action", "jus": "justification", "both": "both", "sens": "sensible_iou"}
_MEDAL = re.compile(r"^[\U0001F947-\U0001F949]\s*")  # 🥇 🥈 🥉: the page's rank decoration, not the name
_FIELD = re.compile(r'(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)\s*,?')


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def figures_from_leaderboard(text: str, where: str | Path) -> dict[str, Figures]:
    """``{split: figures}`` from the leaderboard page's ``rawData``; n is null (the page gives none)."""
    start = re.search(r"const rawData\s*=\s*\{", text)
    if not start:
        raise InputError(where, "no `const rawData = {` in the leaderboard page")
    end = re.compile(r"^\};", re.M).search(text, start.end())
    if not end:
        raise InputError(where, "rawData is not closed by a line `};`", row=_line(text, start.start()))
    body_at, body = start.end(), text[start.end() : end.start()]
    groups = list(re.finditer(r"^\s*(\w+)\s*:\s*\[(.*?)^\s*\],?\s*$", body, re.M | re.S))
    if sorted(g[1] for g in groups) != sorted(_LEADERBOARD_GROUPS):
        raise InputError(where, f"rawData groups {[g[1] for g in groups]}, expected {sorted(_LEADERBOARD_GROUPS)}")
    result: dict[str, Figures] = {}
    for group in groups:
        for entry in re.finditer(r"\{(.*?)\}", group[2], re.S):
            row = _line(text, body_at + group.start(2) + entry.start())
            fields = {key: json.loads(value) for key, value in _FIELD.findall(entry[1])}
            missing = sorted({"model", *_LEADERBOARD_FIELDS} - set(fields))
            if missing:
                raise InputError(where, f"{group[1]} entry lacks {missing}", row=row)
            model = _MEDAL.sub("", str(fields["model"])).strip()
            split = "verified" if group[1] == "video_verified" or (group[1] == "video" and "-V" in model) else "full"
            model = model.replace("-V", "", 1) if group[1] == "video" and split == "verified" else model
            setting = _LEADERBOARD_GROUPS[group[1]]
            models = result.setdefault(split, {}).setdefault(setting, {})
            if model in models:
                raise InputError(where, f"{model!r} twice in the {split} {setting} figures", row=row)
            values: dict[str, float | int | None] = {}
            for key, metric in _LEADERBOARD_FIELDS.items():
                if not isinstance(fields[key], int | float):
                    raise InputError(where, f"{model!r}: {key} is not a number: {fields[key]!r}", row=row)
                values[metric] = float(fields[key])
            models[model] = values | {"n": None}
    return result


# ------------------------------------------------------------------ the paper-era Table 1 (blog article, MDX)

_PAPER_HEADER = ["Category", "Model", "Both", "Action", "Justification", "Sensibility of Action"]
_PAPER_CATEGORIES = {"Blind": "blind", "Pipeline": "pipeline", "Video": "video", "Baseline": "blind", "Human": "video"}
_PAPER_METRICS = ("both", "action", "justification", "sensible_iou")  # the table's column order


def _cells(row: str, tag: str) -> list[str]:
    return [re.sub(r"<[^>]*>", "", cell).strip() for cell in re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", row, re.S)]


def figures_from_paper_table(text: str, where: str | Path) -> dict[str, Figures]:
    """``{"full": figures}`` from the article's Table 1 (the first table with the paper's header); n is null."""
    for table in re.finditer(r"<table\b.*?</table>", text, re.S):
        if _cells(table[0], "th") == _PAPER_HEADER:
            break
    else:
        raise InputError(where, f"no table with the header {_PAPER_HEADER}")
    figures: Figures = {}
    category = None
    for row in re.finditer(r"<tr\b[^>]*>(.*?)</tr>", table[0], re.S):
        cells = _cells(row[1], "td")
        line = _line(text, table.start() + row.start())
        if not cells or len(cells) == 1 or "<th" in row[1]:  # the header, a group heading (colSpan) or a spacer
            continue
        if len(cells) == 6:
            category, cells = cells[0], cells[1:]
        if len(cells) != 5 or category not in _PAPER_CATEGORIES:
            raise InputError(where, f"a Table 1 row of {len(cells)} cells, category {category!r}", row=line)
        model, *numbers = cells
        try:
            values: dict[str, float | int | None] = {m: float(v) for m, v in zip(_PAPER_METRICS, numbers, strict=True)}
        except ValueError:
            raise InputError(where, f"{model!r}: not numbers: {numbers}", row=line) from None
        models = figures.setdefault(_PAPER_CATEGORIES[category], {})
        if model in models:
            raise InputError(where, f"{model!r} twice under {category}", row=line)
        models[model] = values | {"n": None}
    return {"full": figures}


def figures_from_file(raw: bytes, fmt: str, where: str | Path) -> dict[str, Figures]:
    """``{split: figures}`` extracted from one source file of format ``fmt`` (see the module docstring)."""
    try:
        text = raw.decode("utf-8")
        if fmt == "eval-json":
            return {"full": figures_from_eval_json(json.loads(text))}
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(where, f"not a {fmt} file: {error}") from None
    if fmt == "leaderboard-tsx":
        return figures_from_leaderboard(text, where)
    if fmt == "paper-table-mdx":
        return figures_from_paper_table(text, where)
    raise InputError(where, f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def tables_from_file(raw: bytes, where: str | Path, **meta: Any) -> list[dict[str, Any]]:
    """The tables one source file yields, one per split: ``meta`` (dataset, as, format, primary, note and the
    provenance keys) plus the file's sha256 and the figures."""
    found = figures_from_file(raw, meta["format"], where)
    sha = hashlib.sha256(raw).hexdigest()
    return [meta | {"split": split, "sha256": sha, "figures": found[split]} for split in SPLITS if split in found]


# ------------------------------------------------------------------ choosing a table


def load_published(path: Path = PUBLISHED_FILE) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(path, f"cannot read the published figures: {error}") from None


def source_of(table: dict[str, Any]) -> str:
    """One line naming where a table's figures come from."""
    shown = (
        f"{table['repository']} {table['path']} at commit {table['commit']} ({table['licence']}), "
        f"sha256 {table['sha256']}"
    )
    return shown + (f"; {table['note']}" if table.get("note") else "")


def mismatch(row: dict[str, Any], table: dict[str, Any]) -> str:
    """Why a row of ours may not be ranked among a published table's rows ('' when it may): its dataset, split and
    protocol must be the table's (the published protocol: ``PUBLISHED_PROTOCOL``), and its clips (``items``, where
    recorded) as many as the published dataset has (``PUBLISHED_ITEMS``)."""
    wanted = {"dataset": table["dataset"], "split": table["split"], "protocol": PUBLISHED_PROTOCOL}
    size = PUBLISHED_ITEMS.get((table["dataset"], table["split"]))
    if size is not None and row.get("items") is not None:
        wanted["items"] = size
    return ", ".join(
        f"{key} {row.get(key, 'unrecorded')} (published: {want})"
        for key, want in wanted.items()
        if row.get(key) != want
    )


def ranked(values: Mapping[K, float | None], name: Callable[[K], str] = str) -> list[tuple[int, K]]:
    """``(rank, key)``, best first: higher value ranks higher, equal values share a rank (1, 2, 2, 4) and are
    listed by ``name`` ignoring case; a missing value ranks last."""
    present = [v for v in values.values() if v is not None]
    order = sorted(values, key=lambda k: (values[k] is None, -(values[k] or 0.0), name(k).casefold(), name(k), str(k)))
    return [(1 + (len(present) if values[k] is None else sum(v > values[k] for v in present)), k) for k in order]


def select_table(published: dict[str, Any], dataset: str, split: str, name: str | None = None) -> dict | None:
    """The table of ``dataset`` and ``split`` named ``name`` (``as``), by default the primary one; None if none."""
    for table in published.get("tables", []):
        named = table["as"] == name if name is not None else bool(table.get("primary"))
        if table["dataset"] == dataset and table["split"] == split and named:
            return table
    return None


def _ours(entry: dict[str, Any], split: str, run_split: str) -> tuple[dict[str, Any] | None, str]:
    """Our figures of one model for ``split`` from a run over ``run_split``, and how they were taken."""
    if split == run_split:
        return entry, f"{run_split} run"
    if split == "verified" and isinstance(entry.get("verified"), dict) and entry["verified"].get("n"):
        return entry["verified"], "the verified items of the full run"
    return None, f"the run used split {run_split}"


def check_metrics_shape(metrics: Any, path: Path) -> None:
    """``metrics/egonormia.json`` as an input (the report, ``egoeval compare``): ``{setting: {model: entry}}``, each
    entry an object whose ``ledger`` (where there is one) is an object of counts and a cost, ``served_models`` an
    object of counts, ``verified`` and ``limit`` objects;
    else InputError naming the file and key. (The values themselves: ``egoeval.reported.check_metric_values``.)"""
    for setting, models in metrics.items():
        if not isinstance(models, dict):
            raise InputError(path, f"key {setting}: expected an object of models")
        for model, entry in models.items():
            key = f"{setting}/{model}"
            if not isinstance(entry, dict):
                raise InputError(path, f"key {key}: expected a model's entry (an object)")
            for part in ("ledger", "verified", "ci95", "served_models", "limit"):
                if entry.get(part) is not None and not isinstance(entry[part], dict):
                    raise InputError(path, f"key {key}/{part}: expected an object")
            for name, count in (entry.get("served_models") or {}).items():
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise InputError(path, f"key {key}/served_models/{name}: {count!r} is not a count of calls")
            for name, value in (entry.get("ledger") or {}).items():
                if isinstance(value, bool) != (name == "cost_is_lower_bound") and value is not None:
                    raise InputError(path, f"key {key}/ledger/{name}: {value!r} is not a count or cost")
                if not isinstance(value, bool) and isinstance(value, int | float) and value < 0:
                    raise InputError(path, f"key {key}/ledger/{name}: {value!r} is negative")


def our_rows(metrics: dict[str, Any], recorded: dict[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{setting: {model: entry}}`` of a metrics file, each entry with its protocol, dataset and split (``recorded``
    fills those a file written before they were recorded lacks); any non-result key is left out."""
    return {
        setting: {model: recorded | entry for model, entry in models.items() if isinstance(entry, dict)}
        for setting, models in metrics.items()
        if isinstance(models, dict)
    }


def _figure(entry: dict[str, Any], metric: str) -> str:
    interval = (entry.get("ci95") or {}).get(metric)
    shown = f"{entry[metric]:.2f}" if isinstance(entry.get(metric), int | float) else "-"
    return shown + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def aligned(header: list[str], rows: list[list[str]], numeric: set[int]) -> list[str]:
    """A plain-text table: columns padded to their widest cell, ``numeric`` columns right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [header, *rows]
    ]


NOT_OFFICIAL = "not the official protocol"  # a video variant's mark wherever its results are shown


def ours_table(rows: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Our rows, ranked by ``RANKED_BY`` in each setting, with protocol, dataset, split, n and 95% intervals."""
    header = ["setting", "#", "model", "protocol", "dataset", "split", "n", *METRICS]
    table = []
    for setting, models in sorted(rows.items()):
        for rank, model in ranked({m: e.get(RANKED_BY) for m, e in models.items()}):
            entry = models[model]
            keys = ("protocol", "dataset", "split", "n")
            shown = f"{setting} ({NOT_OFFICIAL})" if is_variant(setting) else setting
            table.append([shown, str(rank), model, *(str(entry.get(k, "-")) for k in keys)])
            table[-1] += [_figure(entry, m) for m in METRICS]
    return aligned(header, table, {1, 6, 7, 8, 9, 10})


def comparison_lines(
    metrics: dict[str, Any],
    published: dict[str, Any],
    dataset: str,
    mapping: dict[str, str],
    split: str = "full",
    run_split: str = "full",
    name: str | None = None,
    recorded: dict[str, str] | None = None,
    list_published: bool = False,
) -> list[str]:
    """The report ``egoeval compare`` prints: our rows first, then each mapped published figure beside ours where
    the rows are comparable (else why not), then, with ``list_published``, the published table itself."""
    rows = our_rows(metrics, recorded or {"split": run_split})
    lines = ["ours, ranked by both in each setting (95% bootstrap intervals):", *ours_table(rows), ""]
    table = select_table(published, dataset, split, name)
    if table is None:
        have = sorted({f"{t['dataset']}/{t['split']} ({t['as']})" for t in published.get("tables", [])})
        wanted = f"dataset {dataset!r}, split {split!r}" + (f", table {name!r}" if name else "")
        return [*lines, f"no published figures for {wanted} bundled (tables: {', '.join(have) or 'none'})"]
    lines.append(
        f"published: {dataset}, {split} split, protocol {PUBLISHED_PROTOCOL}, {table['as']}: {source_of(table)}"
    )
    compared = {}  # each row as it would be compared: the verified items of a full run count as the verified split
    for setting, models in rows.items():
        for model, entry in models.items():
            mine = _ours(entry, split, entry["split"])[0]
            compared[setting, model] = entry if mine is None else entry | {"split": split, "items": mine.get("items")}
    reasons = sorted({mismatch(row, table) for row in compared.values()} - {""})
    for reason in reasons:
        lines.append(f"not beside the published figures, not ranked among them: our rows are {reason}")
    reverse: dict[str, list[str]] = {}
    for ours, theirs in sorted(mapping.items()):
        reverse.setdefault(theirs, []).append(ours)
    for setting, models in sorted(table["figures"].items()):
        for model, figures in sorted(models.items(), key=lambda item: (item[0].casefold(), item[0])):
            for ours in reverse.get(model, []):
                entry = rows.get(setting, {}).get(ours)
                mine, how = _ours(entry, split, entry["split"]) if entry else (None, "")
                if mine is None:
                    why = f"no {setting} result in the metrics file" if not how else f"no {split} result: {how}"
                    lines.append(f"  ours {ours}: {why}")
                elif not mismatch(compared[setting, ours], table):
                    lines.append(f"{setting}/{model}: " + _published(figures))
                    protocol = entry.get("protocol", "unrecorded")
                    lines.append(f"  ours {ours} ({how}, n {mine['n']}, protocol {protocol}):")
                    lines += ["    " + _beside(metric, mine, float(figures[metric])) for metric in METRICS]
    known = {m for models in table["figures"].values() for m in models}
    for theirs in sorted(set(mapping.values()) - known):
        lines.append(f"note: published_as {theirs!r} is not among the models of this table")
    if not mapping:
        ours = sorted({m for models in rows.values() for m in models}, key=str.casefold)
        lines.append(
            f"note: none of our models is mapped to a published one (egonormia.model.published_as or "
            f"--map OURS=PUBLISHED); ours: {', '.join(ours) or 'none'}"
        )
    if list_published:
        lines.append(f"published figures ({dataset}, {split} split; not a ranking of ours), ranked by both:")
        for setting, models in sorted(table["figures"].items()):
            for rank, model in ranked({m: f.get(RANKED_BY) for m, f in models.items()}):
                lines.append(f"{setting}/{model} (#{rank}): " + _published(models[model]))
    else:
        lines.append("--published lists the published figures")
    others = [t["as"] for t in published.get("tables", []) if (t["dataset"], t["split"]) == (dataset, split)]
    if len(others) > 1:
        lines.append(
            f"also bundled for {dataset}/{split}: {', '.join(o for o in others if o != table['as'])} (--table)"
        )
    return lines


def _published(figures: dict[str, Any]) -> str:
    shown = ", ".join(f"{m} {figures[m]:.2f}" for m in METRICS)
    return shown + ("" if figures.get("n") is None else f" (n {figures['n']})")


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
    metrics: dict[str, Any],
    settings: Any,
    dataset: str | None = None,
    mapping: dict[str, str] | None = None,
    split: str | None = None,
    table: str | None = None,
    list_published: bool = False,
) -> str:
    """``egoeval compare``'s EgoNormia half: ``settings`` is the ``egonormia`` section (the metrics file does not
    record the split it was run on: ``egonormia.fetch.split`` says it). Options override the dataset and the published
    split (``verified`` on a full run compares the run's verified items), pick a bundled table other than the primary
    one, add name mappings to ``published_as``, and list the published table (``list_published``)."""
    names = {m.name: m.published_as for m in (settings.model, *settings.baselines) if m.published_as} | (mapping or {})
    chosen = dataset or settings.fetch.dataset
    run_split = settings.fetch.split
    published = load_published()
    if table and select_table(published, chosen, split or run_split, table) is None:
        have = sorted({t["as"] for t in published.get("tables", []) if t["dataset"] == chosen})
        raise InputError(PUBLISHED_FILE, f"no table {table!r} for {chosen}/{split or run_split} (tables: {have})")
    recorded = {"dataset": settings.fetch.rows_dataset, "split": run_split}
    lines = comparison_lines(
        metrics, published, chosen, names, split or run_split, run_split, table, recorded, list_published
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Add or replace the published tables one pinned source file yields."""
    parser = argparse.ArgumentParser(prog="python -m egoeval.egonormia.published", description=main.__doc__)
    parser.add_argument("file", type=Path, help="the source file, as fetched from the repository at the commit")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--dataset", required=True, choices=["egonormia", "ood_robot"])
    parser.add_argument("--as", dest="name", required=True, help="the table's name, e.g. leaderboard")
    for key in PROVENANCE:
        parser.add_argument(f"--{key}", required=True)
    parser.add_argument("--note", default="", help="what the source is and how it was read")
    parser.add_argument("--primary", action="store_true", help="the table compare and the report show by default")
    parser.add_argument("--out", type=Path, default=PUBLISHED_FILE)
    args = parser.parse_args(argv)
    try:
        raw = args.file.read_bytes()
    except OSError as error:
        print(f"{args.file}: {error}", file=sys.stderr)
        return 2
    meta = {key: getattr(args, key) for key in PROVENANCE}
    meta |= {"dataset": args.dataset, "as": args.name, "format": args.format, "primary": args.primary}
    try:
        new = tables_from_file(raw, args.file, **meta, **({"note": args.note} if args.note else {}))
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    published = load_published(args.out) if args.out.exists() else {"tables": []}
    replaced = {(t["dataset"], t["split"], t["as"]) for t in new}
    kept = [t for t in published.get("tables", []) if (t["dataset"], t["split"], t["as"]) not in replaced]
    if args.primary:  # one primary table per dataset and split
        splits = {(t["dataset"], t["split"]) for t in new}
        kept = [t | {"primary": False} if (t["dataset"], t["split"]) in splits else t for t in kept]
    published["tables"] = sorted(kept + new, key=lambda t: (t["dataset"], t["split"], not t["primary"], t["as"]))
    write_json(args.out, published)
    print(f"{args.out}: {len(new)} table(s) from {args.file}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
