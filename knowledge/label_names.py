"""What a label's name reads as: two names that look the same on a screen are one name.

"Sa\u200bles" (a zero-width space inside) and "Ｓａｌｅｓ" (full-width letters) read as "Sales",
so a second label with either name would look like the first while granting something else.
A name is kept in its NFKC form with invisible characters taken out and spaces collapsed
(``clean``), and two names are the same when they are equal after case folding too (``key``);
``Label.clean`` refuses a name that is the same as another label's of the memory, naming it.
"""

from __future__ import annotations

import unicodedata

# Characters that show nothing: format characters (zero-width space and joiners, bidi marks,
# the soft hyphen), controls, unassigned and private code points; and the letters and marks
# that draw as blank space: the Hangul fillers, the braille blank, the combining grapheme joiner,
# the Khmer inherent vowels and the variation selectors.
_INVISIBLE = frozenset({"Cf", "Cc", "Cs", "Co", "Cn"})
_BLANK = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0})


def _shows(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.category(char) not in _INVISIBLE
        and code not in _BLANK
        and not 0xFE00 <= code <= 0xFE0F
        and not 0xE0100 <= code <= 0xE01EF
    )


def _visible(text: str) -> str:
    kept = (char for char in text if _shows(char))
    return " ".join("".join(kept).split())


def clean(name: str) -> str:
    """``name`` as a label keeps it: NFKC, invisible characters out, spaces collapsed."""
    return _visible(unicodedata.normalize("NFKC", name or ""))


def key(name: str) -> str:
    """What a label's name reads as, for comparing two names: ``clean`` folded."""
    return unicodedata.normalize("NFKC", clean(name).casefold())
