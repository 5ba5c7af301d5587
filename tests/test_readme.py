"""The docs stay true: the developer guide's "What is where" names only what exists and every module; every command,
option, params key, repository path and link that README.md and docs/*.md write exists; README.md stays short and
leads to every guide."""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from conftest import REPO, tool_env

from egoeval.core.errors import ParamsError
from egoeval.core.settings import validate_params

GUIDE = REPO / "docs" / "developer-guide.md"
BLOCK = re.search(r"## What is where\n\n```\n(.*?)```", GUIDE.read_text(), re.S).group(1)
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.S | re.M)


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
    """Every module of egoeval/ and flows/ is a path of the map, and so is every folder of egoeval/."""
    named = set(listed())
    modules = [
        path.relative_to(REPO).as_posix()
        for folder in ("egoeval", "flows")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.name != "__init__.py"
    ]
    folders = [
        f"{path.relative_to(REPO).as_posix()}/"
        for path in sorted((REPO / "egoeval").rglob("*"))
        if path.is_dir() and path.name != "__pycache__"
    ]
    unnamed = [m for m in modules + folders if m not in named]
    assert unnamed == [], f"docs/developer-guide.md's What is where does not name: {unnamed}"


# ---------------------------------------------------------------- what the docs write


def _code(text: str) -> list[str]:
    """The code a doc writes: each line of its bash blocks (continuations joined) and each inline code span
    (outside bash blocks, inside other blocks too; whitespace collapsed)."""
    bash = [body for lang, body in FENCE.findall(text) if lang in ("bash", "sh")]
    lines = [line for body in bash for line in body.replace("\\\n", " ").splitlines()]
    prose = FENCE.sub(lambda m: "" if m.group(1) in ("bash", "sh") else m.group(2), text)
    return lines + [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]


def _commands(fragment: str) -> list[str]:
    """The shell commands in one fragment: split at ``&&``, ``||``, ``;`` and pipes, comments dropped."""
    fragment = re.split(r"\s#", fragment, maxsplit=1)[0]
    return [part.strip() for part in re.split(r"&&|\|\||;|\|", fragment) if part.strip()]


def _written(pattern: str) -> list[tuple[str, re.Match[str]]]:
    """(doc, match) for each command of every doc that matches ``pattern`` at its start."""
    return [
        (doc.relative_to(REPO).as_posix(), match)
        for doc in DOCS
        for fragment in _code(doc.read_text())
        for command in _commands(fragment)
        if (match := re.match(pattern, command))
    ]


def _egoeval_help(*args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "egoeval.cli", *args, "--help"],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


@cache
def _subcommand_options() -> dict[str, set[str]]:
    """Each ``egoeval`` subcommand (from the command's own help) and the options its parser accepts (its help)."""
    names = re.findall(r"^  (\S+) ", _egoeval_help().split("commands:", 1)[1], re.M)
    assert names, "egoeval --help lists no commands"
    return {name: set(re.findall(r"(?<![\w-])(--[\w-]+)", _egoeval_help(name))) for name in names}


def test_every_egoeval_command_and_option_exists() -> None:
    commands = _written(r"egoeval ([a-z][\w-]*)(.*)")
    assert len(commands) >= 10, commands  # the docs show the commands; the check reads them
    known = _subcommand_options()
    wrong = []
    for doc, match in commands:
        name, rest = match.groups()
        if name not in known:
            wrong.append(f"{doc}: egoeval {name}: no such subcommand (known: {', '.join(known)})")
            continue
        options = {option.split("=")[0] for option in re.findall(r"(?<![\w-])(--[\w-]+(?:=\S*)?)", rest)}
        wrong += [f"{doc}: egoeval {name} {option}: not an option of it" for option in sorted(options - known[name])]
    assert wrong == [], "\n".join(wrong)


def test_every_python_module_the_docs_run_exists() -> None:
    commands = _written(r"python3? -m ([\w.]+)")
    assert any(match.group(1) == "flows.nightly" for _, match in commands), commands
    sys.path.insert(0, str(REPO))
    try:
        wrong = [
            f"{doc}: python -m {m.group(1)}" for doc, m in commands if importlib.util.find_spec(m.group(1)) is None
        ]
    finally:
        sys.path.remove(str(REPO))
    assert wrong == [], f"no such module: {wrong}"


def test_every_make_target_the_docs_name_exists() -> None:
    targets = set(re.findall(r"^([\w.-]+):", (REPO / "Makefile").read_text(), re.M))
    commands = _written(r"make ([\w.-]+)")
    assert {m.group(1) for _, m in commands} >= {"repro", "test"}, commands
    wrong = [f"{doc}: make {m.group(1)}" for doc, m in commands if m.group(1) not in targets]
    assert wrong == [], f"no such target in the Makefile (targets: {sorted(targets)}): {wrong}"


def test_every_dvc_command_and_stage_the_docs_name_exists() -> None:
    from dvc.cli.parser import get_main_parser

    parser = get_main_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    stages = set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
    commands = _written(r"dvc ([a-z][\w-]*)(.*)")
    assert {m.group(1) for _, m in commands} >= {"repro", "exp", "metrics"}, commands
    wrong = [f"{doc}: dvc {m.group(1)}: no such command" for doc, m in commands if m.group(1) not in subcommands]
    for doc, match in commands:
        if match.group(1) == "repro":
            targets = [word for word in match.group(2).split() if not word.startswith("-")]
            wrong += [f"{doc}: dvc repro {t}: no such stage" for t in targets if t.split("@")[0] not in stages]
    assert wrong == [], "\n".join(wrong)


# ---------------------------------------------------------------- paths, links, params keys


