"""The report page in headless Chromium: leaderboard, category chart (every bar with its n), clips with their frames
image and the tracking frames render, the clip filter works, the provenance names the inputs' digests, a smoke run
is labelled in every section that shows its numbers, and the console holds no error.

``EGOEVAL_REPORT_SCREENSHOT=docs/report.png`` also writes the screenshot there (the README shows it).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from browser import console_errors, open_browser
from conftest import EGOEVAL, copy_workspace, dvc, tool_env, write_params
from PIL import Image

from egoeval.egonormia.published import load_published, select_table

PAGE = Path("reports/index.html")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    opened = open_browser()
    try:
        yield opened
    finally:
        opened.quit()


def load(browser: Any, path: Path) -> None:
    browser.get(path.resolve().as_uri())
    assert browser.execute_script("return document.readyState") == "complete"


BAR_LABELS = """
const found = [];
const walker = document.createTreeWalker(arguments[0], NodeFilter.SHOW_COMMENT);
while (walker.nextNode()) {
  const text = walker.currentNode.data.trim();
  if (/^n=\\d+$/.test(text)) {
    const box = walker.currentNode.parentNode.getBoundingClientRect();
    found.push([text, box.width, box.height]);
  }
}
return found;
"""


@pytest.mark.slow
def test_the_console_check_catches_script_errors_and_network_use(browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="http://cdn.example.com/a.png"><script>notDefined();</script></body></html>')
    console_errors(browser)  # start from an empty log
    load(browser, page)
    errors = " ".join(console_errors(browser))
    assert "notDefined is not defined" in errors
    assert "cdn.example.com/a.png" in errors


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium(reproduced: Path, browser: Any, tmp_path: Path) -> None:
    console_errors(browser)
    load(browser, reproduced / PAGE)
    screenshot = browser.get_screenshot_as_png()
    pixels = np.asarray(Image.open(io.BytesIO(screenshot)).convert("L"), dtype=np.float64)
    assert pixels.shape[1] == 1400 and pixels.std() > 20, "the screenshot is blank"
    (tmp_path / "report.png").write_bytes(screenshot)
    if os.environ.get("EGOEVAL_REPORT_SCREENSHOT"):
        shutil.copyfile(tmp_path / "report.png", os.environ["EGOEVAL_REPORT_SCREENSHOT"])

    rows = browser.find_elements("css selector", "#egonormia-leaderboard table.leaderboard tbody tr")
    ours = json.loads((reproduced / "metrics/egonormia.json").read_text())  # blind 2 models, pipeline 2, video 1,
    assert len(rows) == sum(map(len, ours.values())) == 6  # and the video:frames8 variant's 1
    assert all(row.is_displayed() for row in rows)
    fetch = yaml.safe_load((reproduced / "params.yaml").read_text())["egonormia"]["fetch"]
    bundled = select_table(load_published(), fetch["dataset"], fetch["split"])["figures"]  # the published, apart
    apart = browser.find_elements("css selector", "#egonormia-leaderboard table.published tbody tr")
    assert len(apart) == sum(len(models) for models in bundled.values()) > 0
    assert "[" in rows[0].text and "]" in rows[0].text  # with its 95% interval
    # every row, ours and published, says its protocol, dataset, split and n, as the header names them
    for found in browser.find_elements("css selector", "#egonormia-leaderboard table"):
        header = [cell.text for cell in found.find_elements("css selector", "thead th")]
        assert header[2:6] == ["protocol", "dataset", "split", "n"], header
        for row in found.find_elements("css selector", "tbody tr"):
            protocol, dataset, split, n = (cell.text for cell in row.find_elements("css selector", "td")[2:6])
            assert protocol in ("official", "egoeval") and dataset and split in ("full", "verified") and n, row.text
            # no sample row ranked among published rows: a table holds sample rows or published rows, never both
            if dataset == "sample":
                assert "published ·" not in found.text
    ours = [[cell.text for cell in row.find_elements("css selector", "td")[3:6]] for row in rows]
    assert ours == [["sample", fetch["split"], "16"]] * len(rows)  # the bundled sample says it is the sample
    titles = browser.find_elements("css selector", "#egonormia-leaderboard h4.apart")
    assert titles and all("Not comparable" in title.text and title.is_displayed() for title in titles)
    figure = browser.find_element("css selector", "#egonormia-leaderboard figure svg")
    assert figure.rect["width"] <= 1400 and figure.rect["height"] <= 900  # the interval chart fits a laptop screen
    chart = browser.find_element("css selector", "#egonormia-categories svg.chart")
    assert chart.is_displayed() and chart.rect["width"] > 400 and chart.rect["height"] > 150
    assert browser.execute_script("return arguments[0].querySelectorAll('path').length", chart) > 50
    # every category bar carries its n (matplotlib keeps each label's text as a comment inside the drawn glyphs)
    labels = browser.execute_script(BAR_LABELS, chart)
    categories = pd.read_csv(reproduced / "plots/egonormia/categories.csv")
    assert sorted(text for text, _, _ in labels) == sorted(f"n={n}" for n in categories["n"])
    assert all(width > 0 and height > 0 for _, width, height in labels)
    # the provenance: the version, the params digest, and each input's digest as the file in this workspace has it
    provenance = browser.find_element("id", "provenance")
    browser.execute_script("arguments[0].scrollIntoView()", provenance)
    assert provenance.is_displayed() and "egoeval" in provenance.text and "version" in provenance.text
    digests = dict(re.findall(r"(\S+) sha256 ([0-9a-f]{64})$", provenance.text, re.MULTILINE))
    for name in ("metrics/egonormia.json", "metrics/egohumans.json", "data/egonormia/responses.parquet"):
        assert digests[name] == hashlib.sha256((reproduced / name).read_bytes()).hexdigest(), name
    assert "data/egonormia/sample/manifest.sha256" in digests and "data/egohumans/sample/manifest.sha256" in digests
    assert re.search(r"the egonormia params section as validated: sha256 [0-9a-f]{64}", provenance.text)
    assert "made" not in [cell.text for cell in provenance.find_elements("css selector", "td")]  # no time, no commit
    assert browser.find_elements("css selector", "p.smoke") == []  # not a smoke run
    runs_chart = browser.find_element("css selector", "#egohumans-runs figure svg.chart")
    browser.execute_script("arguments[0].scrollIntoView()", runs_chart)
    assert runs_chart.is_displayed() and runs_chart.rect["height"] <= 900  # one screen, not 5,000 px
    legend = runs_chart.find_element("css selector", "g[id$='-legend_1']")
    bars = runs_chart.find_element("css selector", "g[id$='-axes_1']")
    assert legend.is_displayed() and legend.rect["y"] + legend.rect["height"] <= bars.rect["y"] + 1  # legend on top

    loaded = browser.execute_script(
        "return Array.from(document.querySelectorAll('article.clip img.frames'))"
        ".filter(i => i.complete && i.naturalWidth > 0).length"
    )
    assert loaded == 16
    first = browser.find_element("css selector", "article.clip img.frames")
    browser.execute_script("arguments[0].scrollIntoView()", first)
    assert first.is_displayed() and first.rect["width"] > 300 and first.rect["height"] > 30
    answers = browser.find_elements("css selector", "article.clip table.answers tbody tr")
    assert len(answers) == 16 * len(rows)  # every clip: each (setting, model) of the leaderboard with its choices

    params = yaml.safe_load((reproduced / "params.yaml").read_text())["egohumans"]
    runs = len(params["track"]["trackers"]) * len(params["detect"]["modes"])
    boxes = browser.find_elements("css selector", "#egohumans-frames svg.boxes")
    assert len(boxes) == 4 * runs and all(b.rect["width"] > 200 for b in boxes)  # 4 frames x every run
    assert browser.find_elements("css selector", "#egohumans-frames svg.boxes rect.track")

    clip_id = browser.find_element("css selector", "article.clip h3").text.split()[0]
    browser.find_element("id", "clip-filter").send_keys(clip_id)
    assert browser.find_element("id", "clip-count").text == "1 of 16 clips shown"
    assert console_errors(browser) == []


EGONORMIA_SECTIONS = ("egonormia-leaderboard", "egonormia-paired", "egonormia-categories", "egonormia-ledger")


@pytest.mark.slow
def test_a_smoke_run_is_labelled_wherever_its_numbers_show(reproduced: Path, browser: Any, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "repo")
    write_params(root, {"egonormia": {"fetch": {"limit": 5, "limit_seed": 1}}})
    run = dvc(root, "repro", "report")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    console_errors(browser)
    load(browser, root / PAGE)
    for anchor in (*EGONORMIA_SECTIONS, "egonormia-clips"):
        label = browser.find_element("css selector", f"#{anchor} p.smoke")
        browser.execute_script("arguments[0].scrollIntoView()", label)
        assert label.is_displayed() and label.text.startswith("Smoke run: EgoNormia on dataset sample"), anchor
        assert "5 clips (a smoke run: egonormia.fetch.limit 5, seed 1)" in label.text and "not a result" in label.text
    rows = browser.find_elements("css selector", "#egonormia-leaderboard table.leaderboard tbody tr")
    assert rows and all("smoke run: limit 5" in row.text for row in rows)
    assert browser.find_elements("css selector", "[id^=egohumans] p.smoke") == []  # EgoHumans ran whole
    assert "smoke run: limit 5 clips, seed 1" in browser.find_element("id", "provenance").text
    assert console_errors(browser) == []
    compared = subprocess.run(
        [EGOEVAL, "compare", "metrics/egonormia.json", "--models", "chance", "all-MiniLM-L6-v2"],
        cwd=root,
        env=tool_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert compared.returncode == 0, compared.stderr
    said = "dataset sample, the bundled synthetic sample (not EgoNormia's clips), full split, 5 clips (a smoke run: "
    assert said + "egonormia.fetch.limit 5, seed 1)" in compared.stdout.splitlines()[0]
