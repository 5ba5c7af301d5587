"""The bounded readers and the data-path helper (egoeval.core.io, egoeval.egohumans.formats.load_pickle) on their own:
what they accept is exactly what the plain library reads (hypothesis), what they refuse is named.

The stage-level cases (hostile files through the CLIs, outputs unchanged) are in test_hostile_data.py.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from egoeval.core.errors import InputError
from egoeval.core.io.bounded import MAX_DEPTH, json_depth, read_json, read_text
from egoeval.core.io.paths import data_file, data_roots
from egoeval.egohumans.formats import load_pickle

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=40,
) | st.text(alphabet='[]{}"\\ab', max_size=12)  # strings made of what the depth scan must skip


def _depth(value: Any) -> int:
    if isinstance(value, dict | list | tuple):
        parts = value.values() if isinstance(value, dict) else value
        return 1 + max((_depth(part) for part in parts), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, indent=st.sampled_from([None, 0, 2]), ascii=st.booleans())
def test_read_json_reads_what_json_reads_and_measures_its_depth(value: Any, indent: int | None, ascii: bool) -> None:
    """The byte-level depth (strings with brackets, quotes and backslashes skipped) is the parsed value's."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii)
    assert json_depth(text.encode()) == _depth(value)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "doc.json"
        path.write_text(text)
        assert read_json(path) == value


def test_json_nesting_at_the_limit_is_read_and_beyond_it_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert _depth(read_json(path)) == MAX_DEPTH
    path.write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(InputError, match=f"nested {MAX_DEPTH + 1} deep, more than {MAX_DEPTH}"):
        read_json(path)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{"a": 1,\n"b": ' + "9" * 4301 + "}", 2),
        ('{"a": 1.' + "5" * 5000 + ',\n"b": -' + "9" * 4400 + "}", 2),  # the float's digits are not the integer
        ('[1e5,\n2,\n"' + "4" * 5000 + '",\n' + "3" * 5000 + "]", 4),  # nor a string's
    ],
    ids=["integer", "after a long float", "after a long string"],
)
def test_an_integer_beyond_pythons_limit_is_named_at_its_line(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_json(path)
    assert caught.value.row == line and "4,300 digits" in str(caught.value)


def test_a_text_line_beyond_the_limit_is_named(tmp_path: Path) -> None:
    path = tmp_path / "det.txt"
    path.write_bytes(b"short\n" * 3 + b"x" * (1 << 16) + b"\n" + b"x" * ((1 << 16) + 1) + b"\nshort\n")
    with pytest.raises(InputError) as caught:
        read_text(path)
    assert caught.value.row == 5


ARRAYS = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.uint8, np.bool_]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
)
PLAIN = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5) | st.binary(max_size=5)
)
PICKLED = st.recursive(
    PLAIN | ARRAYS | st.frozensets(st.integers() | st.text(max_size=3), max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=4)
    ),
    max_leaves=25,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@settings(max_examples=200, deadline=None)
@given(doc=PICKLED, protocol=st.sampled_from([2, 3, 4, 5]))
def test_the_restricted_unpickler_reads_containers_and_arrays_as_pickle_does(doc: Any, protocol: int) -> None:
    data = pickle.dumps(doc, protocol=protocol)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "doc.pkl"
        path.write_bytes(data)
        assert _same(load_pickle(path), pickle.loads(data))


def test_numpy_scalars_and_byte_orders_are_read(tmp_path: Path) -> None:
    doc = {"n": np.float64(2.5), "i": np.int32(-3), "big": np.arange(6, dtype=">f4").reshape(2, 3)}
    doc |= {"fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "empty": np.zeros((0, 5))}
    for protocol in (2, 4, 5):
        (tmp_path / "doc.pkl").write_bytes(pickle.dumps(doc, protocol=protocol))
        assert _same(load_pickle(tmp_path / "doc.pkl"), pickle.loads((tmp_path / "doc.pkl").read_bytes()))


# ----------------------------------------------------------------------------------------- paths given by data


@pytest.mark.parametrize(
    "name", ["../x.jpg", "a/../../x.jpg", "/etc/passwd", "", "a/\0.jpg", None, 3], ids=lambda n: repr(n)[:12]
)
def test_a_name_that_leaves_the_root_is_refused_by_its_spelling(tmp_path: Path, name: object) -> None:
    with pytest.raises(InputError) as caught:
        data_file(tmp_path, name, tmp_path / "annotation.json", "images[4]")
    assert caught.value.path == str(tmp_path / "annotation.json") and caught.value.row == "images[4]"


def test_names_inside_the_root_are_kept_as_given(tmp_path: Path) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "a/b/c.jpg").write_bytes(b"x")
    (tmp_path / "a/link.jpg").symlink_to("b/c.jpg")  # a link that stays inside
    assert data_file(tmp_path, "a/b/c.jpg", "where") == tmp_path / "a/b/c.jpg"
    assert data_file(tmp_path, "a/./link.jpg", "where") == tmp_path / "a/./link.jpg"
    assert data_file(tmp_path, "missing/one.jpg", "where") == tmp_path / "missing/one.jpg"  # existence: the reader's


def test_a_link_leaves_only_into_the_roots_given(tmp_path: Path) -> None:
    root, media, elsewhere = (tmp_path / n for n in ("root", "media", "elsewhere"))
    for folder in (root, media, elsewhere):
        folder.mkdir()
        (folder / "file.mp4").write_bytes(b"x")
    (root / "to-media.mp4").symlink_to(media / "file.mp4")
    (root / "to-elsewhere.mp4").symlink_to(elsewhere / "file.mp4")
    roots = (*data_roots(root), *data_roots(media))
    assert data_file(root, "to-media.mp4", "items", "clip", roots) == root / "to-media.mp4"
    for allowed in (None, roots):
        with pytest.raises(InputError, match=r"a link to .*elsewhere/file\.mp4\) lies outside the data root"):
            data_file(root, "to-elsewhere.mp4", "items", "clip", allowed)
    with pytest.raises(InputError, match="outside the data root"):
        data_file(root, "to-media.mp4", "items", "clip")  # media is not one of root's own roots


def test_a_hugging_face_snapshot_reaches_its_blob_store_and_no_further(tmp_path: Path) -> None:
    repo = tmp_path / "hub/datasets--o--n"
    snapshot, blobs = repo / "snapshots" / ("0" * 40), repo / "blobs"
    (snapshot / "video/c").mkdir(parents=True)
    blobs.mkdir()
    (blobs / "abc").write_bytes(b"x")
    (tmp_path / "hub/other").mkdir()
    (tmp_path / "hub/other/f").write_bytes(b"y")
    (snapshot / "video/c/video_prev.mp4").symlink_to(os.path.relpath(blobs / "abc", snapshot / "video/c"))
    (snapshot / "video/c/frame_all_prev.jpg").symlink_to(tmp_path / "hub/other/f")
    assert data_roots(snapshot) == (snapshot.resolve(), blobs.resolve())
    assert data_file(snapshot, "video/c/video_prev.mp4", "items").read_bytes() == b"x"
    with pytest.raises(InputError, match="outside the data root"):
        data_file(snapshot, "video/c/frame_all_prev.jpg", "items")
    assert data_roots(tmp_path) == (tmp_path.resolve(),)