@cache
def _tracked() -> list[str]:
    """Every file git tracks and every folder above one."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    folders = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    return sorted(set(files) | folders)


@cache
def _outputs() -> list[str]:
    """What the pipeline writes (dvc.yaml's outs, metrics and plots), ``${...}`` as ``*``."""
    found = []
    for stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].values():
        for kind in ("outs", "metrics", "plots"):
            for entry in stage.get(kind, []):
                found += [re.sub(r"\$\{[^}]*\}", "*", path) for path in (entry if isinstance(entry, dict) else [entry])]
    return found


def _exists(path: str) -> bool:
    """A repository path exists: git tracks it (or a file under it) or it is in the tree, or the pipeline writes it
    (or into it)."""
    pattern = re.sub(r"<[^>]+>", "*", path).rstrip("/")
    if any(fnmatch.fnmatchcase(t, pattern) for t in _tracked()) or list(REPO.glob(pattern)):
        return True
    return any(
        fnmatch.fnmatchcase(pattern, out) or fnmatch.fnmatchcase(out, pattern) or pattern.startswith(out + "/")
        for out in _outputs()
    ) or any(out.startswith(pattern + "/") for out in _outputs())


def _repo_paths(text: str) -> list[str]:
    """The words in code that name a path of this repository (its first part a top-level entry of it)."""
    tops = {t.split("/")[0] for t in _tracked()} | {o.split("/")[0] for o in _outputs()}
    paths = []
    for fragment in _code(text):
        for word in fragment.split():
            word = word.strip("'\"()[],;:").rstrip(".")
            if "://" in word or "=" in word or word.startswith(("/", "~", "-", "$")):
                continue
            if word.split("/")[0] in tops and ("/" in word or "." in word):
                paths.append(word)
    return paths


def test_every_repository_path_the_docs_name_exists() -> None:
    checked = {doc.relative_to(REPO).as_posix(): _repo_paths(doc.read_text()) for doc in DOCS}
    assert sum(len(paths) for paths in checked.values()) >= 100, checked
    wrong = [f"{doc}: {path}" for doc, paths in checked.items() for path in paths if not _exists(path)]
    assert wrong == [], "no such path in the repository or the pipeline's outputs:\n" + "\n".join(wrong)


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    text = FENCE.sub("", doc.read_text())
    titles = re.findall(r"^#+ (.*)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in titles}


def test_every_link_between_the_docs_leads_somewhere() -> None:
    wrong, seen = [], 0
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            seen += 1
            file, _, anchor = target.partition("#")
            linked = (doc.parent / file).resolve() if file else doc
            if not linked.exists() or not linked.is_relative_to(REPO):
                wrong.append(f"{doc.name}: {target}: no such file")
            elif anchor and (linked.suffix != ".md" or anchor not in _anchors(linked)):
                wrong.append(f"{doc.name}: {target}: no such heading in {linked.name}")
    assert seen >= 20 and wrong == [], "\n".join(wrong)


REFUSED = {"egohumans.track.bytetrack"}  # the user guide's example of a key params.yaml refuses


def _has_key(params: object, keys: list[str]) -> bool:
    if not keys:
        return True
    if not isinstance(params, dict):
        return False
    if re.fullmatch(r"<[^>]+>", keys[0]):
        return any(_has_key(value, keys[1:]) for value in params.values())
    return keys[0] in params and _has_key(params[keys[0]], keys[1:])


def test_every_params_key_the_docs_name_exists() -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    keys = [
        (doc.relative_to(REPO).as_posix(), match.group(0))
        for doc in DOCS
        for fragment in _code(doc.read_text())
        for match in re.finditer(rf"(?<![\w./-])(?<!-m )(?:{'|'.join(params)})(?:\.(?:[\w-]+|<[^>]+>))+", fragment)
    ]
    assert len(keys) >= 30, keys
    wrong = [f"{doc}: {key}" for doc, key in keys if key not in REFUSED and not _has_key(params, key.split("."))]
    assert wrong == [], "no such key in params.yaml:\n" + "\n".join(wrong)


def test_the_keys_the_docs_show_refused_are_refused() -> None:
    for key in REFUSED:
        params = yaml.safe_load((REPO / "params.yaml").read_text())
        *parents, last = key.split(".")
        section = params
        for name in parents:
            section = section[name]
        assert last not in section
        section[last] = {}
        with pytest.raises(ParamsError, match=re.escape(key)):
            validate_params(params)


# ---------------------------------------------------------------- README itself


def test_readme_is_short_and_leads_to_every_guide() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    guides = [doc.relative_to(REPO).as_posix() for doc in DOCS[1:]]
    assert "docs/user-guide.md" in guides and "docs/developer-guide.md" in guides
    unlinked = [guide for guide in guides if f"]({guide})" not in readme]
    assert unlinked == [], f"README.md does not link {unlinked}"
    for command in ("make repro", "make test"):  # the quick start, and what it says they do
        assert re.search(rf"^{command} +# set up \.venv, then run", readme, re.M), command
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^repro: setup\n\tdvc repro$", makefile, re.M) and re.search(
        r"^test: setup\n\tpython -m pytest -n auto --dist loadfile --no-loadscope-reorder$", makefile, re.M
    )
    assert "`python -m pytest -n auto --dist loadfile --no-loadscope-reorder`" in readme
    assert "synthetic" in readme and "never ranked among published results" in readme


@pytest.mark.parametrize("doc", DOCS[1:], ids=lambda doc: doc.name)
def test_a_guide_opens_with_its_contents(doc: Path) -> None:
    """Every section of a guide is listed in its contents, with a link that leads to it."""
    text = FENCE.sub("", doc.read_text())
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    sections = re.findall(r"^## (.*)$", text.split("## Contents", 1)[1], re.M)
    assert sections and all(f"[{title}](#" in contents for title in sections), sections
