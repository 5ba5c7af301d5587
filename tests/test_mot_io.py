"""MOTChallenge text I/O: parsing against TrackEval's own loader, validation errors, exact round trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from trackeval.datasets._base_dataset import _BaseDataset

from egoeval.core.errors import InputError
from egoeval.tracking.mot import COLUMNS, SeqInfo, read_mot, read_mot_folder, read_mot_table, read_seqinfo, write_mot

MOT = TEST_DATA / "mot"
TUD = ["TUD-Campus", "TUD-Stadtmitte"]


def trackeval_rows(path: Path, kind: str) -> np.ndarray:
    """Rows as TrackEval loads them: grouped by timestep in file order; gt keeps ``int(conf) != 0``."""
    read_data, _ = _BaseDataset._load_simple_text_file(str(path))
    rows = np.array([row for t in sorted(read_data, key=int) for row in read_data[t]], dtype=float).reshape(-1, 10)[
        :, :7
    ]
    return rows[rows[:, 6].astype(int) != 0] if kind == "gt" else rows


@pytest.mark.parametrize("kind", ["gt", "pred"])
@pytest.mark.parametrize("seq", TUD)
def test_real_files_read_as_trackeval_reads_them(seq: str, kind: str) -> None:
    df = read_mot(MOT / kind / f"{seq}.txt", kind=kind)
    assert list(df.columns) == COLUMNS
    assert df.dtypes.tolist() == [np.int64, np.int64] + [np.float64] * 5
    ours = df.iloc[np.argsort(df["frame"].to_numpy(), kind="stable")].to_numpy(float)
    np.testing.assert_array_equal(ours, trackeval_rows(MOT / kind / f"{seq}.txt", kind))


def write(tmp_path: Path, text: str, name: str = "seq.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_gt_zero_marked_rows_follow_trackeval_truncation(tmp_path: Path) -> None:
    # TrackEval drops a gt row when int(conf) == 0: conf 0 and 0.5 go, -1, 1 and 2 stay; tracker rows all stay.
    confs = ["0", "0.5", "-1", "1", "2", "-0.9"]
    text = "".join(f"1,{k + 1},0,0,5,5,{c},-1,-1,-1\n" for k, c in enumerate(confs))
    path = write(tmp_path, text)
    assert read_mot(path, kind="gt")["id"].tolist() == [3, 4, 5]
    assert read_mot(path, kind="pred")["id"].tolist() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(read_mot(path, kind="gt").to_numpy(float), trackeval_rows(path, "gt"))


@pytest.mark.parametrize(
    "text",
    [
        "1,1,10.5,20,30,40,1,-1,-1,-1\n2,1,11,21,30,40,0.9,-1,-1,-1\n",
        "1 1 10.5 20 30 40 1 -1 -1 -1\n2\t1  11 21 30 40 0.9 -1 -1 -1\n",  # whitespace separated
        "1, 1, 10.5, 20, 30, 40, 1, -1, -1, -1\r\n\r\n2, 1, 11, 21, 30, 40, 0.9, -1, -1, -1\r\n",  # spaces, CRLF, blank
        "1,1,10.5,20,30,40,1,-1,-1,-1\r2,1,11,21,30,40,0.9,-1,-1,-1\r",  # lines ended by CR alone
        "1 1 10.5 20 30 40 1\r2 1 11 21 30 40 0.9",  # CR alone, whitespace separated, no last line end
        "1,1,10.5,20,30,40,1,-1,-1,-1,\n2,1,11,21,30,40,0.9,-1,-1,-1,\n",  # trailing comma, as TrackEval allows
        "1,1,10.5,20,30,40,1,-1\n2,1,11,21,30,40,0.9,-1\n",  # 8 columns
        "1,1,10.5,20,30,40,1\n2,1,11,21,30,40,0.9\n",  # 7 columns
        "\ufeff1,1,10.5,20,30,40,1\n2,1,11,21,30,40,0.9\n",  # UTF-8 with a byte-order mark, as Windows editors save
    ],
)
def test_accepted_layouts(tmp_path: Path, text: str) -> None:
    df = read_mot(write(tmp_path, text), kind="pred")
    expected = [[1, 1, 10.5, 20, 30, 40, 1], [2, 1, 11, 21, 30, 40, 0.9]]
    assert df.to_numpy(float).tolist() == expected


def test_six_columns_mean_every_box_counts(tmp_path: Path) -> None:
    df = read_mot(write(tmp_path, "1,1,0,0,5,5\n1,2,1,1,5,5\n"), kind="gt")
    assert df["conf"].tolist() == [1.0, 1.0]
    assert len(df) == 2


@pytest.mark.parametrize("text", ["", "\n\n  \n", "\ufeff"])
def test_empty_file_gives_empty_frame(tmp_path: Path, text: str) -> None:
    df = read_mot(write(tmp_path, text), kind="gt")
    assert len(df) == 0
    assert list(df.columns) == COLUMNS
    assert df.dtypes.tolist() == [np.int64, np.int64] + [np.float64] * 5


GOOD = "1,1,0,0,5,5,1,-1,-1,-1\n"


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("bad", "row", "message"),
    [
        ("2,1,nan,0,5,5,1,-1,-1,-1\n", 3, "NaN or infinite"),
        ("2,1,0,inf,5,5,1,-1,-1,-1\n", 3, "NaN or infinite"),
        ("2,1,0,0,-5,5,1,-1,-1,-1\n", 3, "negative width or height"),
        ("2,1,0,0,5,-0.5,1,-1,-1,-1\n", 3, "negative width or height"),
        ("2.5,1,0,0,5,5,1,-1,-1,-1\n", 3, "frame is not an integer"),
        ("2,1.25,0,0,5,5,1,-1,-1,-1\n", 3, "id is not an integer"),
        ("0,1,0,0,5,5,1,-1,-1,-1\n", 3, "frame must be >= 1"),
        ("2,-1,0,0,5,5,1,-1,-1,-1\n", 3, "id must be >= 0"),
        ("2,1,0,0,5\n", 3, "5 fields"),
        ("2,1,0,0,5,5,1,-1,-1,-1,7\n", 3, "11 fields"),
        ("2,1,0,0,5,5,1\n", 3, "but earlier rows have 10"),
        ("2,1,0,zero,5,5,1,-1,-1,-1\n", 3, "'zero' is not a number"),
        ("2,1,0,,5,5,1,-1,-1,-1\n", 3, "'' is not a number"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, bad: str, row: int, message: str) -> None:
    path = write(tmp_path, GOOD + "\n" + bad + GOOD.replace("1,1,", "3,1,"))  # line 2 is blank
    with pytest.raises(InputError) as info:
        read_mot(path, kind="gt")
    assert info.value.path == str(path)
    assert info.value.row == row
    assert message in str(info.value)


@pytest.mark.bad_input
@pytest.mark.parametrize("end", ["\r", "\r\n"])
def test_a_bad_row_is_named_by_its_line_whatever_ends_the_lines(tmp_path: Path, end: str) -> None:
    text = GOOD + "\n" + "2,1,0,0,-5,5,1,-1,-1,-1\n" + GOOD.replace("1,1,", "3,1,")  # line 2 is blank
    with pytest.raises(InputError) as info:
        read_mot(write(tmp_path, text.replace("\n", end)), kind="gt")
    assert info.value.row == 3 and "negative width or height" in str(info.value)


@pytest.mark.bad_input
def test_header_line_is_rejected_at_row_1(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_mot(write(tmp_path, "frame,id,x,y,w,h,conf\n" + GOOD), kind="pred")
    assert info.value.row == 1


@pytest.mark.bad_input
def test_duplicate_id_in_a_frame_names_both_rows(tmp_path: Path) -> None:
    # Duplicates count before zero-marked rows are dropped (TrackEval checks them on the raw file).
    text = GOOD + "1,2,0,0,5,5,1,-1,-1,-1\n\n2,1,0,0,5,5,1,-1,-1,-1\n1,2,9,9,5,5,0,-1,-1,-1\n"
    with pytest.raises(InputError) as info:
        read_mot(write(tmp_path, text), kind="gt")
    assert info.value.row == 5
    assert "id 2 appears twice in frame 1 (rows 2 and 5)" in str(info.value)


@pytest.mark.bad_input
def test_unknown_kind_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kind"):
        read_mot(write(tmp_path, GOOD), kind="det")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="cannot read"):
        read_mot(tmp_path / "absent.txt", kind="gt")


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
sizes = st.floats(min_value=0, allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(1, 50), st.integers(0, 10**12), finite, finite, sizes, sizes, finite),
        max_size=30,
        unique_by=lambda row: (row[0], row[1]),
    )
)
def test_write_then_read_gives_the_same_bits(rows: list[tuple], tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("roundtrip") / "out.txt"
    df = pd.DataFrame(rows, columns=COLUMNS).astype({"frame": np.int64, "id": np.int64})
    write_mot(path, df)
    back = read_mot(path, kind="pred")
    expected = df.iloc[np.argsort(df["frame"].to_numpy(), kind="stable")].reset_index(drop=True)
    pd.testing.assert_frame_equal(back, expected.astype({name: np.float64 for name in COLUMNS[2:]}))
    for name in COLUMNS[2:]:  # the same bits, signed zeros included
        np.testing.assert_array_equal(
            back[name].to_numpy(float).view(np.int64), expected[name].to_numpy(float).view(np.int64)
        )
    first = path.read_bytes()
    write_mot(path, df)
    assert path.read_bytes() == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]  # atomic: no temporary left behind


NUMBER_TEXTS = ["{!r}", "{:.17e}", "{:+.9e}", "{:.3f}", "{:.30g}", "{:.40f}"]  # shortest, long, rounded, padded


@settings(max_examples=200, deadline=None)
@given(fields=st.lists(st.tuples(finite, st.sampled_from(NUMBER_TEXTS)), min_size=1, max_size=40))
def test_every_field_reads_as_python_float_reads_its_text(
    fields: list[tuple[float, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """NumPy's reader (the fast path) gives what ``float()`` gives for each field's text, bit for bit: digits beyond
    17 significant ones included, which a correctly rounded parser must still round right."""
    texts = [form.format(value) for value, form in fields]
    assume(np.isfinite([float(text) for text in texts]).all())  # a rounded form of a huge value may overflow
    path = tmp_path_factory.mktemp("numbers") / "seq.txt"
    path.write_text("".join(f"{k + 1},7,{text},{text},1,1,1\n" for k, text in enumerate(texts)))
    table = read_mot_table(path, kind="pred")
    expected = np.array([float(text) for text in texts])
    np.testing.assert_array_equal(table.x.view(np.int64), expected.view(np.int64))
    np.testing.assert_array_equal(table.y.view(np.int64), expected.view(np.int64))


def test_written_lines_are_trackeval_readable(tmp_path: Path) -> None:
    df = read_mot(MOT / "gt" / "TUD-Campus.txt", kind="gt")
    write_mot(tmp_path / "gt.txt", df)
    assert (tmp_path / "gt.txt").read_text().splitlines()[0] == "1,1,399,182,121,229,1,-1,-1,-1"
    np.testing.assert_array_equal(trackeval_rows(tmp_path / "gt.txt", "gt"), df.to_numpy(float))


def test_folder_layouts(tmp_path: Path) -> None:
    (tmp_path / "flat").mkdir()
    write(tmp_path / "flat", GOOD, "B.txt")
    write(tmp_path / "flat", GOOD, "A.txt")
    assert read_mot_folder(tmp_path / "flat") == {"A": tmp_path / "flat" / "A.txt", "B": tmp_path / "flat" / "B.txt"}
    tree = tmp_path / "tree"
    for seq in ["S2", "S1"]:
        (tree / seq / "gt").mkdir(parents=True)
        write(tree / seq / "gt", GOOD, "gt.txt")
    write(tree, GOOD, "S3.txt")
    found = read_mot_folder(tree)
    assert list(found) == ["S1", "S2", "S3"]
    assert found["S1"] == tree / "S1" / "gt" / "gt.txt"
    write(tree, GOOD, "S1.txt")
    with pytest.raises(InputError, match="also given"):
        read_mot_folder(tree)
    with pytest.raises(InputError, match="not a folder"):
        read_mot_folder(tmp_path / "nothing")


def test_seqinfo(tmp_path: Path) -> None:
    gt = tmp_path / "S1" / "gt" / "gt.txt"
    gt.parent.mkdir(parents=True)
    gt.write_text(GOOD)
    assert read_seqinfo(gt) is None
    (tmp_path / "S1" / "seqinfo.ini").write_text("[Sequence]\nname=S1\nseqLength=42\n")
    assert read_seqinfo(gt) == SeqInfo(42, None, None)
    (tmp_path / "S1" / "seqinfo.ini").write_text("[Sequence]\nname=S1\nseqLength=42\nimWidth=640\nimHeight=480\n")
    assert read_seqinfo(gt) == SeqInfo(42, 640, 480)
    assert read_seqinfo(write(tmp_path, GOOD, "S1.txt")) is None  # flat layout has no seqinfo


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("[Sequence]\nname=S1\n", "seqLength"),
        ("[Sequence]\nseqLength=-1\n", "negative"),
        ("[Sequence]\nseqLength=4\nimWidth=640\n", "imWidth and imHeight"),
        ("[Sequence]\nseqLength=4\nimWidth=640\nimHeight=4.5\n", "imWidth and imHeight"),
        ("[Sequence]\nseqLength=4\nimWidth=0\nimHeight=480\n", "must be positive"),
    ],
)
def test_seqinfo_errors_name_the_file(tmp_path: Path, ini: str, message: str) -> None:
    gt = tmp_path / "S1" / "gt" / "gt.txt"
    gt.parent.mkdir(parents=True)
    gt.write_text(GOOD)
    (tmp_path / "S1" / "seqinfo.ini").write_text(ini)
    with pytest.raises(InputError, match=message) as err:
        read_seqinfo(gt)
    assert str(err.value).startswith(str(tmp_path / "S1" / "seqinfo.ini"))
