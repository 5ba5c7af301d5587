"""Read a model's multiple-choice answer out of its free-text response.

Prompts show the options numbered 1..N in *displayed* order (``displayed_options``: the empty slot as "None of the
above") and ask the model to end with ``Answer: N`` (one choice) or
``Answer: [N, M, ...]`` (a set, possibly ``[]``). ``parse_single`` and ``parse_multi`` return *stored* option
indices (displayed position i shows stored option ``permutation[i]``; every position is mapped back).

Where the answer is looked for, in order:

1. explicit markers, ``Answer:`` (any case, ``Final answer:``, ``**Answer:**``, ``\\boxed{...}``), plus a
   bare choice on the final line when it comes after the last marker. The last one wins; when the final
   answers follow one another with nothing but blanks or punctuation between them and disagree, the response
   is a failure (``Answer: 2`` / ``Answer: 3``), while an answer revised after more reasoning is not.
   Numbers in the reasoning are never read while an explicit answer exists;
2. otherwise a final line that is nothing but a choice (``3``, ``(B)``, ``Option 3``, ``[1, 3]``,
   an option's text, ``None of the above``);
3. otherwise the last phrase such as "the answer is 3", "I would choose B", "the best option is 2".

Choices may be numbers, letters A-E (upper case; a lone lower-case letter too), an option's text repeated,
or "None of the above" (the displayed position of the empty slot). A number leading the answer wins over
any text after it (``Answer: 3 - <text of another option>`` is 3). For a set, a bare ``none`` or ``[]``
is the empty set, while "None of the above" selects that option. ``<think>...</think>`` blocks are ignored.
Anything else raises ``UnreadableAnswer`` with a reason: no text, no answer, a refusal, a number out of range (however
many digits), several choices where one is asked for, or disagreeing final answers. No text raises anything else.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from egoeval.core.errors import UnreadableAnswer

NONE_OF_THE_ABOVE = "None of the above"


def displayed_options(stored: Sequence[str], perm: Sequence[int]) -> tuple[str, ...]:
    """``displayed[i] = stored[perm[i]]``, with the empty slot shown as "None of the above"."""
    return tuple(stored[p].strip() or NONE_OF_THE_ABOVE for p in perm)


_THINK_TAG = re.compile(r"<(/?)(?:think|thinking|reasoning)>", re.I)
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None)
_MARKDOWN = re.compile(r"[*`~]+|__+")
_LINE_DECOR = re.compile(r"^[ \t]*(?:#+|>+)[ \t]*", re.M)
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm)\{([^{}\n]*)\}")
_BOXED = re.compile(r"\\boxed\{([^{}\n]*)\}")
_MARKER = re.compile(r"\banswers?(?:\s*\([^()\n]{0,40}\))?\s*:", re.I)
_PHRASE = re.compile(
    r"\banswer\s+(?:is|would\s+be|will\s+be|should\s+be)\b"
    r"|\bI\s*(?:would\s+|will\s+|'d\s+|'ll\s+)?(?:choose|select|pick|go\s+with)\b"
    r"|\b(?:best|correct|final|right|most\s+[a-z]+)\s+(?:options?|choices?|actions?|behaviou?rs?|justifications?|answers?)"
    r"\s+(?:is|are|would\s+be)\b"
    r"|\bsensible\s+(?:options?|actions?|behaviou?rs?)\s+(?:is|are|would\s+be)\b",
    re.I,
)
_REFUSAL = re.compile(
    r"\bI\s*(?:can\s*not|cannot|can't|won't|will\s+not|am\s+(?:not\s+able|unable)|'m\s+(?:not\s+able|unable))\b"
    r"|\b(?:I'm|I\s+am)\s+sorry\b|\bunable\s+to\s+(?:answer|help|assist|comply)\b",
    re.I,
)
_SEP = re.compile(
    r"(?:\s+|[,;/&+'\"\[\](){}<>#:=]|\b(?:and|or)\b"
    r"|\b(?:options?|choices?|behaviou?rs?|actions?|justifications?|numbers?)\b)+",
    re.I,
)
_OPENS_COMMENT = re.compile(r"[(\[{<]")
_NUM = re.compile(r"[0-9]+(?![0-9A-Za-z])")
_LETTER = re.compile(r"[A-E](?=\s*(?:$|[^\sA-Za-z0-9]|(?:and|or|is|are)\b|[A-E](?![A-Za-z0-9])))")
_LONE_LETTER = re.compile(r"[\s\[(]*([A-Ea-e])[\s\])]*[.!]?")
_EMPTY_LIST = re.compile(r"[\[(]\s*[\])]")
_NONE_OF_ABOVE = re.compile(r"(?:options?\s*)?none\s+of\s+the\s+above\b", re.I)
_NONE = re.compile(r"none(?:\s+of\s+(?:them|these|those|the\s+options))?\s*(?:[.!,;]|$)", re.I)
_REST_IS_FILLER = re.compile(r"[\s.!)\]]*")
_FILLER = re.compile(r"[\s\W_]*")


@dataclass(frozen=True)
class _Options:
    """What the parser knows about the displayed options."""

    count: int
    texts: tuple[str, ...] | None  # displayed order, normalised; None when the caller gave no texts
    none_position: int | None  # 1-based displayed position of the empty slot


def parse_single(text: str | None, permutation: Sequence[int], options: Sequence[str] | None = None) -> int:
    """The stored index of the one option the response chose; ``options`` (stored order) enables text answers."""
    ctx = _context(permutation, options)
    positions = _find(text, ctx, multi=False)
    if len(set(positions)) != 1:
        raise UnreadableAnswer(f"several choices where one is asked for: {_show(positions)}")
    return int(permutation[positions[0] - 1])


def parse_multi(text: str | None, permutation: Sequence[int], options: Sequence[str] | None = None) -> list[int]:
    """The sorted stored indices of every option the response chose (possibly none)."""
    ctx = _context(permutation, options)
    return sorted({int(permutation[p - 1]) for p in _find(text, ctx, multi=True)})


def _context(permutation: Sequence[int], options: Sequence[str] | None) -> _Options:
    perm = [int(p) for p in permutation]
    if not perm or sorted(perm) != list(range(len(perm))):
        raise ValueError(f"not a permutation of 0..{len(perm) - 1}: {list(permutation)}")
    if options is None:
        return _Options(len(perm), None, None)
    if len(options) != len(perm):
        raise ValueError(f"{len(options)} options for a permutation of {len(perm)}")
    none_position = next((i + 1 for i, p in enumerate(perm) if not str(options[p]).strip()), None)
    texts = tuple(_norm(option) for option in displayed_options([str(option) for option in options], perm))
    return _Options(len(perm), texts, none_position)


def _find(text: str | None, ctx: _Options, multi: bool) -> list[int]:
    """The displayed 1-based positions chosen by the response (see the module docstring for the order)."""
    if text is None or not isinstance(text, str) or not text.strip():
        raise UnreadableAnswer("empty response")
    clean = _clean(text)
    if not clean.strip():
        raise UnreadableAnswer("empty response once <think> blocks are removed")
    last_start, last_line = _lines(clean)[-1]
    markers = _markers(clean)
    bare = _bare(last_line, ctx, multi)
    if markers:
        candidates = list(markers)
        if bare is not None and last_start >= markers[-1][1]:
            candidates.append((last_start, last_start + len(last_line), last_line))
        return _final_block(clean, candidates, ctx, multi)
    if bare is not None:
        return bare
    phrases = list(_PHRASE.finditer(clean))
    if phrases:
        rest = clean[phrases[-1].end() :].split("\n", 1)[0]
        try:
            return _read(rest, ctx, multi)
        except UnreadableAnswer:
            pass
    if _REFUSAL.search(clean):
        raise UnreadableAnswer("refusal: no answer given")
    raise UnreadableAnswer("no answer found")


def _clean(text: str) -> str:
    """Drop thinking blocks, normalise unicode, strip markdown; ``\\boxed{x}`` becomes an ``Answer: x`` line."""
    visible: list[str] = []
    depth, pos = 0, 0
    for tag in _THINK_TAG.finditer(text):
        if depth == 0:
            visible.append(text[pos : tag.start()])
        if not tag.group(1):
            depth += 1
        elif depth:
            depth -= 1
        else:
            visible.clear()  # a closing tag without an opening one: everything before it was thinking
        pos = tag.end()
    if depth == 0:
        visible.append(text[pos:])
    clean = unicodedata.normalize("NFKC", "\n".join(visible)).translate(_INVISIBLE).translate(_QUOTES)
    clean = _LINE_DECOR.sub("", _MARKDOWN.sub("", clean))
    clean = _LATEX_TEXT.sub(r"\1", clean)
    return _BOXED.sub(lambda m: f"\nAnswer: {m.group(1)}\n", clean)


def _markers(clean: str) -> list[tuple[int, int, str]]:
    """Each explicit ``Answer:`` as (start, end of its payload, payload); an empty one takes the next line."""
    found = list(_MARKER.finditer(clean))
    markers = []
    for k, marker in enumerate(found):
        stop = found[k + 1].start() if k + 1 < len(found) else len(clean)
        line_end = clean.find("\n", marker.end())
        end = min(stop, len(clean) if line_end < 0 else line_end)
        payload = clean[marker.end() : end]
        following = _lines(clean[end:stop]) if not payload.strip() else []
        if following:
            offset, payload = following[0]
            end += offset + len(payload)
        markers.append((marker.start(), end, payload))
    return markers


def _lines(text: str) -> list[tuple[int, str]]:
    """The non-blank lines of ``text`` with their offsets, stripped of surrounding blanks."""
    found, offset = [], 0
    for line in text.split("\n"):
        if line.strip():
            found.append((offset + len(line) - len(line.lstrip()), line.strip()))
        offset += len(line) + 1
    return found


def _final_block(clean: str, candidates: list[tuple[int, int, str]], ctx: _Options, multi: bool) -> list[int]:
    """Read the last candidate; candidates directly before it (only blank space between) must agree with it."""
    answer = _read(candidates[-1][2], ctx, multi)
    for k in range(len(candidates) - 2, -1, -1):
        if not _FILLER.fullmatch(clean[candidates[k][1] : candidates[k + 1][0]]):
            break
        try:
            earlier = _read(candidates[k][2], ctx, multi)
        except UnreadableAnswer:
            continue
        if sorted(set(earlier)) != sorted(set(answer)):
            raise UnreadableAnswer(f"conflicting final answers: {_show(earlier)} then {_show(answer)}")
    return answer


def _bare(line: str, ctx: _Options, multi: bool) -> list[int] | None:
    """The choice when ``line`` is nothing but a choice, else None."""
    stripped = line.strip().strip("'\"").strip()
    tokens, end = _scan(stripped)
    is_choice = (
        (multi and _EMPTY_LIST.fullmatch(stripped.rstrip(".")) is not None)
        or _NONE_OF_ABOVE.fullmatch(stripped.rstrip(".!")) is not None
        or _NONE.fullmatch(stripped) is not None
        or (bool(tokens) and _REST_IS_FILLER.fullmatch(stripped, end) is not None)
        or _LONE_LETTER.fullmatch(stripped) is not None
        or (ctx.texts is not None and _norm(stripped) in ctx.texts)
    )
    if not is_choice:
        return None
    try:
        return _read(stripped, ctx, multi)
    except UnreadableAnswer:
        return None


def _read(payload: str, ctx: _Options, multi: bool) -> list[int]:
    """The displayed positions named at the start of ``payload`` (the text after ``Answer:``)."""
    stripped = payload.strip().strip("'\"").strip()
    if ctx.texts is not None and _norm(stripped) in ctx.texts:
        return [ctx.texts.index(_norm(stripped)) + 1]
    if _EMPTY_LIST.match(stripped):
        if multi:
            return []
        raise UnreadableAnswer("an empty list where one choice is asked for")
    if _NONE_OF_ABOVE.match(stripped) or (not multi and _NONE.match(stripped)):
        if ctx.none_position is None:
            raise UnreadableAnswer("answered 'None of the above' but no displayed option is empty (or options unknown)")
        return [ctx.none_position]
    if _NONE.match(stripped):
        return []
    lone = _LONE_LETTER.fullmatch(stripped)
    if lone:
        return _positions([lone.group(1).upper()], ctx)
    tokens, _ = _scan(stripped)
    if tokens:
        return _positions(tokens, ctx)
    by_text = _by_text(stripped, ctx)
    if by_text is not None:
        return [by_text]
    phrases = list(_PHRASE.finditer(stripped))
    if phrases:
        return _read(stripped[phrases[-1].end() :], ctx, multi)
    raise UnreadableAnswer(f"could not read an answer from {stripped[:80]!r}")


def _scan(text: str) -> tuple[list[str], int]:
    """Choice tokens (numbers or A-E) at the start of ``text``, with separators between; and where they stop.

    A list that opens with ``[`` ends at its ``]``, and once a choice is read an opening bracket starts
    commentary: ``[2, 4] (options 1 and 3 are rude)`` and ``2 (not 4)`` read only 2, 4 and 2.
    """
    opening = re.match(r"\s*\[", text)
    if opening:
        close = text.find("]", opening.end())
        if close >= 0:
            tokens, stop = _scan(text[opening.end() : close])
            if tokens and _REST_IS_FILLER.fullmatch(text[opening.end() : close], stop):
                return tokens, close + 1
    tokens: list[str] = []
    pos = 0
    while True:
        sep = _SEP.match(text, pos)
        if tokens and sep and _OPENS_COMMENT.search(sep.group()):
            return tokens, pos
        start = sep.end() if sep else pos
        token = _NUM.match(text, start) or _LETTER.match(text, start)
        if not token:
            return tokens, pos
        tokens.append(token.group())
        pos = token.end()


def _positions(tokens: list[str], ctx: _Options) -> list[int]:
    """1-based displayed positions from number or letter tokens, checked against the option count."""
    digits = [t for t in tokens if t.isdigit()]
    if digits and len(digits) != len(tokens):
        raise UnreadableAnswer(f"numbers and letters mixed in one answer: {', '.join(tokens)}")
    positions = [_number(t) for t in tokens] if digits else [ord(t) - ord("A") + 1 for t in tokens]
    for position, token in zip(positions, tokens, strict=True):
        if not 1 <= position <= ctx.count:
            raise UnreadableAnswer(f"choice {token[:20]} out of range 1-{ctx.count}")
    return positions


def _number(digits: str) -> int:
    """An ASCII digit string's value; one too long to be an option number (beyond int()'s digit limit, too) is -1."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 6 else -1


def _by_text(payload: str, ctx: _Options) -> int | None:
    """The one displayed position whose option text the payload repeats, if exactly one."""
    if ctx.texts is None:
        return None
    padded = f" {_norm(payload)} "
    hits = [i for i, option in enumerate(ctx.texts) if option and f" {option} " in padded]
    hits = [i for i in hits if not any(i != j and ctx.texts[i] in ctx.texts[j] for j in hits)]
    return hits[0] + 1 if len(hits) == 1 else None


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).split())


def _show(positions: list[int]) -> str:
    return "[" + ", ".join(map(str, positions)) + "]" if len(positions) != 1 else str(positions[0])
