"""Headline rows (egoeval.headline): any model or run name becomes one file inside the folder, never shared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egoeval.headline import file_stem, row_files, stem_clashes, write_rows


@pytest.mark.parametrize(
    ("name", "plain"),
    [("chance", True), ("bytetrack-gt", True), ("gpt-4.1", True), ("..", False), ("a/b", False), ("a.", False)],
)
def test_plain_names_are_kept_and_others_hashed(name: str, plain: bool) -> None:
    assert (file_stem(name) == name) is plain


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=20, unique=True))
def test_every_name_gets_its_own_file_inside_the_folder(names: list[str]) -> None:
    stems = [file_stem(name) for name in names]
    assert len(set(stems)) == len(stems)
    for stem in stems:
        assert "/" not in stem and "\0" not in stem and stem not in (".", "..") and not stem.startswith(".")
        assert len(stem.encode()) <= 80


def test_rows_land_under_their_group(tmp_path: Path) -> None:
    rows = {("blind", "Qwen/Qwen2.5-VL"): {"both": 50.0, "n": 16}, ("blind", "chance"): {"both": 25.0, "n": 16}}
    write_rows(tmp_path / "out", rows)
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.json"))
    assert files[0] == "blind/Qwen_Qwen2.5-VL-" + file_stem("Qwen/Qwen2.5-VL").rsplit("-", 1)[1] + ".json"
    assert files[1] == "blind/chance.json"
    assert json.loads((tmp_path / "out/blind/chance.json").read_text()) == {"both": 25.0, "n": 16}
    assert json.loads((tmp_path / "out" / files[0]).read_text()) == {"name": "Qwen/Qwen2.5-VL", "both": 50.0, "n": 16}
    assert set(row_files(rows)) == {Path(f) for f in files}


@pytest.mark.bad_input
def test_a_hashed_row_keeps_its_name_escaped(tmp_path: Path) -> None:
    """A name with ``..``, a control character or non-ASCII is a hashed file: the row still says whose it is, in
    printable ASCII (dvc metrics show prints it as is)."""
    name = "../evil\x1b[31m\x01é"
    write_rows(tmp_path / "out", {("blind", name): {"both": 1.0}})
    (file,) = (tmp_path / "out/blind").iterdir()
    assert file.name == f"{file_stem(name)}.json" and "evil" in file.name
    text = file.read_text()
    assert text.isascii() and "\x1b" not in text and "\x01" not in text
    shown = json.loads(text)["name"]
    assert shown == "../evil\\u001b[31m\\u0001\\u00e9" and shown.isprintable()
    assert json.loads(f'"{shown}"') == name  # the escapes read back to the name


def test_names_whose_files_would_be_one_are_found() -> None:
    hashed = file_stem("x/y")
    assert stem_clashes(["x/y", hashed, "z"]) == [("x/y", hashed)]
    assert stem_clashes(["GPT-4o", "gpt-4o"]) == [("GPT-4o", "gpt-4o")]  # one file on a case-insensitive disk
    assert stem_clashes(["a/b", "a?b", "chance"]) == []
