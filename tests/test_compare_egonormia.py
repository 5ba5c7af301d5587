"""``egoeval compare``: published EgoNormia figures (data extracted from their pinned source) beside ours."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import forked
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import rankdata

from egoeval.core.errors import InputError
from egoeval.core.io.manifest import sha256_file
from egoeval.egonormia.published import (
    PROVENANCE,
    figures_from_eval_json,
    figures_from_leaderboard,
    figures_from_paper_table,
    load_published,
    ranked,
    select_table,
    setting_of,
)
from egoeval.egonormia.scoring import score_official

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
OOD_EVAL = DATA / "egonormia" / "ood_robot_eval.json"
# each bundled table's source file, by (repository, commit); the article is pinned as its Table 1 excerpt
SOURCES = {
    ("Open-Social-World/EgoNormia", "7eb7e8ed1e049e25c55fde721c87934ba99b9111"): OOD_EVAL,
    ("Open-Social-World/osw-website", "b570aa1a51e17ea2ab7366b0fa4ae2f7c40be999"): (
        DATA / "osw-website" / "leaderboard-b570aa1.tsx"
    ),
    ("Open-Social-World/osw-website", "85ac2af10377f0e958cb39978c1257961f92b0b0"): (
        DATA / "osw-website" / "leaderboard-85ac2af.tsx"
    ),
    ("Open-Social-World/osw-website", "c3a837ed471abcc6e55823ba482bbee1d4c70b79"): (
        DATA / "osw-website" / "egonormia-c3a837e-table1.mdx"
    ),
}
EXCERPTS = {DATA / "osw-website" / "egonormia-c3a837e-table1.mdx"}  # lines of the file, not the file: own sha256


def extract(source: Path, table: dict, out: Path) -> subprocess.CompletedProcess[str]:
    args = [str(source), "--format", table["format"], "--dataset", table["dataset"], "--as", table["as"]]
    args += [a for key in PROVENANCE for a in (f"--{key}", table[key])] + ["--out", str(out)]
    args += ["--note", table["note"]] * bool(table.get("note")) + ["--primary"] * table["primary"]
    command = [sys.executable, "-m", "egoeval.egonormia.published", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)


def test_the_bundled_file_is_the_extraction_of_its_pinned_sources(tmp_path: Path) -> None:
    bundled = load_published()
    out = tmp_path / "published.json"
    out.write_text(json.dumps({"about": bundled["about"], "tables": []}))
    done = set()
    for table in bundled["tables"]:
        source = SOURCES[(table["repository"], table["commit"])]
        if source not in EXCERPTS:
            assert sha256_file(source) == table["sha256"]
        if (source, table["as"]) not in done:
            ran = extract(source, table, out)
            assert ran.returncode == 0, ran.stderr
            done.add((source, table["as"]))
    rebuilt = json.loads(out.read_text())
    for table in rebuilt["tables"]:
        if SOURCES[(table["repository"], table["commit"])] in EXCERPTS:
            table["sha256"] = next(t["sha256"] for t in bundled["tables"] if t["commit"] == table["commit"])
    assert rebuilt == bundled


def test_the_bundled_tables_say_what_there_is() -> None:
    bundled = load_published()
    kinds = sorted((t["dataset"], t["split"], t["as"], t["primary"]) for t in bundled["tables"])
    assert kinds == [
        ("egonormia", "full", "leaderboard", True),
        ("egonormia", "full", "leaderboard-recalc", False),
        ("egonormia", "full", "paper-table-1", False),
        ("egonormia", "verified", "leaderboard", True),
        ("egonormia", "verified", "leaderboard-recalc", False),
        ("ood_robot", "full", "official-eval-json", True),
    ]
    full = select_table(bundled, "egonormia", "full")
    assert full is not None and sorted(full["figures"]) == ["blind", "pipeline", "video"]
    assert [len(full["figures"][s]) for s in ("blind", "pipeline", "video")] == [7, 8, 15]
    assert full["figures"]["video"]["Gemini 1.5 Pro"] == {
        "action": 51.9,
        "justification": 47.8,
        "both": 45.3,
        "sensible_iou": 61.1,
        "n": None,  # the leaderboard gives no n
    }
    verified = select_table(bundled, "egonormia", "verified")
    assert verified is not None and list(verified["figures"]) == ["video"] and len(verified["figures"]["video"]) == 14
    assert "Gemini 2.5 Pro (05-06-2025 Preview)" in verified["figures"]["video"]  # the medal is not the name
    paper = select_table(bundled, "egonormia", "full", "paper-table-1")
    assert paper is not None and paper["figures"]["video"]["Claude 3.5 Sonnet"]["both"] == 36.0
    assert full["figures"]["video"]["Claude 3.5 Sonnet"]["both"] == 25.5  # corrected on the leaderboard since
    for table in bundled["tables"]:
        assert all(table[key] for key in (*PROVENANCE, "sha256"))


def test_the_ood_robot_figures_are_the_official_scorers_on_the_official_results() -> None:
    published = select_table(load_published(), "ood_robot", "full")
    assert published is not None and published["sha256"] == sha256_file(OOD_EVAL)
    assert published["figures"] == figures_from_eval_json(json.loads(OOD_EVAL.read_text()))
    raw = score_official(json.loads(OOD_EVAL.read_text()))
    assert published["figures"]["pipeline"]["gpt-o3-mini"] == raw["desc_gpt-o3-mini"]
    assert published["figures"]["video"]["gpt-4o-240513"]["action"] == pytest.approx(5 / 11 * 100)


def test_model_keys_name_their_setting() -> None:
    assert setting_of("blind_gpt-4o") == ("blind", "gpt-4o")
    assert setting_of("desc_gpt-o3-mini") == ("pipeline", "gpt-o3-mini")
    assert setting_of("gpt-4o-240513") == ("video", "gpt-4o-240513")


def _entry(model: str, both: float, act: float = 50.0) -> str:
    fields = f'model: "{model}",\n      both: {both},\n      act: {act},\n      jus: 40.0,\n      sens: 30.5,'
    return f"    {{\n      {fields}\n    }},\n"


def _page(blind: str = "", video: str = "", verified: str = "") -> str:
    groups = (
        f"  blind: [\n{blind}  ],\n  pipeline: [\n  ],\n  video: [\n{video}  ],\n  video_verified: [\n{verified}  ],\n"
    )
    return f'"use client";\nconst rawData = {{\n{groups}}};\nconst fullData = [];\n'


def test_the_leaderboard_is_read_as_the_page_reads_it() -> None:
    page = _page(
        blind=_entry("🥈 Model A", 12.5),
        video=_entry("🥉Model B", 40.0) + _entry("Model C-V", 60.0),
        verified=_entry("Model B", 45.0),
    )
    found = figures_from_leaderboard(page, "page.tsx")
    assert found["full"] == {
        "blind": {"Model A": {"action": 50.0, "justification": 40.0, "both": 12.5, "sensible_iou": 30.5, "n": None}},
        "video": {"Model B": {"action": 50.0, "justification": 40.0, "both": 40.0, "sensible_iou": 30.5, "n": None}},
    }
    assert sorted(found["verified"]["video"]) == ["Model B", "Model C"]  # a video "-V" model is a verified one
    assert found["verified"]["video"]["Model C"]["both"] == 60.0


def test_a_broken_leaderboard_names_the_file_and_line() -> None:
    with pytest.raises(InputError, match=r"page.tsx, row 8: video entry lacks \['sens'\]"):
        figures_from_leaderboard(
            _page(video='    {\n      model: "X",\n      both: 1,\n      act: 1,\n      jus: 1,\n    },\n'), "page.tsx"
        )
    with pytest.raises(InputError, match="'X' twice in the full blind figures"):
        figures_from_leaderboard(_page(blind=_entry("X", 1) + _entry("🥇 X", 2)), "page.tsx")
    with pytest.raises(InputError, match=r"page\.tsx: no `const rawData = \{`"):
        figures_from_leaderboard("const data = {};", "page.tsx")


def _row(*cells: str, attrs: str = "") -> str:
    return (
        "<tr>" + "".join(f'<td className="x"{attrs if i == 0 else ""}>{c}</td>' for i, c in enumerate(cells)) + "</tr>"
    )


HEADER = "".join(
    f"<th>{h}</th>" for h in ["Category", "Model", "Both", "Action", "Justification", "Sensibility of Action"]
)


def test_the_paper_table_carries_row_spans_and_files_baseline_and_human_as_the_leaderboard() -> None:
    body = [
        _row("Baseline", "Constant Choice", "25.3", "25.3", "25.3", "40.5"),
        '<tr className="bg"><td colSpan="6">Blind Models</td></tr>',
        _row("Blind", "GPT-4o", "17.7", "19.9", "19.9", "55.9", attrs=' rowSpan="2"'),
        _row("o3-mini", "15.0", "16.8", "17.1", "<b>51.9</b>"),
        _row("Human", "Human", "92.4", "92.4", "92.4", "85.1"),
    ]
    text = f"<table><thead><tr>{HEADER}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    figures = figures_from_paper_table("<table><tr><th>Model</th></tr></table>\n" + text, "a.mdx")["full"]
    assert sorted(figures["blind"]) == ["Constant Choice", "GPT-4o", "o3-mini"]
    assert figures["blind"]["o3-mini"] == {
        "both": 15.0,
        "action": 16.8,
        "justification": 17.1,
        "sensible_iou": 51.9,
        "n": None,
    }
    assert list(figures["video"]) == ["Human"]
    with pytest.raises(InputError, match=r"a\.mdx, row 1: a Table 1 row of 5 cells, category 'Robots'"):
        figures_from_paper_table(f"<table><tr>{HEADER}</tr>{_row('Robots', 'R', '1', '2', '3', '4')}</table>", "a.mdx")


def _metrics(tmp_path: Path, **extra: object) -> Path:
    entry = {
        "protocol": "official",
        "action": 40.0,
        "justification": 30.0,
        "both": 20.0,
        "sensible_iou": 10.0,
        "n": 11,
        "ci95": {"action": [30.0, 50.0], "justification": [0.0, 10.0], "both": [0.0, 40.0], "sensible_iou": [5, 15]},
    }
    path = tmp_path / "metrics" / "egonormia.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"video": {"my-vlm": entry | extra}}))
    return path


def compare(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not (cwd / "params.yaml").exists():
        (cwd / "params.yaml").write_text((REPO / "params.yaml").read_text())
    return forked.run([sys.executable, "-m", "egoeval.cli", "compare", *args], cwd, dict(os.environ))


def test_compare_prints_published_figures_beside_ours(tmp_path: Path) -> None:
    metrics = _metrics(tmp_path, dataset="ood_robot")
    done = compare(tmp_path, str(metrics), "--dataset", "ood_robot", "--map", "my-vlm=gpt-4o-240513", "--published")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "video/gpt-4o-240513: action 45.45, justification 18.18, both 9.09, sensible_iou 25.00 (n 11)" in out
    assert "action: ours 40.00 [30.00, 50.00], published 45.45, ours - published -5.45, inside our 95%" in out
    assert "justification: ours 30.00 [0.00, 10.00], published 18.18, ours - published +11.82, outside our" in out
    assert "ours my-vlm (full run, n 11, protocol official)" in out
    assert re.search(r"^pipeline/gpt-o3-mini \(#\d+\): action ", out, re.MULTILINE)  # --published lists them all


def test_compare_on_the_default_dataset_prints_the_leaderboard_with_no_n(tmp_path: Path) -> None:
    _metrics(tmp_path, dataset="egonormia")
    done = compare(tmp_path, "metrics/egonormia.json", "--published")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    (source,) = [line for line in out if line.startswith("published: ")]
    assert source.startswith("published: egonormia, full split, protocol official, leaderboard: Open-Social-World/")
    assert "commit b570aa1a51e17ea2ab7366b0fa4ae2f7c40be999 (MIT), sha256 " in source
    published = select_table(load_published(), "egonormia", "full")
    assert published is not None
    listed = [line for line in out if line.startswith(("blind/", "pipeline/", "video/"))]
    assert len(listed) == sum(len(models) for models in published["figures"].values()) == 30
    video = [line for line in listed if line.startswith("video/")]  # ranked by both, best first
    shown = [float(re.search(r"both ([\d.]+)", line).group(1)) for line in video]
    assert shown == sorted(shown, reverse=True)
    assert any(
        re.fullmatch(
            r"video/Gemini 1\.5 Pro \(#\d+\): action 51\.90, justification 47\.80, both 45\.30, "
            r"sensible_iou 61\.10",
            line,
        )
        for line in video
    )
    assert "none of our models is mapped to a published one" in done.stdout and "ours: my-vlm" in done.stdout
    assert "also bundled for egonormia/full: leaderboard-recalc, paper-table-1 (--table)" in out


def test_compare_takes_the_split_from_params_and_a_mapped_model_gets_its_differences(tmp_path: Path) -> None:
    verified_items = {"action": 60.0, "justification": 50.0, "both": 40.0, "sensible_iou": 30.0, "n": 5, "ci95": None}
    _metrics(tmp_path, verified=verified_items, dataset="egonormia")
    params = (REPO / "params.yaml").read_text().replace("published_as: null", "published_as: GPT-4o", 1)
    (tmp_path / "params.yaml").write_text(params.replace("name: chance", "name: my-vlm", 1))
    full = compare(tmp_path, "metrics/egonormia.json")
    assert full.returncode == 0, full.stderr
    assert "video/GPT-4o: action 45.10, justification 44.80, both 39.80, sensible_iou 59.60" in full.stdout
    assert "  ours my-vlm (full run, n 11, protocol official):" in full.stdout
    assert "both: ours 20.00 [0.00, 40.00], published 39.80, ours - published -19.80, inside our 95%" in full.stdout
    assert "note: published_as" not in full.stdout  # GPT-4o is on the blind and pipeline boards too
    # the verified figures beside the run's verified items
    subset = compare(tmp_path, "metrics/egonormia.json", "--split", "verified").stdout
    assert "\npublished: egonormia, verified split, protocol official, leaderboard:" in subset
    assert "video/GPT-4o: action 53.00, justification 50.00, both 45.50, sensible_iou 62.70" in subset
    assert "ours my-vlm (the verified items of the full run, n 5, protocol official)" in subset
    assert "both: ours 40.00, published 45.50, ours - published -5.50, no interval" in subset
    # a run on the verified split (egonormia.fetch.split) is compared with the verified figures
    (tmp_path / "params.yaml").write_text(
        (tmp_path / "params.yaml").read_text().replace("split: full", "split: verified", 1)
    )
    verified = compare(tmp_path, "metrics/egonormia.json").stdout
    assert "\npublished: egonormia, verified split, protocol official, leaderboard:" in verified
    assert "ours my-vlm (verified run, n 11, protocol official)" in verified
    assert "action: ours 40.00 [30.00, 50.00], published 53.00, ours - published -13.00, outside our" in verified
    assert (
        "ours my-vlm: no full result: the run used split verified"
        in compare(tmp_path, "metrics/egonormia.json", "--split", "full").stdout
    )


def test_compare_shows_another_table_on_request_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    _metrics(tmp_path, dataset="egonormia")
    paper = compare(tmp_path, "metrics/egonormia.json", "--table", "paper-table-1", "--map", "my-vlm=Claude 3.5 Sonnet")
    assert paper.returncode == 0, paper.stderr
    assert "\npublished: egonormia, full split, protocol official, paper-table-1: " in paper.stdout
    assert "video/Claude 3.5 Sonnet: action 43.50, justification 41.00, both 36.00, sensible_iou 59.30" in paper.stdout
    done = compare(tmp_path, "metrics/egonormia.json", "--table", "nope")
    assert done.returncode == 2 and "no table 'nope' for egonormia/full" in done.stderr
    done = compare(tmp_path, "metrics/egonormia.json", "--dataset", "ood_robot", "--split", "verified")
    assert "no published figures for dataset 'ood_robot', split 'verified' bundled" in done.stdout


def test_compare_reads_the_mapping_from_params_and_says_what_is_missing(tmp_path: Path) -> None:
    _metrics(tmp_path, dataset="ood_robot")
    params = (REPO / "params.yaml").read_text().replace("published_as: null", "published_as: rag", 1)
    params = params.replace("name: chance", "name: my-vlm", 1).replace("dataset: egonormia", "dataset: ood_robot", 1)
    (tmp_path / "params.yaml").write_text(params)
    done = compare(tmp_path, "metrics/egonormia.json")
    assert done.returncode == 0, done.stderr
    assert "video/rag:" in done.stdout and "ours my-vlm" in done.stdout
    done = compare(tmp_path, "metrics/egonormia.json", "--dataset", "egonormia")
    assert "note: published_as 'rag' is not among the models of this table" in done.stdout


def test_compare_refuses_an_unknown_benchmark(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text("{}")
    done = compare(tmp_path, "other.json")
    assert done.returncode == 2 and "no published numbers for benchmark 'other'" in done.stderr
    (tmp_path / "egohumans.json").write_text("{}")
    done = compare(tmp_path, "egohumans.json", "--dataset", "ood_robot")
    assert done.returncode == 2 and "the EgoNormia options" in done.stderr


def test_compare_leads_with_our_rows_and_keeps_the_sample_apart_from_the_published(tmp_path: Path) -> None:
    # a file without recorded dataset and split, and a constant answerer that beats the published board on it
    entry = {"protocol": "official", "both": 75.0, "action": 75.0, "justification": 75.0, "sensible_iou": 50.0}
    metrics = {
        "video": {"Zeta": entry | {"n": 16}, "alpha": entry | {"both": 6.25, "n": 16}, "Beta": entry | {"n": 16}}
    }
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "egonormia.json").write_text(json.dumps(metrics))
    done = compare(tmp_path, "metrics/egonormia.json", "--map", "Zeta=GPT-4.1")  # params: source sample
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("ours, ranked by both")
    header = out[1].split()
    assert header[:7] == ["setting", "#", "model", "protocol", "dataset", "split", "n"]
    ours = [line.split() for line in out[2:5]]
    # ties share a rank and sort by name ignoring case; the row says what it is
    assert [row[1:7] for row in ours] == [
        ["1", "Beta", "official", "sample", "full", "16"],
        ["1", "Zeta", "official", "sample", "full", "16"],
        ["3", "alpha", "official", "sample", "full", "16"],
    ]
    assert len({len(line) for line in out[1:5]}) == 1  # aligned
    why = [line for line in out if line.startswith("not beside the published figures")]
    assert why == [
        "not beside the published figures, not ranked among them: our rows are dataset sample (published: egonormia)"
    ]
    assert not any(line.startswith("video/GPT-4.1") or "ours - published" in line for line in out)
    assert not any(line.startswith(("blind/", "pipeline/")) for line in out)  # no published listing unless asked


@given(st.dictionaries(st.text(min_size=1, max_size=4), st.sampled_from([0.0, 6.25, 12.5, 50.0, 75.0]), min_size=1))
def test_ranks_are_competition_ranks_by_value_and_ties_sort_by_name_ignoring_case(values: dict[str, float]) -> None:
    shown = ranked(values)
    expected = rankdata([-v for v in values.values()], method="min")  # SciPy: ties share the lowest rank
    assert {name: rank for rank, name in shown} == dict(zip(values, expected.astype(int).tolist(), strict=True))
    assert [(-values[name], name.casefold(), name) for _, name in shown] == sorted(
        (-v, name.casefold(), name) for name, v in values.items()
    )


def test_a_subset_of_the_dataset_is_not_ranked_among_the_published(tmp_path: Path) -> None:
    """A local copy holding 100 of the 1,853 clips, or a smoke run, records its clips (``items``): not comparable."""
    _metrics(tmp_path, dataset="egonormia", split="full", items=100, verified={"n": 5, "items": 5, "both": 40.0})
    done = compare(tmp_path, "metrics/egonormia.json", "--map", "my-vlm=GPT-4o")
    assert done.returncode == 0, done.stderr
    assert (
        "not beside the published figures, not ranked among them: our rows are items 100 (published: 1853)"
        in done.stdout
    )
    assert "ours - published" not in done.stdout
    subset = compare(tmp_path, "metrics/egonormia.json", "--map", "my-vlm=GPT-4o", "--split", "verified").stdout
    assert "our rows are items 5 (published: 200)" in subset and "ours - published" not in subset
    _metrics(tmp_path, dataset="egonormia", split="full", items=1853, verified={"n": 5, "items": 200, "both": 40.0})
    whole = compare(tmp_path, "metrics/egonormia.json", "--map", "my-vlm=GPT-4o")
    assert "not beside" not in whole.stdout and "both: ours 20.00 [0.00, 40.00], published 39.80" in whole.stdout
