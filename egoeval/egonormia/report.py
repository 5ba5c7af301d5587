"""EgoNormia's sections of the report page (``egoeval report``).

- the leaderboard per setting with 95% bootstrap intervals (metrics/egonormia.json) and the published figures of the
  evaluated dataset and split (``egonormia.fetch.dataset``, ``egonormia.fetch.split``; the primary table of
  egoeval/egonormia/data/published.json) where bundled;
- action accuracy per norm category (plots/egonormia/categories.csv);
- what the answers cost per setting and model (each metrics entry's ledger: calls, usage tokens, cost);
- a browsable set of clips (``egonormia.report.clips``, those most models get wrong first) with the frames image,
  the options, the gold answers and each model's replies and parsed choices, each linked to its full log (the
  messages sent: reports/clips/, the egonormia_clip_logs stage), and a link to every clip's log.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from egoeval.charts import grouped_bars, interval_chart
from egoeval.core.benchmarks import ReportPart, ReportSection
from egoeval.core.errors import ArtifactUnavailable, InputError
from egoeval.core.io.bounded import read_csv, read_parquet
from egoeval.egonormia.artifacts import (
    CATEGORIES_FILE,
    CLIP_LOGS,
    FRAMES,
    ITEMS,
    METRICS_FILE,
    PAIRED_FILE,
    PREDICTION_COLUMNS,
    PREDICTIONS,
    RESPONSES,
    SETTINGS,
    FrameStore,
    clip_log_name,
    is_variant,
    read_items,
    read_table,
    require_columns,
)
from egoeval.egonormia.paired import recorded_data, recorded_protocols, smoke_limit
from egoeval.egonormia.published import (
    NOT_OFFICIAL,
    PUBLISHED_PROTOCOL,
    RANKED_BY,
    check_metrics_shape,
    load_published,
    mismatch,
    our_rows,
    ranked,
    select_table,
    source_of,
)
from egoeval.markup import (
    SMOKE,
    data_uri,
    esc,
    file_digests,
    fmt,
    paired_table,
    params_digest,
    smoke_labelled,
    table,
)
from egoeval.reported import read_metrics
from egoeval.significance import read_paired

if TYPE_CHECKING:
    from egoeval.egonormia.settings import EgoNormiaSettings

METRICS = ("both", "action", "justification", "sensible_iou")  # in the leaderboard's order
METRIC_NAMES = {"both": "both", "action": "action", "justification": "justification", "sensible_iou": "sensible IoU"}
LETTERS = "ABCDE"
STYLE = """img.frames{max-width:100%;display:block;margin:.5rem 0;border:1px solid #ccc}
article.clip{border:1px solid #ddd;border-radius:6px;padding:.2rem 1rem 1rem;margin:1rem 0}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.4rem;font-size:.8rem;max-height:14rem;overflow:auto}
.controls{margin:.5rem 0}.controls input[type=search]{width:20rem;padding:.2rem}
"""
SCRIPT = """
(function () {
  var filter = document.getElementById('clip-filter');
  var wrongOnly = document.getElementById('clip-wrong');
  var count = document.getElementById('clip-count');
  if (!filter || !wrongOnly || !count) { return; }
  var clips = Array.prototype.slice.call(document.querySelectorAll('article.clip'));
  function update() {
    var text = filter.value.trim().toLowerCase();
    var shown = 0;
    clips.forEach(function (clip) {
      var visible = clip.getAttribute('data-search').indexOf(text) >= 0 &&
        (!wrongOnly.checked || Number(clip.getAttribute('data-wrong')) > 0);
      clip.hidden = !visible;
      shown += visible ? 1 : 0;
    });
    count.textContent = shown + ' of ' + clips.length + ' clips shown';
  }
  filter.addEventListener('input', update);
  wrongOnly.addEventListener('change', update);
  update();
})();
"""


def _metric_cell(entry: dict[str, Any], metric: str) -> str:
    interval = (entry.get("ci95") or {}).get(metric)
    shown = f"<b>{fmt(entry.get(metric))}</b>"
    if interval:
        shown += f' <span class="ci">[{fmt(interval[0])}, {fmt(interval[1])}]</span>'
    return shown


def _model_cell(model: str, entry: dict[str, Any]) -> str:
    """Our model's name with what its numbers need said beside them: the models the endpoint named as serving its
    replies (``served_models``) and a smoke run's limit."""
    cell = esc(model)
    served = entry.get("served_models") or {}
    if served:
        calls = (entry.get("ledger") or {}).get("calls") or sum(served.values())
        named = ", ".join(f"{name} ({count} of {calls} calls)" for name, count in served.items())
        cell += f' <span class="tag wrong served">served as {esc(named)}</span>'
    limit = entry.get("limit")
    if isinstance(limit, dict):
        cell += f' <span class="tag {SMOKE}">smoke run: limit {esc(limit.get("clips"))}</span>'
    return cell


def _row_cells(entry: dict[str, Any]) -> list[str]:
    """What a leaderboard row is: protocol, dataset, split and n (``not given`` where a source gives no n)."""
    n = entry.get("n")
    return [esc(entry.get(k, "unrecorded")) for k in ("protocol", "dataset", "split")] + [
        esc("not given" if n is None else n)
    ]


def _published_entry(figures: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    return figures | {"protocol": PUBLISHED_PROTOCOL, "dataset": table["dataset"], "split": table["split"]}


def leaderboard(
    metrics: dict[str, Any],
    published: dict[str, Any],
    dataset: str,
    split: str = "full",
    recorded: dict[str, str] | None = None,
) -> str:
    """Per setting: our models ranked by ``both`` with 95% intervals, every row with its protocol, dataset, split and
    n. The published figures of ``dataset`` and ``split`` (the primary table of ``published``) are ranked among ours
    only where our rows are their dataset, split and protocol; otherwise they stand in their own table, titled as
    not comparable. ``recorded`` fills the dataset and split a metrics file written before they were recorded
    lacks. One chart: our models in rank order, published figures as stars only where comparable."""
    bundled = select_table(published, dataset, split)
    figures_by_setting = (bundled or {}).get("figures") or {}
    rows_by_setting = our_rows(metrics, recorded or {"dataset": dataset, "split": split})
    settings = [s for s in SETTINGS if s in rows_by_setting] + sorted(set(rows_by_setting) - set(SETTINGS))
    header = ["#", "model", "protocol", "dataset", "split", "n", *(f"{METRIC_NAMES[m]} % [95% CI]" for m in METRICS)]
    header += ["coverage", "parse fail", "call fail"]
    parts, chart_rows, chart_published, order = [], [], [], {}
    for setting in settings:
        ours = rows_by_setting[setting]
        theirs = figures_by_setting.get(setting, {})
        reasons = sorted({mismatch(entry, bundled) for entry in ours.values()} - {""}) if bundled else []
        together = bool(theirs) and not reasons
        entries = {("ours", m): e for m, e in ours.items()}
        if together:
            entries |= {("published", m): _published_entry(f, bundled) for m, f in theirs.items()}
        order[setting] = []
        rows = []
        for rank, key in ranked({k: e.get(RANKED_BY) for k, e in entries.items()}, name=lambda k: k[1]):
            kind, model = key
            order[setting].append(model)
            entry = entries[key]
            if kind == "ours":
                rows.append(
                    [
                        str(rank),
                        _model_cell(model, entry),
                        *_row_cells(entry),
                        *(_metric_cell(entry, m) for m in METRICS),
                    ]
                    + [
                        fmt(100 * entry.get(k, 0)) + "%"
                        for k in ("coverage", "parse_failure_rate", "call_failure_rate")
                    ]
                )
                for metric in METRICS:
                    interval = (entry.get("ci95") or {}).get(metric) or [entry.get(metric), entry.get(metric)]
                    if entry.get(metric) is not None:
                        chart_rows.append((setting, model, metric, entry[metric], interval[0], interval[1]))
            else:
                tag = f'<span class="tag">published · {esc(bundled["as"])}</span>'
                rows.append(
                    [str(rank), f"{esc(model)} {tag}", *_row_cells(entry)]
                    + [f"<i>{fmt(entry.get(m))}</i>" for m in METRICS]
                    + ["", "", ""]
                )
                chart_published += [(setting, model, m, entry[m]) for m in METRICS if m in entry]
        parts.append(f"<h3>{setting_cell(setting)}</h3>{table(header, rows, 'leaderboard')}")
        if theirs and not together:
            apart = {m: _published_entry(f, bundled) for m, f in theirs.items()}
            published_rows = [
                [
                    str(rank),
                    esc(model),
                    *_row_cells(apart[model]),
                    *(f"<i>{fmt(apart[model].get(m))}</i>" for m in METRICS),
                ]
                for rank, model in ranked({m: e.get(RANKED_BY) for m, e in apart.items()})
            ]
            parts.append(
                f'<h4 class="apart">Published figures, {esc(setting)}: {esc(bundled["dataset"])}, '
                f"{esc(bundled['split'])} split, the authors' runs. Not comparable with the rows above, and not "
                f"ranked with them: ours are {esc('; '.join(reasons))}</h4>"
                + table(header[:6] + [f"{METRIC_NAMES[m]} %" for m in METRICS], published_rows, "published")
            )
    if bundled:
        note = (
            f"Published figures (italic) of dataset {esc(dataset)}, {esc(split)} split, {esc(bundled['as'])}: "
            f"{esc(source_of(bundled))}."
        )
    else:
        elsewhere = sorted({f"{t['dataset']}/{t['split']}" for t in published.get("tables", []) if t.get("primary")})
        note = (
            f"No published figures of dataset {esc(dataset)}, {esc(split)} split are bundled (figures for: "
            f"{esc(', '.join(elsewhere) or 'none')})."
        )
    note = f'<p class="note">{note} (<code>egoeval/egonormia/data/published.json</code>)</p>'
    served = ""
    if any(entry.get("served_models") for rows in rows_by_setting.values() for entry in rows.values()):
        served = (
            " <i>served as</i>: the endpoint named another model than the one asked as serving that row's replies "
            "(<code>served_models</code> in the metrics)."
        )
    rows_frame = pd.DataFrame(chart_rows, columns=["setting", "model", "metric", "value", "low", "high"])
    published_frame = pd.DataFrame(chart_published, columns=["setting", "model", "metric", "value"])
    chart = interval_chart(rows_frame, order, METRICS, published_frame, "egonormia-leaderboard")
    return (
        '<section id="egonormia-leaderboard"><h2>EgoNormia leaderboard</h2>'
        "<p>Accuracy (%) per setting, ranked by <i>both</i> (action and justification right; equal figures share a "
        "rank); 95% bootstrap intervals in brackets. Unusable answers count as wrong. Every row says its protocol, "
        f"dataset, split and n.{served}</p>{''.join(parts)}{note}<figure>{chart}</figure></section>"
    )


def setting_cell(setting: str) -> str:
    """A setting as a table shows it: a video variant other than the strip marked as not the official protocol."""
    return esc(setting) + (f' <span class="tag">{NOT_OFFICIAL}</span>' if is_variant(setting) else "")


def category_section(categories: pd.DataFrame) -> str:
    require_columns(categories, ("setting", "model", "category", "n", "accuracy"), CATEGORIES_FILE)
    chart = grouped_bars(
        categories, "setting", "category", "model", "accuracy", "action accuracy %", "egonormia-cat", count="n"
    )
    rows = [
        [setting_cell(r.setting), esc(r.model), esc(r.category), esc(r.n), fmt(r.accuracy)]
        for r in categories.itertuples(index=False)
    ]
    return (
        '<section id="egonormia-categories"><h2>EgoNormia: action accuracy per norm category</h2>'
        "<p>Category of the correct option (a clip counts in each of its categories).</p>"
        f'<figure class="category-chart">{chart}</figure>'
        f"<details><summary>table</summary>{table(['setting', 'model', 'category', 'n', 'accuracy %'], rows)}"
        "</details></section>"
    )


def _choice(index: int, gold: set[int]) -> str:
    if index < 0:
        return '<span class="bad">unusable</span>'
    mark = "ok" if index in gold else "bad"
    return f'<span class="{mark}">{LETTERS[index] if index < len(LETTERS) else index}</span>'


def _set_choice(chosen: Sequence[int], gold: set[int], error: str) -> str:
    if error:
        return '<span class="bad">unusable</span>'
    union = set(chosen) | gold
    iou = len(set(chosen) & gold) / len(union) if union else 0.0
    letters = ", ".join(LETTERS[i] if i < len(LETTERS) else str(i) for i in sorted(chosen)) or "none"
    mark = "ok" if set(chosen) == gold else "bad"
    return f'<span class="{mark}">{letters}</span> <span class="ci">IoU {iou:.2f}</span>'


def select_clips(items: pd.DataFrame, predictions: pd.DataFrame, count: int) -> list[str]:
    """The ``count`` clip ids most (setting, model) pairs answer wrongly (action), ties by id."""
    correct = dict(zip(items["id"].astype(str), items["correct_idx"].astype(int), strict=True))
    wrong = {clip: 0 for clip in correct}
    for clip, action in zip(predictions["id"].astype(str), predictions["action"].astype(int), strict=True):
        if clip in wrong and action != correct[clip]:
            wrong[clip] += 1
    return sorted(wrong, key=lambda clip: (-wrong[clip], clip))[:count]


def clip_card(
    item: Any, frames: FrameStore, predictions: pd.DataFrame, responses: pd.DataFrame, index: int
) -> tuple[str, int]:
    """One clip: frames image, options with gold marks, every (setting, model)'s choices and replies.

    Returns the HTML and how many (setting, model) pairs got the action wrong."""
    clip = str(item.id)
    correct = int(item.correct_idx)
    sensible = {int(i) for i in item.sensible_idx}
    category = ", ".join(str(c) for c in item.taxonomy[correct]) if len(item.taxonomy) > correct else ""
    try:
        image = f'<img class="frames" alt="frames of {esc(clip)}" src="{data_uri(frames.jpeg(clip), "image/jpeg")}">'
    except ArtifactUnavailable as why:
        image = f'<p class="bad">{esc(why)}</p>'
    options = [
        [
            f"<b>{LETTERS[k]}</b>",
            esc(behavior) or "<i>(empty)</i>",
            esc(justification) or "<i>(empty)</i>",
            ("✔ action &amp; justification" if k == correct else "") + (" · sensible" if k in sensible else ""),
        ]
        for k, (behavior, justification) in enumerate(zip(item.behaviors, item.justifications, strict=True))
    ]
    answered = []
    wrong = 0
    mine = predictions[predictions["id"].astype(str) == clip]
    replies = responses[responses["id"].astype(str) == clip]
    for row in mine.itertuples(index=False):
        wrong += int(row.action) != correct
        said = replies[(replies["setting"] == row.setting) & (replies["model"] == row.model)]
        texts = []
        for reply in said.sort_values("subtask").itertuples(index=False):
            order = ", ".join(LETTERS[int(k)] for k in reply.permutation) if len(reply.permutation) else ""
            shown = f" (options shown as {order})" if order else ""
            body = esc(reply.response) if not reply.error else f'<span class="bad">{esc(reply.error)}</span>'
            texts.append(f"<p><b>{esc(reply.subtask)}</b>{esc(shown)}</p><pre>{body}</pre>")
        errors = [str(getattr(row, f"{s}_error")) for s in ("action", "justification", "sensible")]
        answered.append(
            [
                setting_cell(row.setting),
                esc(row.model),
                _choice(int(row.action), {correct}),
                _choice(int(row.justification), {correct}),
                _set_choice([int(i) for i in row.sensible], sensible, errors[2]),
                esc("; ".join(e for e in errors if e)),
                f"<details><summary>replies</summary>{''.join(texts)}</details>" if texts else "",
            ]
        )
    description = str(getattr(item, "description", "") or "")
    card = (
        f'<article class="clip" id="clip-{index}" data-wrong="{wrong}" data-search="{esc(clip.lower())} '
        f'{esc(category.lower())}"><h3>{esc(clip)} <span class="tag">{esc(category)}</span>'
        f"{' <span class=tag>verified</span>' if bool(getattr(item, 'verified', False)) else ''}"
        f' <span class="tag wrong">{wrong} of {len(mine)} wrong</span></h3>'
        f'<p><a class="log" href="{esc(log_link(clip))}">the full log: messages sent, raw replies, '
        "parsed answers</a></p>"
        f"{image}"
        + (
            f"<details><summary>scene description (pipeline setting)</summary><p>{esc(description)}</p></details>"
            if description
            else ""
        )
        + table(["", "behaviour", "justification", "gold"], options, "options")
        + table(["setting", "model", "action", "justification", "sensible", "failure", ""], answered, "answers")
        + "</article>"
    )
    return card, wrong


def log_link(clip: str) -> str:
    """The link from the page (reports/index.html) to a clip's log (the egonormia_clip_logs stage's page)."""
    return f"{CLIP_LOGS.name}/{clip_log_name(clip)}"


def clips_section(root: Path, count: int) -> str:
    items = read_items(root / ITEMS)
    predictions = read_predictions(root / PREDICTIONS)
    responses = read_responses(root / RESPONSES)
    frames = FrameStore(read_table(root / FRAMES / "index.parquet", ["id", "image", "error"]), root / FRAMES)
    chosen = select_clips(items, predictions, count)
    by_id = {str(row.id): row for row in items.itertuples(index=False)}
    cards = [clip_card(by_id[clip], frames, predictions, responses, i)[0] for i, clip in enumerate(chosen)]
    return (
        '<section id="egonormia-clips"><h2>EgoNormia clips</h2>'
        f"<p>{len(chosen)} of {len(items)} clips, those the most models get wrong first. Options are lettered in the "
        f"dataset's order (A–E); {option_order_note(responses)} "
        '<span class="ok">green</span>: right, <span class="bad">red</span>: wrong. '
        f"Every clip's log (the messages sent, raw replies, parsed answers, gold): <a href=\"{esc(CLIP_LOGS.name)}/"
        'index.html">all clips</a>, or <code>egoeval show CLIP</code>.</p>'
        '<div class="controls"><input id="clip-filter" type="search" placeholder="filter by id or category">'
        '<label><input id="clip-wrong" type="checkbox"> only clips some model gets wrong</label> '
        '<span id="clip-count"></span></div>'
        f"{''.join(cards)}</section>"
    )


def option_order_note(responses: pd.DataFrame) -> str:
    """How the models saw the options, per protocol, from the recorded permutations (not from the protocol's name)."""
    notes = []
    for protocol, replies in responses.groupby(responses["protocol"].astype(str), sort=True):
        shuffled = any(list(map(int, p)) != list(range(len(p))) for p in replies["permutation"])
        notes.append(
            f"under protocol {esc(protocol)} the models saw them "
            + ("shuffled, as their replies note" if shuffled else "in this order")
        )
    return "; ".join(notes) + "." if notes else "no model replies are recorded."


def ledger_section(metrics: dict[str, Any]) -> str:
    """Per setting and model, the calls behind the answers and what they cost (each entry's ``ledger``)."""
    header = ["setting", "model", "calls", "without usage", "prompt tokens", "completion tokens", "cost (USD)"]

    def count(value: Any) -> str:
        return "–" if value is None else f"{int(value):,}"

    rows = []
    for setting in [s for s in SETTINGS if s in metrics] + sorted(set(metrics) - set(SETTINGS)):
        for model, entry in sorted(metrics[setting].items()):
            ledger = entry.get("ledger") or {}
            cost = "–" if ledger.get("cost_usd") is None else f"{ledger['cost_usd']:.4f}"
            rows.append(
                [setting_cell(setting), esc(model)]
                + [count(ledger.get(k)) for k in ("calls", "calls_without_usage", "prompt_tokens", "completion_tokens")]
                + [f"≥ {cost}" if ledger.get("cost_is_lower_bound") else cost]
            )
    return (
        '<section id="egonormia-ledger"><h2>EgoNormia: what the answers cost</h2>'
        "<p>The calls behind each setting's answers, whether this run sent them or found them in the response cache, "
        "with the endpoint's <i>usage</i> tokens and the cost at <code>egonormia.model.price</code>. – : not "
        "reported (a local baseline counts no tokens; no price set). <i>without usage</i>: calls whose reply reported "
        "no usage (or a count not believed); their tokens are not in the sums, so the cost is then a lower bound "
        "(≥). What one run sent, found cached, retried and "
        "waited (latency p50 / p95) is printed by the infer stage and kept beside the response cache "
        "(<code>ledger-egonormia_infer.json</code>); <code>egoeval estimate</code> says it before a run.</p>"
        f"{table(header, rows, 'ledger')}</section>"
    )


def read_predictions(path: Path) -> pd.DataFrame:
    return read_parquet(path, PREDICTION_COLUMNS)


def read_responses(path: Path) -> pd.DataFrame:
    return read_parquet(path, ("id", "setting", "model", "protocol", "subtask", "permutation", "response", "error"))


def paired_section(paired: pd.DataFrame, protocols: list[str], data: str, confidence: float) -> str:
    """``plots/egonormia/paired.csv`` as a table: what was compared, on which clips (``data``: the metrics' own
    account, ``paired.recorded_data``), by which test."""
    intro = (
        f"<p>Models compared clip by clip on the same clips (protocol {esc(', '.join(protocols) or 'unknown')}, "
        f"{esc(data)}; <i>split</i> and <i>n</i> on every row, n = the clips both sides count). "
        "<i>diff</i> = a − b in points with its "
        f"{confidence:.0%} paired bootstrap interval (the same resampled clips for both); action, justification and "
        "both by the exact McNemar test on the clips only one side got right (<i>a only</i>, <i>b only</i>), "
        "sensible IoU by the bootstrap; <i>p Holm</i> adjusts over the pairs of each setting, split and metric. "
        "Rows <i>video-blind</i> and <i>pipeline-blind</i> are one model's gain from seeing the clip "
        "(a = that setting, b = blind); rows <i>video:…-video</i> one model's video variant minus the official strip "
        f"(a = the variant, {NOT_OFFICIAL}; b = video, the strip). "
        "<code>egoeval compare metrics/egonormia.json --models A B</code> prints one pair.</p>"
    )
    body = paired_table(paired) if len(paired) else "<p>No two runs share a setting or a model two settings.</p>"
    return f'<section id="egonormia-paired"><h2>EgoNormia paired comparisons</h2>{intro}{body}</section>'


def report(root: Path, settings: EgoNormiaSettings) -> ReportPart:
    """EgoNormia's sections for the workspace at ``root`` (``settings``: its validated section)."""
    params = settings
    if not (root / CATEGORIES_FILE).is_file():
        raise InputError(root / CATEGORIES_FILE, "file not found (run the stages before this one)")
    metrics = read_metrics(root / METRICS_FILE, check_metrics_shape)
    protocols = recorded_protocols(metrics)
    shown = (recorded_data(metrics), params.score.confidence)
    sections = [
        ReportSection(
            "egonormia-leaderboard",
            "leaderboard",
            leaderboard(
                metrics,
                load_published(),
                params.fetch.dataset,
                params.fetch.split,
                {"dataset": params.fetch.rows_dataset, "split": params.fetch.split},
            ),
        ),
        ReportSection("egonormia-paired", "paired", paired_section(read_paired(root / PAIRED_FILE), protocols, *shown)),
        ReportSection("egonormia-categories", "categories", category_section(read_csv(root / CATEGORIES_FILE))),
        ReportSection("egonormia-ledger", "cost", ledger_section(metrics)),
        ReportSection("egonormia-clips", "clips", clips_section(root, params.report.clips)),
    ]
    if smoke_limit(metrics) is not None:  # every section that shows its numbers says so
        said = f"EgoNormia on {recorded_data(metrics)}"
        sections = [ReportSection(s.anchor, s.label, smoke_labelled(s.html, said)) for s in sections]
    return ReportPart(sections, STYLE, SCRIPT, provenance(root, settings))


PROVENANCE_FILES = (METRICS_FILE, CATEGORIES_FILE, PAIRED_FILE, PREDICTIONS, RESPONSES)  # what the sections show


def provenance(root: Path, settings: EgoNormiaSettings) -> dict[str, str]:
    """What EgoNormia's sections were made from, deterministically: the pinned data (source, dataset, split, the
    Hugging Face revision or the manifest's digest, a smoke run's limit), the digest of the egonormia params and of
    every file the sections show."""
    fetch = settings.fetch
    data = f"source {fetch.source} ({fetch.path}), dataset {fetch.rows_dataset}, split {fetch.split}"
    if fetch.source == "huggingface":
        data += f", {fetch.hf_repo} at revision {fetch.hf_revision}"
    if fetch.limit is not None:
        data += f", smoke run: limit {fetch.limit} clips, seed {fetch.limit_seed}"
    return {
        "EgoNormia data": data + "\n" + file_digests(root, [fetch.manifest]),
        "EgoNormia params": f"the egonormia params section as validated: sha256 {params_digest(settings)}",
        "EgoNormia results": file_digests(root, PROVENANCE_FILES),
    }
