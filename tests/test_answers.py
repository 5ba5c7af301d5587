"""The EgoNormia answer parser: tolerant of how models write answers, strict about failures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egoeval.core.errors import UnreadableAnswer
from egoeval.egonormia.answers import displayed_options, parse_multi, parse_single

# Stored options; the empty string is the "None of the above" slot (stored index 4).
OPTIONS = ["Help the person carry the box", "Wave and walk away", "Take a photo", "Ask before touching their bag", ""]
# Displayed position i (1-based) shows stored option PERM[i-1]:
#   1 -> 3 "Ask before touching", 2 -> 0 "Help", 3 -> 4 "None of the above", 4 -> 2 "Take a photo", 5 -> 1 "Wave".
PERM = [3, 0, 4, 2, 1]


def single(text: str | None) -> int:
    return parse_single(text, PERM, OPTIONS)


def multi(text: str | None) -> list[int]:
    return parse_multi(text, PERM, OPTIONS)


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("Answer: 2", 0),
        ("**Answer:** 2", 0),
        ("**Answer: 2**", 0),
        ("Answer: (2)", 0),
        ("Answer: [2]", 0),
        ("answer:2.", 0),
        ("Answer: 2!", 0),
        ("Final Answer: Option 2", 0),
        ("## Answer\n\nAnswer: 2 - Help the person carry the box", 0),
        ("The answer is 2.", 0),
        ("Option 2", 0),
        ("Let me think about the scene.\n\n2", 0),
        ("Reasoning...\n**2.**", 0),
        ("Answer: B", 0),
        ("(B)", 0),
        ("Answer: B) Help the person carry the box", 0),
        ("answer: b", 0),
        ("Answer: Help the person carry the box", 0),
        ("Answer: 'help the person carry the box.'", 0),
        ("Help the person carry the box.", 0),
        ("Answer: 3", 4),
        ("Answer: None of the above", 4),
        ("None of the above", 4),
        ("Answer: None", 4),
        ("Answer: C", 4),
        ("Answer: 5", 1),  # the 5th displayed position maps back too
        ("Answer: E", 1),
        ("Answer: 1", 3),
        ("Answer: 4", 2),
        ("I would choose option 5 here.", 1),
        ("The most appropriate action is 4, taking a photo.", 2),
        ("Answer: The correct action is 2", 0),
        ("Options 1 and 3 ignore consent; option 4 is rude; 5 is lazy.\nAnswer: 2", 0),
        ("Answer: 1\n\nOn reflection helping matters more, since 3 and 4 are rude.\n\nAnswer: 2", 0),
        ("Answer: 2\n\nAnswer: 2", 0),
        ("Answer:\n\n**2**", 0),
        ("**Final Answer:** $\\boxed{2}$", 0),
        ("Answer: \\boxed{\\text{B}}", 0),
        ("<think>Answer: 1. No wait, 5.</think>\nAnswer: 2", 0),
        ("<think>\nHmm, 1? 3? 4?\n</think>\n\n2", 0),
        ("the model forgot its opening tag, 1 3 4 </think>Answer: 2", 0),
        ("Answer：２", 0),  # full-width colon and digit
        ("Ответ подумав... Answer: 2 ✅", 0),
        ("Answer:\u200b 2", 0),
        ("“Answer: 2”", 0),
        ("Answer: 2 (the 1st and 3rd options are rude)", 0),
        ("Answer: 2️⃣", 0),
        ("Answer: **2. Help the person carry the box**\n\nJustification: it is kind.", 0),
        ("The correct answer is **Option 2**.", 0),
        ("Answer: Option 3 (None of the above)", 4),
    ],
)
def test_single_accepts(text: str, stored: int) -> None:
    assert single(text) == stored


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "empty"),
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("<think>I pick 2</think>", "empty"),
        ("<think>unterminated, Answer: 2", "empty"),
        ("I won't answer this question.", "refusal"),
        ("I'm sorry, but I can't help with choosing among these.", "refusal"),
        ("Answer: 6", "out of range"),
        ("Answer: 0", "out of range"),
        ("Answer: 12", "out of range"),
        ("Answer: F", "could not read"),
        ("Answer: 1\nAnswer: 2", "conflicting"),
        ("Answer: 1 Answer: 2", "conflicting"),
        ("Answer: 2\n4", "conflicting"),
        ("Answer: 2 or 4", "several"),
        ("Answer: [2, 4]", "several"),
        ("Answer: []", "empty list"),
        ("Answer: I cannot decide between them", "could not read"),
        ("There are many considerations, e.g. 1, 2 and 3 all matter.", "no answer"),
        ("The second option seems best.", "no answer"),
        ("Answer: 2\n\nWait. Answer: N", "could not read"),
        ("Answer: A person should wait", "could not read"),
    ],
)
def test_single_fails(text: str | None, reason: str) -> None:
    with pytest.raises(UnreadableAnswer) as failure:
        single(text)
    assert reason in failure.value.reason


def test_none_of_the_above_needs_the_empty_slot() -> None:
    assert parse_single("Answer: 3", PERM) == 4  # numbers need no option texts
    with pytest.raises(UnreadableAnswer, match="None of the above"):
        parse_single("Answer: None of the above", PERM)
    with pytest.raises(UnreadableAnswer, match="None of the above"):
        parse_single("Answer: None of the above", PERM, ["a", "b", "c", "d", "e"])


def test_identity_permutation_maps_every_position() -> None:
    for position in range(1, 6):
        assert parse_single(f"Answer: {position}", [0, 1, 2, 3, 4]) == position - 1
        assert parse_single(f"Answer: {position}", [4, 3, 2, 1, 0]) == 5 - position


def test_bad_permutation_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="permutation"):
        parse_single("Answer: 1", [0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="options"):
        parse_single("Answer: 1", PERM, OPTIONS[:4])


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("Answer: [2, 5]", [0, 1]),
        ("Answer: [5, 2, 2]", [0, 1]),
        ("Answer: []", []),
        ("Answer: [ ]", []),
        ("Answer: none", []),
        ("Answer: None.", []),
        ("Answer: None of the above", [4]),
        ("Answer: [3]", [4]),
        ("Answer: 2, 5 and 1", [0, 1, 3]),
        ("Answer: Options 2 & 4", [0, 2]),
        ("**Answer:** [B, E]", [0, 1]),
        ("Answer: B and E are both fine", [0, 1]),
        ("Answer: **[2, 4]** (helping and photos)", [0, 2]),
        ('Answer: ["2", "5"]', [0, 1]),
        ("Answer: (2, 5)", [0, 1]),
        ("Answer: 2", [0]),
        ("Thinking about 1, 3 and 4 ...\n[2, 5]", [0, 1]),
        ("1, 4", [3, 2]),
        ("[]", []),
        ("The sensible actions are 2 and 4.", [0, 2]),
        ("<think>[1, 2, 3]</think>Answer: [5]", [1]),
        ("Answer: [1, 2]\nOn reflection 1 is intrusive.\nAnswer: [2]", [0]),
        ("Answer: [2]\nAnswer: [2]", [0]),
    ],
)
def test_multi_accepts(text: str, stored: list[int]) -> None:
    assert multi(text) == sorted(stored)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "empty"),
        ("Answer: [2, 6]", "out of range"),
        ("Answer: [1, B]", "mixed"),
        ("Answer: [2]\nAnswer: [2, 5]", "conflicting"),
        ("I cannot answer that.", "refusal"),
        ("Several of them, maybe.", "no answer"),
    ],
)
def test_multi_fails(text: str | None, reason: str) -> None:
    with pytest.raises(UnreadableAnswer) as failure:
        multi(text)
    assert reason in failure.value.reason


def test_very_long_text_is_fast() -> None:
    reasoning = "Option 3 is rude, option 4 maybe, 1 2 3 4 5 [1, 2] none. " * 4000
    assert single(reasoning + "\nAnswer: 4") == 2
    assert multi(reasoning + "\nAnswer: [4, 5]") == [1, 2]
    with pytest.raises(UnreadableAnswer):
        single("Answer:" + " " * 200_000 + "x")
    with pytest.raises(UnreadableAnswer):
        single("<think>" * 20_000 + "$" * 100_000 + "I" + " " * 100_000)  # linear-time patterns: no hang


@pytest.mark.bad_input
def test_a_number_of_any_length_is_read_or_out_of_range() -> None:
    with pytest.raises(UnreadableAnswer, match="out of range 1-5"):
        single("Answer: 1" + "9" * 5000)  # int() refuses more than 4,300 digits: the parser never asks it
    with pytest.raises(UnreadableAnswer, match="out of range 1-5"):
        multi("Answer: [2, " + "9" * 5000 + "]")
    assert single("Answer: " + "0" * 5000 + "3") == single("Answer: 3")  # leading zeros do not count


# ----------------------------------------------------------------------------------------- property tests

FRAGMENTS = [
    "Answer:",
    "answer is",
    "Answer: [",
    "]",
    "[",
    "(",
    ")",
    "**",
    "<think>",
    "</think>",
    "\\boxed{",
    "}",
    "None of the above",
    "none",
    "Option",
    " and ",
    ", ",
    " or ",
    "\n",
    " ",
    ".",
    ":",
    "A",
    "B",
    "E",
    "F",
    "a",
    "0",
    "1",
    "2",
    "3",
    "5",
    "6",
    "42",
    "I won't",
    "I would choose",
    "Help the person carry the box",
    "Take a photo",
    "３",
    "é",
    "\u200b",
    "$",
    "#",
    "-",
    "'",
    "1" + "9" * 5000,  # past Python's int-string limit: an answer out of range, never a crash
    "0000000003",
]
tricky_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=400), tricky_text)
permutations = st.permutations(range(5))
option_lists = st.lists(st.text(max_size=20), min_size=5, max_size=5)


@settings(max_examples=400, deadline=None)
@given(text=any_text, perm=permutations, options=st.one_of(st.none(), option_lists, st.just(OPTIONS)))
def test_only_parse_failure_escapes_single(text: str, perm: list[int], options: list[str] | None) -> None:
    try:
        stored = parse_single(text, perm, options)
    except UnreadableAnswer as failure:
        assert failure.reason
    else:
        assert stored in range(5)


@settings(max_examples=400, deadline=None)
@given(text=any_text, perm=permutations, options=st.one_of(st.none(), option_lists, st.just(OPTIONS)))
def test_only_parse_failure_escapes_multi(text: str, perm: list[int], options: list[str] | None) -> None:
    try:
        stored = parse_multi(text, perm, options)
    except UnreadableAnswer as failure:
        assert failure.reason
    else:
        assert stored == sorted(set(stored)) and set(stored) <= set(range(5))


REASONING = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,\néß漢", max_size=300)
SINGLE_FORMS = [
    "Answer: {n}",
    "**Answer:** {n}",
    "Answer: ({n})",
    "Answer: {letter}",
    "Final answer: \\boxed{{{n}}}",
    "Answer: {text}",
    "The answer is {n}.",
    "{n}",
    "**Answer:** Option {n}",
    "Answer: {n}. {text}",
]


def shown_text(perm: list[int], position: int) -> str:
    return displayed_options(OPTIONS, perm)[position - 1]


@settings(max_examples=300, deadline=None)
@given(
    perm=permutations,
    position=st.integers(1, 5),
    form=st.sampled_from(SINGLE_FORMS),
    reasoning=REASONING,
)
def test_round_trip_single(perm: list[int], position: int, form: str, reasoning: str) -> None:
    answer = form.format(n=position, letter="ABCDE"[position - 1], text=shown_text(perm, position))
    assert parse_single(f"{reasoning}\n{answer}", perm, OPTIONS) == perm[position - 1]


MULTI_FORMS = ["Answer: [{numbers}]", "**Answer:** [{letters}]", "Answer: {spoken}", "[{numbers}]"]


@settings(max_examples=300, deadline=None)
@given(
    perm=permutations,
    positions=st.lists(st.integers(1, 5), max_size=5, unique=True),
    form=st.sampled_from(MULTI_FORMS),
    reasoning=REASONING,
)
def test_round_trip_multi(perm: list[int], positions: list[int], form: str, reasoning: str) -> None:
    spoken = ", ".join(map(str, positions[:-1])) + f" and {positions[-1]}" if len(positions) > 1 else ""
    spoken = spoken or (str(positions[0]) if positions else "[]")
    answer = form.format(
        numbers=", ".join(map(str, positions)), letters=", ".join("ABCDE"[p - 1] for p in positions), spoken=spoken
    )
    assert parse_multi(f"{reasoning}\n{answer}", perm, OPTIONS) == sorted(perm[p - 1] for p in positions)


# ------------------------------------------------------------------ commentary after the answer (issue 8, g)

COMMENTARY = st.sampled_from(
    [
        " (options {others} are rude)",
        " ({others} would be rude)",
        " [not {others}]",
        " (not option {others})",
        " -- {others} are wrong because they ignore the person",
        " because {others} ignore the context",
        ". Options {others} are less appropriate.",
        " ({others}).",
    ]
)


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("Answer: [2, 4] (options 1 and 3 are rude)", [0, 2]),
        ("Answer: [2, 4] (1 and 3 are rude)", [0, 2]),
        ("Answer: 2, 4 (options 1 and 3 are rude)", [0, 2]),
        ("Answer: [2, 4] [not 1]", [0, 2]),
        ("Answer: [] (none of 1-5 fits)", []),
    ],
)
def test_multi_ignores_commentary_after_the_answer(text: str, stored: list[int]) -> None:
    assert multi(text) == stored


@settings(max_examples=400, deadline=None)
@given(
    perm=permutations,
    positions=st.lists(st.integers(1, 5), min_size=1, max_size=5, unique=True),
    bracketed=st.booleans(),
    commentary=COMMENTARY,
    reasoning=REASONING,
)
def test_fuzz_multi_with_trailing_commentary(
    perm: list[int], positions: list[int], bracketed: bool, commentary: str, reasoning: str
) -> None:
    others = [p for p in range(1, 6) if p not in positions] or [1]
    numbers = ", ".join(map(str, positions))
    answer = f"Answer: [{numbers}]" if bracketed else f"Answer: {numbers}"
    text = f"{reasoning}\n{answer}{commentary.format(others=' and '.join(map(str, others)))}"
    assert parse_multi(text, perm, OPTIONS) == sorted(perm[p - 1] for p in positions), text


@settings(max_examples=400, deadline=None)
@given(perm=permutations, position=st.integers(1, 5), commentary=COMMENTARY, reasoning=REASONING)
def test_fuzz_single_with_trailing_commentary(perm: list[int], position: int, commentary: str, reasoning: str) -> None:
    others = " and ".join(str(p) for p in range(1, 6) if p != position)
    text = f"{reasoning}\nAnswer: {position}{commentary.format(others=others)}"
    assert parse_single(text, perm, OPTIONS) == perm[position - 1], text
