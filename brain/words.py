"""Plain words for what pages and messages say, written once: quoting a line someone said,
ending a sentence, a count and its noun, the clauses of a report that hold, and how sure brain
is, in words rather than a number.

The platform's: no app is imported, so every app's pages, messages and briefs may use them.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "“", "”"
_ENDS_A_SENTENCE = re.compile(r"[.!?…][\"'”’)\]]*$")

# How sure brain is of a fact, in words (the number stays on hover). Taught "high" is 0.8,
# "medium" 0.6 and "low" 0.4 (knowledge.actions.CONFIDENCE); outcomes move it from there.
SURE_FROM = 0.8
PROBABLY_FROM = 0.55
CONFIDENCE_WORDS = {"high": "sure", "medium": "probably", "low": "not sure"}


def quoted(text: str) -> str:
    """``text`` in curly quotes, once: a line that already is one quotation is left as it is,
    and quotes inside become single ones (“‘The office’ means the back bedroom.”), never
    "““The office”"."""
    text = str(text).strip()
    if text.startswith(OPEN) and text.endswith(CLOSE) and text.count(OPEN) == 1:
        return text
    return unnested(f"{OPEN}{text}{CLOSE}")


def unnested(text: str) -> str:
    """Quotations inside quotations in single quotes: a sentence that quotes a line which
    itself quotes something ("Added: ““The office” means…”") reads “‘The office’ means…”."""
    said, depth = [], 0
    for character in str(text):
        if character == OPEN:
            said.append(OPEN if depth == 0 else "‘")
            depth += 1
        elif character == CLOSE and depth > 0:
            depth -= 1
            said.append(CLOSE if depth == 0 else "’")
        else:
            said.append(character)
    return "".join(said)


def sentence(text: str) -> str:
    """``text`` ending as a sentence ends: a full stop added only when it has none of its own
    (before or inside a closing quote), so never "minutes.”."."""
    text = str(text).rstrip()
    if not text or _ENDS_A_SENTENCE.search(text):
        return text
    return text + "."


def confidence(value) -> str:
    """How sure brain is: "sure", "probably" or "not sure", from a number (0 to 1) or a taught
    level ("high", "medium", "low")."""
    if isinstance(value, str) and value in CONFIDENCE_WORDS:
        return CONFIDENCE_WORDS[value]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    if number >= SURE_FROM:
        return "sure"
    if number >= PROBABLY_FROM:
        return "probably"
    return "not sure"


_HOW_SURE = {
    "sure": "brain is sure of it",
    "probably": "brain thinks it probably holds",
    "not sure": "brain is not sure of it now",
}


def how_sure(value) -> str:
    """``confidence`` said as a clause of a sentence: "brain is sure of it"."""
    return _HOW_SURE.get(confidence(value), "")


def noun(count: int, one: str, many: str = "") -> str:
    """The noun a count takes: fact for 1, facts otherwise (``many`` when an s will not do)."""
    return one if count == 1 else many or one + "s"


def plural(count: int, one: str, many: str = "") -> str:
    """A count and its noun: 1 fact, 3 facts, 2 guesses, 1,204 facts."""
    return f"{count:,} {noun(count, one, many)}"


def counted(count: int, one: str, many: str = "") -> str:
    """A count and its noun with the digits ungrouped, as runs' reports and messages say it:
    1 fact, 1204 facts."""
    return f"{count} {noun(count, one, many)}"


def clauses(*said: tuple[object, str]) -> list[str]:
    """The clauses that hold, in order, each given with what it tells of: a clause is said only
    when that is there (a count above nought, a value given), so a report or a description
    never says "0 waiting" or "sent by "."""
    return [words for there, words in said if there]
