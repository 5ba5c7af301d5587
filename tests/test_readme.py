"""The developer guide's "What is where" names only what exists, and every module of the library is named there."""

from __future__ import annotations

import re

from conftest import REPO

GUIDE = REPO / "docs" / "developer-guide.md"
BLOCK = re.search(r"## What is where\n\n```\n(.*?)```", GUIDE.read_text(), re.S).group(1)


def listed() -> list[str]:
    """The paths the block names: each line's first word, under the less indented folder line above it."""
    paths, parents = [], []
    for line in BLOCK.splitlines():
        word = line.split()[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip())
        if not word or indent >= 20:  # a continuation of the description column
            continue
        parents = [(level, name) for level, name in parents if level < indent]
        path = "".join(name for _, name in parents) + word
        paths.append(path)
        if word.endswith("/"):
            parents.append((indent, word))
    return paths


def test_every_listed_path_exists() -> None:
    missing = [p for p in listed() if not list(REPO.glob(re.sub(r"<[^>]+>", "*", p).rstrip("/")))]
    assert missing == [], f"docs/developer-guide.md names what is not in the tree: {missing}"


def test_every_library_module_is_named() -> None:
    text = BLOCK
    modules = [
        path.relative_to(REPO / "egoeval").as_posix()
        for path in sorted((REPO / "egoeval").glob("*/*.py")) + sorted((REPO / "egoeval").glob("*.py"))
        if path.name != "__init__.py"
    ]
    top = {m for m in modules if "/" not in m}
    unnamed = [m for m in top if m not in text]
    folders = {m.split("/")[0] for m in modules if "/" in m}
    unnamed += [f"{f}/" for f in sorted(folders) if f"{f}/" not in text]
    assert unnamed == [], f"docs/developer-guide.md's What is where does not name: {unnamed}"
