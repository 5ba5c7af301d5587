"""sha256 manifests: pinning files, verifying them, and reading a pinned file inside its data root."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.io.bounded import read_bounded, read_text
from egoeval.core.io.paths import inside, relative_path_problem


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_files(
    root: str | os.PathLike[str], names: list[str], workers: int | None = None, desc: str = "sha256"
) -> dict[str, str]:
    """sha256 of many files under ``root`` in parallel threads (hashlib releases the GIL), with a progress bar.

    A missing file raises InputError naming it.
    """
    root = Path(root)
    workers = workers or min(32, 4 * (os.cpu_count() or 1))

    def one(name: str) -> str:
        if not (root / name).is_file():  # never opened when it is not a regular file (a FIFO would block)
            what = "not a regular file" if (root / name).exists() else "missing"
            raise InputError(root / name, f"{what} (the annotation or the manifest names it)")
        try:
            return sha256_file(root / name)
        except OSError as error:
            raise InputError(root / name, f"cannot read: {error.strerror}") from None

    from tqdm import tqdm

    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(tqdm(pool.map(one, names), total=len(names), desc=desc, unit="file", disable=len(names) < 100))
    return dict(zip(names, digests, strict=True))


def read_manifest(path: str | os.PathLike[str]) -> dict[str, str]:
    """A sha256 manifest in ``sha256sum`` format: ``<hex>  <relative path>`` per line."""
    entries: dict[str, str] = {}
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise InputError(path, f"not a '<sha256>  <path>' line: {line[:200]!r}", row=lineno)
        if (problem := relative_path_problem(name.strip())) is not None:
            raise InputError(path, problem, row=lineno)
        entries[name.strip()] = digest.lower()
    return entries


def write_manifest(path: str | os.PathLike[str], root: str | os.PathLike[str], names: list[str]) -> None:
    """Pin ``names`` (relative to ``root``) in a sha256 manifest, hashing in parallel."""
    digests = sha256_files(root, sorted(set(names)), desc="pinning")
    atomic_write_text(path, "".join(f"{digest}  {name}\n" for name, digest in digests.items()))


def read_pinned(
    path: str | os.PathLike[str], sha256: str, roots: Iterable[Path], where: str | os.PathLike[str], row: object = None
) -> bytes:
    """A file's bytes, read only where the data root's files may be (``inside`` ``roots``, symlinks followed: else an
    InputError naming ``where`` and ``row``, the table that gave the path) and checked against the sha256 it was
    pinned with: InputError naming the file when they differ (it changed after the manifest was written) or it
    cannot be read. Every reader of a pinned frame goes through here: one containment rule for all."""
    data = read_bounded(inside(path, roots, where, row))
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise InputError(
            path,
            f"sha256 {actual} differs from the pinned {sha256}: the file changed after its manifest was written "
            "(restore it, or pin the data again with a new manifest)",
        )
    return data


def verify_manifest(manifest: str | os.PathLike[str], root: str | os.PathLike[str], names: list[str]) -> None:
    """Check every file in ``names`` (relative to ``root``) against the manifest; raise on any mismatch."""
    expected = read_manifest(manifest)
    names = sorted(set(names))
    for name in names:
        if name not in expected:
            raise InputError(manifest, f"{name} is not pinned in the manifest")
    for name, actual in sha256_files(root, names, desc="verifying").items():
        if actual != expected[name]:
            raise InputError(Path(root) / name, f"sha256 {actual} differs from the manifest's {expected[name]}")
