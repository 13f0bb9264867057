"""docs/BENCHMARKS.md cut into its sections, for the benchmarks that put theirs in place of an
earlier run's (`make bench ONLY=…`, `make bench SIZES=…`)."""

from __future__ import annotations

import re

_BEFORE_A_HEADING = re.compile(r"(?m)^(?=## )")


def split(text: str) -> list[str]:
    """``text`` cut before each ``## `` heading: what comes before the first (perhaps
    nothing), then each section to the next heading. They join back into ``text``."""
    return _BEFORE_A_HEADING.split(text)


def heading(section: str) -> str:
    return section.partition("\n")[0]
