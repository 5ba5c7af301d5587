"""The report page from the benchmarks' fragments (the ``report`` stage): the same page as from their parts, in the
registry's order whatever the files are called, and a bad fragment named by file and key, the last page kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, tool_env

from egoeval.core.benchmarks import ReportPart, ReportSection
from egoeval.core.io.atomic import write_json
from egoeval.report_page import FRAGMENTS, OUT, Fragment, assemble_page, read_fragments

ALPHA = Fragment(
    "alpha",
    "Alpha",
    200,
    ReportPart(
        [ReportSection("alpha", "α results", '<h2 id="alpha">Alpha «quoted» "text"</h2>\n<p>\\d</p>')],
        "a{}",
        provenance={"Alpha data": "source x\nmanifest sha256 <ab>"},
    ),
)
BETA = Fragment(
    "beta",
    "Beta",
    10,
    ReportPart(
        [ReportSection("beta-1", "one", "<p>1</p>"), ReportSection("beta-2", "two", "<p>2 \u2014 é</p>")],
        ".beta{color:#555}",
        "console.log('beta');",
    ),
)


def write_fragments(root: Path, *fragments: Fragment) -> Path:
    """``fragments`` as their report stages write them, under ``root``."""
    for fragment in fragments:
        write_json(root / FRAGMENTS / f"{fragment.benchmark}.json", fragment.to_json())
    return root / FRAGMENTS


def page_stage(root: Path) -> subprocess.CompletedProcess[str]:
    """The ``report`` stage's command (dvc.yaml) in the workspace ``root``."""
    return subprocess.run(
        [sys.executable, "-m", "stages.report"],
        cwd=root,
        env=tool_env(PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_page_from_fragments_is_the_page_from_the_parts(tmp_path: Path) -> None:
    folder = write_fragments(tmp_path, ALPHA, BETA)
    (folder / ".alpha.json.egoeval-staged-1").write_text("{")  # what a killed write leaves: not a fragment
    assert read_fragments(folder) == [BETA, ALPHA]  # by order, then name: the registry's order
    page = assemble_page([BETA, ALPHA])
    assert page.index("<p>1</p>") < page.index("<p>2 \u2014 é</p>") < page.index('id="alpha"')
    assert "<title>egoeval report: Beta and Alpha</title>" in page and '<a href="#alpha">α results</a>' in page
    # the provenance comes last, each part's rows escaped; no time, no commit unless stamped
    assert page.index('id="alpha"') < page.index('<section id="provenance">')
    assert "<td>Alpha data</td><td>source x\nmanifest sha256 &lt;ab&gt;</td>" in page and "<td>made</td>" not in page
    stamped = assemble_page([BETA, ALPHA], stamp="2026-12-05 10:00:00 UTC, commit abc")
    assert "<tr><td>made</td><td>2026-12-05 10:00:00 UTC, commit abc</td></tr>" in stamped

    done = page_stage(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / OUT).read_bytes() == page.encode()


def _corrupt(root: Path, change: object) -> None:
    path = root / FRAGMENTS / "alpha.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.pop("title"), "alpha.json: fragment: keys missing ['title']"),
        (lambda d: d.update(extra=1), "alpha.json: fragment: keys missing [], unknown ['extra']"),
        (lambda d: d.update(order="first"), "alpha.json: fragment.order: not an integer"),
        (lambda d: d.update(order=True), "alpha.json: fragment.order: not an integer"),
        (lambda d: d.update(benchmark="beta"), "alpha.json: fragment.benchmark: 'beta', not the file's name 'alpha'"),
        (lambda d: d["sections"].append([]), "alpha.json: fragment.sections[1]: not a JSON object"),
        (lambda d: d["sections"][0].update(html=None), "alpha.json: fragment.sections[0].html: not a string"),
        (lambda d: d.update(provenance=[]), "alpha.json: fragment.provenance: not an object"),
        (lambda d: d.update(provenance={"data": 1}), "alpha.json: fragment.provenance.data: not a string"),
    ],
)
def test_a_bad_fragment_is_named_and_the_last_page_kept(tmp_path: Path, change: object, said: str) -> None:
    write_fragments(tmp_path, ALPHA, BETA)
    (tmp_path / OUT).write_text("the last good page")
    _corrupt(tmp_path, change)
    done = page_stage(tmp_path)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / OUT).read_text() == "the last good page"


@pytest.mark.bad_input
def test_no_fragment_is_named(tmp_path: Path) -> None:
    done = page_stage(tmp_path)
    assert done.returncode == 2 and "reports/fragments: folder not found" in done.stderr, done.stderr
    (tmp_path / FRAGMENTS).mkdir(parents=True)
    done = page_stage(tmp_path)
    assert done.returncode == 2 and "no fragment <benchmark>.json in it" in done.stderr, done.stderr
    (tmp_path / FRAGMENTS / "alpha.json").write_text("[1, 2")
    done = page_stage(tmp_path)
    assert done.returncode == 2 and "alpha.json: not a readable JSON file" in done.stderr, done.stderr
    assert not (tmp_path / OUT).exists()
