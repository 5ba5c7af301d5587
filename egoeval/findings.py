"""What an audit saw, line by line (``ok``, ``note``, ``DIFF``), and the comparison of reported numbers that every
benchmark's audit part shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from egoeval.reported import differences, flatten_metrics

MAX_LISTED = 20


@dataclass
class Findings:
    """What the audit saw, in order; any ``differ`` makes the report not reproduce, any ``miss`` leaves it undecided."""

    lines: list[str] = field(default_factory=list)
    differences: int = 0
    missing: int = 0  # pinned outputs the audit needs that are not here (not pulled): it cannot decide

    def section(self, title: str) -> None:
        self.lines.append(f"\n{title}")

    def miss(self, text: str) -> None:
        """A pinned output the audit needs is neither in the workspace nor in the DVC cache."""
        self.lines.append(f"  MISSING  {text}")
        self.missing += 1

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok    {text}")

    def note(self, text: str) -> None:
        self.lines.append(f"  note  {text}")

    def differ(self, text: str) -> None:
        self.lines.append(f"  DIFF  {text}")
        self.differences += 1

    def listed(self, texts: list[str], what: str) -> None:
        """``differ`` for the first MAX_LISTED texts, then one line counting the rest."""
        for text in texts[:MAX_LISTED]:
            self.differ(text)
        if len(texts) > MAX_LISTED:
            self.differ(f"... and {len(texts) - MAX_LISTED} more {what}")


def compare_numbers(reported: dict[str, Any], derived: dict[str, Any], tolerance: float, findings: Findings) -> None:
    """Every number in ``reported`` against the re-derived one; a differing one says if it is inside the ci95."""
    numbers = flatten_metrics(reported)
    found = differences(numbers, flatten_metrics(derived), tolerance)
    for difference in found:
        findings.differ(difference.describe("re-derived"))
    if not found:
        findings.ok(f"{len(numbers)} reported numbers reproduce within {tolerance:g}")
