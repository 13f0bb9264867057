"""Compare two short statements about a home, deterministically and without a model.

Used by the offline composer (to dedupe, and to resolve contradictions newest-wins) and by the
facts write gate (the same fact said two ways is stored once; facts that differ by a "not" are
kept apart). Deterministic: the same two strings always give the same answer.

The comparison is lexical, and says so. It works on:

- content words: casefolded tokens minus stopwords, lightly stemmed ("sleeps", "sleeper" and
  "sleeping" all become "sleep"), with entity ids (``light.office_lamp``) kept whole and numbers
  kept with their unit ("19", "15%", "23:00", "8kw", "19°");
- negation cues, judged clause by clause, so "the office, not the study" is not read as a
  denial of "the office";
- a short list of state-change cues ("moved", "no longer", "replaced", ...) and opposite
  states ("on"/"off", "open"/"closed", ...).

It knows no synonyms beyond stemming: "Sarah sleeps lightly" and "Sarah is a light sleeper"
match because they share stems, "the lounge" and "the living room" do not.

A statement has two forms, each made here and nowhere else: :func:`as_stored` (what a fact,
an episode or a passage's line keeps; :func:`as_stored_within` refuses one that is empty or
longer than its kind's limit) and :func:`normalise` (what statements are compared in).

Public API: :func:`as_stored`, :func:`as_stored_within`, :func:`normalise`,
:func:`content_words`, :func:`is_negated`, :func:`numbers`, :func:`compare` (returning a
:class:`Comparison`). What kind of statement one is, and the section of the memory document it
is filed under, is ``knowledge.kinds``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from django.core.exceptions import ValidationError

from knowledge import wording

Verdict = Literal["same", "refinement", "contradiction", "conflict", "related", "novel"]
VERDICTS: tuple[Verdict, ...] = (
    "same",
    "refinement",
    "contradiction",
    "conflict",
    "related",
    "novel",
)

# --- Thresholds (similarities are Jaccard indices of content-word sets, 0..1) ---------------

#: Two statements with this much content-word overlap, the same negations and the same numbers
#: say the same thing. High on purpose: short statements that swap one word are usually
#: different facts ("the kitchen lamp" / "the office lamp").
SAME_THRESHOLD = 0.8

#: Overlap (excluding the words that differ) above which two statements are about the same
#: subject, so a flipped "not", a changed number or an opposite state makes them contradict.
STRONG_OVERLAP = 0.6

#: A new statement is a refinement when it keeps at least this share of the old statement's
#: content words and adds more. Below 1.0 so a long statement may lose one word on the way.
REFINEMENT_COVERAGE = 0.8

#: A state-change cue ("moved", "sold", ...) in the new statement contradicts the old one when
#: they share at least STATE_CHANGE_MIN_SHARED content words and the shared words are at
#: least this share of the shorter statement's words (the cue word itself left out).
STATE_CHANGE_OVERLAP = 0.6
STATE_CHANGE_MIN_SHARED = 2

#: A new statement whose content words all appear in the old one already says nothing new,
#: provided it has at least this many content words (one shared word proves nothing).
CONTAINED_MIN_WORDS = 2

#: Below this similarity two statements have nothing worth linking: "novel".
RELATED_THRESHOLD = 0.1


@dataclass(frozen=True)
class Quantity:
    """A number with its unit, as found in a statement.

    ``value`` is canonical ("19", "8.5", "23:00", "24/7"); ``unit`` is canonical ("" for a bare
    number, "%", "°", "kw", "time", ...); ``text`` is how the statement wrote it and takes no
    part in equality, so "19 degrees" equals "19°C".
    """

    value: str
    unit: str
    text: str = field(compare=False)

    @property
    def token(self) -> str:
        """The content word standing for this quantity: "19", "15%", "8kw", "23:00"."""
        if self.unit in ("date", "month", "weekday"):
            return f"{self.unit}:{self.value}"
        return self.value if self.unit in ("", "time") else f"{self.value}{self.unit}"


@dataclass(frozen=True)
class Comparison:
    """How a new statement relates to an old one.

    ``verdict`` is what callers act on. ``similarity`` is the topical overlap (Jaccard of
    content words) and ignores polarity: "the lamp is on" and "the lamp is not on" score 1.0
    and are a contradiction. ``reason`` is plain English for logs and run notes.
    """

    verdict: Verdict
    similarity: float
    reason: str
    #: Nothing rules out that both say the same thing: the subjects agree, and so do the
    #: numbers, the negations and the states. A caller with embeddings may judge "same" on
    #: meaning when the words alone said "related" or "novel".
    could_be_same: bool = False


# --- Normalising and tokenising --------------------------------------------------------------

_QUOTES = str.maketrans(
    {
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
        "\u00b4": "'", "`": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
        "\u00ab": '"', "\u00bb": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2015": "-", "\u2212": "-",
    }
)  # fmt: skip
_WHITESPACE = re.compile(r"\s+")
_TRAILING = ".!?;:,\u2026 "


def _unify(text: str) -> str:
    """NFKC, straight quotes, hyphen-minus for every dash; case untouched."""
    return unicodedata.normalize("NFKC", text).translate(_QUOTES)


def as_stored(text: str | None) -> str:
    """A statement as it is stored (a fact, an episode, a line a passage holds): its whitespace
    collapsed to single spaces and its ends trimmed, its words, case and punctuation as said.
    ``normalise`` gives the form statements are compared in."""
    return " ".join((text or "").split())


def as_stored_within(text: str | None, limit: int, *, what: str, empty: str, advice: str) -> str:
    """``text`` as it will be stored, refused rather than trimmed: ValidationError saying
    ``empty`` when nothing is left, or, when it is longer than ``limit`` characters, "That
    {what} is 1,204 characters; the limit is 1,000." followed by ``advice``."""
    stored = as_stored(text)
    if not stored:
        raise ValidationError(empty)
    if len(stored) > limit:
        raise ValidationError(
            f"That {what} is {len(stored):,} characters; the limit is {limit:,}. {advice}"
        )
    return stored


def normalise(text: str) -> str:
    """The form statements are compared in (``Fact.normalized``, the gate, the kinds): casefold,
    unify quotes and dashes, collapse whitespace, strip trailing punctuation.

    Two statements that differ only in case, typography, spacing or a final full stop
    normalise to the same string. Inner punctuation is kept (it separates clauses).
    """
    text = _WHITESPACE.sub(" ", _unify(text).casefold()).strip()
    return text.rstrip(_TRAILING)


def _word_set(text: str) -> frozenset[str]:
    """A set of words written as one whitespace-separated string, for long word lists."""
    return frozenset(text.split())


_STOPWORDS = _word_set(
    """
    a about again against all also already always am an and any anything are around as at be
    because been being both but by can could currently did do does doing during each either
    else etc even ever every everything few for from further get gets got had has have having
    he her here hers herself him himself his how i if in into is it its itself just let lot may
    me might more most much must my myself now of once only or other our ours ourselves out own
    per please quite rather really same shall she should since so some something still such than
    that the their theirs them themselves then there these they this those through to too
    until us very via was we were what when where which while who whom whose why will with
    would you your yours yourself yourselves luckily sadly thankfully unfortunately honestly
    basically obviously apparently anyway
    """
)


def has_verb_form(word: str) -> bool:
    """``word`` is an auxiliary or a form of a verb the subject finder knows ("is", "won't",
    "moved", "sleeps"); "twins", "lovely" and "spot" are not."""
    word = word.casefold().strip(".,!?'\"")
    return word in _AUXILIARIES or word in _IRREGULAR or _stem(word) in _VERBS


def is_stopword(word: str) -> bool:
    """A word that says nothing about what a statement is about ("the", "when", "does")."""
    return word.casefold() in _STOPWORDS


# Deliberately not stopwords: on/off, up/down, above/below, before/after (opposite states),
# and the negation words, which are counted separately rather than dropped.

_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|nobody|none|nowhere|neither|nor|cannot|[a-z]+n't)\b"
)
_NEGATION_WORDS = _word_set("not no never nothing nobody none nowhere neither nor cannot")

_STATE_CHANGE = re.compile(
    r"\b(?:no longer|not any ?more|any ?more|got rid of|switched (?:over )?to|gave away|"
    r"given away|moved|left|stopped|replaced|nowadays|now|cancell?ed|canceled|sold|retired|"
    r"removed|swapped|changed|broken|broke|died|uninstalled|disconnected|unplugged|gone|"
    r"taken over|took over|takes over|handed (?:it )?over|hands over|instead of|instead|"
    r"stepped down|steps down|resigned|quit|pushed (?:back )?to|postponed|delayed|"
    r"brought forward|rescheduled|is now|are now|lifted)\b"
)
# A role passing from one holder to another: "aisha has taken over the revamp from marco".
_HANDOVER = re.compile(
    r"\b(?:taken over|took over|takes over|taking over|handed (?:it )?over|hands over|replaced|"
    r"replaces|instead of|in place of|passed (?:it )?(?:on|over)|stepped in for|covers for)\b"
)

_OPPOSITES: tuple[tuple[str, str], ...] = (
    ("on", "off"),
    ("open", "closed"),
    ("open", "shut"),
    ("locked", "unlocked"),
    ("enabled", "disabled"),
    ("armed", "disarmed"),
    ("upstairs", "downstairs"),
    ("above", "below"),
    ("before", "after"),
    ("up", "down"),
    ("inside", "outside"),
    ("indoors", "outdoors"),
    ("hot", "cold"),
    ("warm", "cold"),
    # Verbs and states that undo each other: "accepts" / "rejects" needs no cue word.
    ("accepts", "rejects"),
    ("accept", "reject"),
    ("allows", "blocks"),
    ("allows", "forbids"),
    ("allows", "denies"),
    ("allowed", "blocked"),
    ("allowed", "forbidden"),
    ("permitted", "forbidden"),
    ("permits", "forbids"),
    ("permit", "forbid"),
    ("includes", "excludes"),
    ("included", "excluded"),
    ("passes", "fails"),
    ("passed", "failed"),
    ("succeeds", "fails"),
    ("succeeded", "failed"),
    ("works", "broken"),
    ("working", "broken"),
    ("likes", "dislikes"),
    ("likes", "hates"),
    ("like", "dislike"),
    ("like", "hate"),
    ("loves", "hates"),
    ("love", "hate"),
    ("starts", "stops"),
    ("increase", "decrease"),
    ("increases", "decreases"),
    ("raise", "lower"),
    ("wins", "loses"),
    ("added", "removed"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("visible", "hidden"),
    ("public", "private"),
    ("early", "late"),
    ("earlier", "later"),
    ("fast", "slow"),
    ("faster", "slower"),
    ("true", "false"),
    ("full", "empty"),
    ("wet", "dry"),
    ("loud", "quiet"),
    ("high", "low"),
    ("higher", "lower"),
    ("tabs", "spaces"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("online", "offline"),
    ("connected", "disconnected"),
    ("plugged", "unplugged"),
    ("safe", "unsafe"),
    ("supported", "unsupported"),
    ("supports", "drops"),
    ("present", "absent"),
    ("allowed", "banned"),
    ("allows", "bans"),
    ("north", "south"),
    ("east", "west"),
    ("left", "right"),
    ("front", "back"),
    ("light", "dark"),
    ("lighter", "darker"),
    ("cheap", "expensive"),
    ("dog", "cat"),
)

_UNITS: dict[str, str] = {
    "%": "%", "percent": "%", "per cent": "%",
    "°": "°", "°c": "°", "° c": "°", "degrees": "°", "degree": "°", "deg": "°", "c": "°",
    "celsius": "°", "°f": "°f", "fahrenheit": "°f", "f": "°f",
    "kw": "kw", "kilowatt": "kw", "kilowatts": "kw", "kwh": "kwh", "w": "w", "watt": "w",
    "watts": "w", "v": "v", "volt": "v", "volts": "v", "a": "a", "amp": "a", "amps": "a",
    "mm": "mm", "cm": "cm", "m": "m", "metre": "m", "metres": "m", "meter": "m",
    "meters": "m", "km": "km", "mph": "mph", "kg": "kg", "g": "g", "lb": "lb", "lbs": "lb",
    "l": "l", "litre": "l", "litres": "l", "liter": "l", "liters": "l", "ml": "ml",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "day": "d", "days": "d", "week": "wk", "weeks": "wk", "month": "mo", "months": "mo",
    "year": "y", "years": "y", "yr": "y", "yrs": "y",
    "mile": "mi", "miles": "mi", "mi": "mi", "mb": "mb", "gbps": "gbps",
    "db": "db", "lux": "lux", "lx": "lux", "ppm": "ppm", "rpm": "rpm", "mbps": "mbps",
    "gb": "gb", "tb": "tb", "p": "p", "x": "x",
    "st": "#", "nd": "#", "rd": "#", "th": "#",
}  # fmt: skip
# Most single letters only count as a unit when written against the number ("16a", "5s"):
# "at 5 a week" must not become five amps. Ordinal suffixes are never spaced.
_SPACED_UNITS = sorted(
    (u for u in _UNITS if (len(u) > 1 or u in "wvcm") and u not in {"st", "nd", "rd", "th"}),
    key=len,
    reverse=True,
)
_ATTACHED_UNITS = sorted(_UNITS, key=len, reverse=True)

_TOKEN = re.compile(
    r"(?P<entity>\b[a-z_]{2,}\.[a-z0-9_]*[a-z0-9]\b)"
    r"|(?P<time>\b(?:[01]?\d|2[0-3]):[0-5]\d(?:\s?[ap]m\b)?)"
    r"|(?P<clock>\b(?:1[0-2]|0?[1-9])\s?[ap]m\b)"
    r"|(?P<named_time>\b(?:midnight|midday|noon)\b)"
    r"|(?P<ratio>\b\d+/\d+\b)"
    r"|(?P<number>(?:(?<=\s)-|^-)?[£$€]?\d+(?:,\d{3})*(?:\.\d+)?)"
    r"(?:\s?(?P<spaced>" + "|".join(re.escape(u) for u in _SPACED_UNITS) + r")(?!\w)"
    r"|(?P<attached>" + "|".join(re.escape(u) for u in _ATTACHED_UNITS) + r")(?!\w))?"
    r"|(?P<word>[^\W\d_]\w*)"
)
_CONTRACTIONS = (
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"\bcannot\b"), "can not"),
    (re.compile(r"'(?:s|re|ll|ve|d|m)\b"), " "),  # clitics are stopwords ("sarah's" -> "sarah")
)
# Clauses end at sentence punctuation, commas (not "1,000"), a spaced dash, and conjunctions.
_CLAUSE_SPLIT = re.compile(
    r"[.;!?]+(?=\s|$)|,(?!\d{3}\b)|\s-\s"
    r"|\s(?:but|so|because|although|though|whereas|unless|except)\s"
)
_IRREGULAR = {
    "kept": "keep",
    "slept": "sleep",
    "children": "child",
    "people": "person",
    "led": "lead",
    "leads": "lead",
    "leading": "lead",
    "ran": "run",
    "runs": "run",
    "held": "hold",
    "built": "build",
    "made": "mak",
    "fed": "feed",
    "went": "go",
    "goes": "go",
    "gone": "go",
    "done": "do",
    "does": "do",
    "did": "do",
    "took": "tak",
    "taken": "tak",
    "takes": "tak",
    "taking": "tak",
    "wrote": "writ",
    "written": "writ",
    "gave": "giv",
    "given": "giv",
    "sold": "sell",
    "bought": "buy",
    "brought": "bring",
    "taught": "teach",
    "told": "tell",
    "sent": "send",
    "spent": "spend",
    "paid": "pay",
    "found": "find",
    "knew": "know",
    "known": "know",
    "saw": "see",
    "seen": "see",
    "woke": "wak",
    "woken": "wak",
    "rang": "ring",
    "rung": "ring",
    "began": "start",
    "begun": "start",
    "drove": "driv",
    "driven": "driv",
    "chose": "choos",
    "chosen": "choos",
    "broke": "break",
    "broken": "break",
    "wore": "wear",
    "worn": "wear",
    "grew": "grow",
    "grown": "grow",
    "threw": "throw",
    "thrown": "throw",
    "caught": "catch",
    "hung": "hang",
    "stood": "stand",
    "sat": "sit",
    "ate": "eat",
    "eaten": "eat",
    "fell": "fall",
    "fallen": "fall",
    "lit": "light",
    "won": "win",
    "lost": "los",
    "met": "meet",
    "shut": "shut",
    "mice": "mouse",
    "men": "man",
    "women": "woman",
    "feet": "foot",
    "teeth": "tooth",
}


@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    """Light suffix stripping: plurals, -ing, -ed, -ly, -er, and a final -e.

    Not a linguist's stemmer; it only has to map the forms of one word to one key, so both
    sides of a comparison agree ("moved"/"move" -> "mov", "stopped"/"stop" -> "stop").
    """
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3:
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses") or w.endswith(("ches", "shes", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, min_stem in (("ing", 3), ("ed", 3), ("ly", 4), ("er", 4)):
        if w.endswith(suffix) and len(w) - len(suffix) >= min_stem:
            w = w[: -len(suffix)]
            # "running" -> "runn" -> "run", "stopped" -> "stopp" -> "stop"
            if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def _canonical_number(raw: str) -> str:
    """Canonical digits: "1,000" -> "1000", "19.50" -> "19.5", "007" -> "7"; sign kept."""
    prefix = ""
    while raw and raw[0] in "-£$€":
        prefix, raw = prefix + raw[0], raw[1:]
    raw = raw.replace(",", "")
    whole, _, frac = raw.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return prefix + (f"{whole}.{frac}" if frac else whole)


def _clock(hours: int, minutes: int, meridiem: str) -> str:
    if meridiem == "pm" and hours < 12:
        hours += 12
    elif meridiem == "am" and hours == 12:
        hours = 0
    return f"{hours:02d}:{minutes:02d}"


def _kind(match: re.Match[str]) -> str:
    """Which alternative of _TOKEN matched; a number's unit group counts as the number."""
    kind = match.lastgroup or "word"
    return "number" if kind in ("spaced", "attached") else kind


def _quantity(kind: str, match: re.Match[str]) -> Quantity:
    text = match.group(0)
    if kind == "time":
        hh, _, rest = text.partition(":")
        return Quantity(_clock(int(hh), int(rest[:2]), rest[2:].strip()), "time", text)
    if kind == "clock":
        return Quantity(_clock(int(text[:-2].strip()), 0, text[-2:]), "time", text)
    if kind == "named_time":
        return Quantity("00:00" if text == "midnight" else "12:00", "time", text)
    if kind == "ratio":
        return Quantity(text, "", text)
    unit = match.group("spaced") or match.group("attached") or ""
    return Quantity(_canonical_number(match.group("number")), _UNITS.get(unit, unit), text)


@dataclass(frozen=True)
class _Tokens:
    words: frozenset[str]  # content words, quantity tokens included
    quantities: tuple[Quantity, ...]
    surface: tuple[tuple[str, str], ...]  # (stem, first word it came from), for messages


_MONTHS = {
    name: f"{number:02d}"
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sept", "sep"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS = _word_set("monday tuesday wednesday thursday friday saturday sunday")
# A day and its month ("4 may", "the 4th of may", "may 4th"), a month alone where it is one
# ("in april", "until may 2027": "may" is a month only after a word that opens a time), and a
# weekday: dates are values a statement holds, and a date that moved is a changed value.
_DATE = re.compile(
    rf"\b(?:the )?(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?: of)? (?P<month>{_MONTH})\b"
    rf"|\b(?P<month_first>{_MONTH}) (?:the )?(?P<day_after>\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)"
    rf"|\b(?P<opener>in|of|since|until|till|by|from|to|early|late|mid|end|next|last|this|every|"
    rf"each|before|after|during) (?P<month_alone>{_MONTH})\b"
    rf"|\b(?P<named_month>{_MONTH.replace('may|', '').replace('|may', '')})\b"
    r"|\b(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b"
)


def _dates(text: str) -> tuple[str, list[tuple[int, Quantity]]]:
    """``text`` with its dates, months and weekdays blanked out, and each as a Quantity with
    where it stood: "4 may" is ("05-04", "date"), "april" ("04", "month"), "tuesdays"
    ("tuesday", "weekday")."""
    found: list[tuple[int, Quantity]] = []

    def blank(match: re.Match[str]) -> str:
        day = match.group("day") or match.group("day_after")
        month = match.group("month") or match.group("month_first")
        if day and month and 1 <= int(day) <= 31:
            date = Quantity(f"{_MONTHS[month]}-{int(day):02d}", "date", match.group(0))
            found.append((match.start(), date))
        elif match.group("month_alone"):
            month = match.group("month_alone")
            found.append((match.start("month_alone"), Quantity(_MONTHS[month], "month", month)))
            return f"{match.group('opener')} {' ' * len(month)}"
        elif match.group("named_month"):
            month = Quantity(_MONTHS[match.group("named_month")], "month", match.group(0))
            found.append((match.start(), month))
        elif match.group("weekday"):
            weekday = Quantity(match.group("weekday"), "weekday", match.group(0))
            found.append((match.start(), weekday))
        else:
            return match.group(0)
        return " " * len(match.group(0))

    return _DATE.sub(blank, text), found


def _tokenise(norm: str) -> _Tokens:
    """Content words and quantities of an already normalised string."""
    text = norm
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text, dates = _dates(text)
    # A date holds its month: "on 14 june" says "in june" too.
    words: list[str] = [date.token for _, date in dates]
    words += [f"month:{date.value[:2]}" for _, date in dates if date.unit == "date"]
    placed: list[tuple[int, Quantity]] = list(dates)
    surface: dict[str, str] = {date.token: date.text for _, date in dates}
    for match in _TOKEN.finditer(text):
        kind = _kind(match)
        raw = match.group(0)
        if kind == "word":
            # "entity_id" and "entity ids" are the same words; only domain.object ids stay whole.
            for part in raw.split("_"):
                # Single letters ("e.g." -> "e", "g") carry nothing.
                if len(part) > 1 and part not in _STOPWORDS and part not in _NEGATION_WORDS:
                    words.append(_stem(part))
                    surface.setdefault(words[-1], part)
            continue
        if kind == "entity":
            stem = raw
        else:
            quantity = _quantity(kind, match)
            placed.append((match.start(), quantity))
            stem = raw = quantity.token
        words.append(stem)
        surface.setdefault(stem, raw)
    quantities = tuple(quantity for _, quantity in sorted(placed, key=lambda p: p[0]))
    return _Tokens(frozenset(words), quantities, tuple(sorted(surface.items())))


def content_words(text: str) -> frozenset[str]:
    """The statement's content words: lowercase, stemmed, stopwords and negations removed.

    Numbers come with their unit ("19", "15%", "23:00", "8kw", "19°" for "19 degrees") and
    entity ids stay whole ("light.office_lamp"). Possessives are dropped ("Sarah's" -> "sarah").
    """
    return _parse(text).words


def numbers(text: str) -> tuple[Quantity, ...]:
    """Every number in the statement with its unit, in order of appearance.

    Times become 24-hour "HH:MM" with unit "time" ("11pm", "23:00" and "midnight" included);
    "19 degrees", "19°C" and "19c" are all ``Quantity("19", "°")``.
    """
    return _parse(text).quantities


def is_negated(text: str) -> bool:
    """True if the statement carries a negation cue: not, no, never, nothing, n't, cannot, ...

    Presence, not parity ("never rename without asking" is negated). "Off" is a state, not
    a negation: "the lamp is off" is not negated.
    """
    return bool(_parse(text).negations)


# --- What a statement says changed ---------------------------------------------------------

#: Verbs that say a value, a date, a place, a holder or a state changed, whatever follows them
#: ("the launch slipped", "we upgraded the build", "the warranty expired").
_CHANGE_VERBS = frozenset(
    _stem(word)
    for word in _word_set(
        """
    moved slipped postponed delayed rescheduled extended raised lowered increased decreased
    reduced upgraded downgraded migrated relocated redirected transferred resized replaced
    swapped sold retired removed quit cancelled canceled cancel expired stopped resigned died
    uninstalled disconnected unplugged changed left redirected renamed rehomed
    bumped halved doubled
    """
    )
)
#: Verbs that say so with a particle a few words on: "handed the stall over to", "passed the
#: scripts to", "took over", "gave up", "stepped down", "ran out", "put the rent up".
_CHANGE_PARTICLES: dict[str, frozenset[str]] = {
    _stem(verb): frozenset(particles.split())
    for verb, particles in (
        ("hand", "over on off to back"),
        ("pass", "on over to"),
        ("take", "over"),
        ("give", "up away to"),
        ("step", "down aside back"),
        ("run", "out"),
        ("put", "up down"),
        ("go", "up down back"),
        ("bring", "forward"),
        ("push", "back to out"),
        ("cut", "to down back"),
        ("grow", "to"),
        ("knock", "down"),
        ("come", "down up"),
        ("switch", "to over up down"),
        ("drop", "to out off"),
    )
}
# "Switched off" is a change when it was done ("we switched the pump off", "the API was
# switched off"), not when it says what happens ("the fan is switched off at night").
_HABITUAL_BEFORE = frozenset(_word_set("is are be being gets get usually always"))
# A change verb after these says what keeps happening, not that something changed: "the hall
# sensor keeps dropping out", "the speaker often drops off the wifi".
_HABIT_BEFORE = frozenset(
    _word_set("keeps keep kept often sometimes usually always regularly occasionally tends")
)
# A verb in the present ("drops", "lowers") with one of these in its clause says what happens
# whenever something else does: "drops off the wifi when the microwave is on", "lowers the
# flow temperature as the outside warms". "The meeting moves to Thursday" has none: a change.
_WHENEVER = frozenset(_word_set("when whenever if as every each while once"))
# "three degrees lower", "a bit higher", "every degree lower saves": a comparison.
_COMPARATIVE_BEFORE = frozenset(
    _word_set("degree degrees bit much far slightly little lot percent times any no even")
)
_CHANGE_PARTICLE_REACH = 6  # words between the verb and its particle at most
#: Verbs of the change of a holder: the thing stays, its holder is someone else.
_SWITCHED = frozenset(_word_set("to over up down on off"))
_HANDOVER_VERBS = frozenset(_stem(w) for w in _word_set("hand pass take give step transfer"))
_HANDOVER_VERBS |= frozenset(_stem(w) for w in _word_set("resigned quit replaced"))
#: Verbs of a state that ended: "the warranty ran out", "the legacy API was switched off".
_STATE_VERBS = frozenset(
    _stem(w)
    for w in _word_set(
        "stopped died expired cancelled canceled cancel quit resigned retired removed sold "
        "uninstalled disconnected unplugged run switched"
    )
)
_CHANGE_ADVERBS = re.compile(
    r"\b(?:no longer|not any ?more|any ?more|these days|nowadays|instead(?: of)?|"
    r"from now on|now|again|back (?:on|to|in|at|with))\b"
)
# Words that say a state ended or came back: "no longer", "not any more", "back on".
_STATE_ADVERB = re.compile(r"no longer|not any ?more|any ?more|back (?:on|to|in|at|with)")
# "Too", "also", "as well", "another": the new one adds to what was said, never replaces it.
_ADDITIVE = re.compile(r"\b(?:too|also|as well|another|either|in addition)\b")
_DESTINATION = frozenset(_word_set("to onto into over until till for"))


@dataclass(frozen=True)
class _Change:
    """A change a statement says happened: its cue as written, what kind of change (a holder
    passed on, a state ended, a value moved; "no longer" and "back on" are an ending, "now"
    and "instead" an adverb), the words between the verb and its particle (what changed) and
    the words after it (where to: the new value)."""

    cue: str
    kind: str  # handover | state | value | adverb | ending
    moved: frozenset[str] = frozenset()  # "vendor contracts" in "handed the vendor contracts over"
    to: frozenset[str] = frozenset()  # "laura" in "handed ... over to laura"
    heads: frozenset[str] = frozenset()  # the head nouns of both: "contract", "laura"


def _changes_in(norm: str) -> tuple[_Change, ...]:
    """The changes ``norm`` (one wording, lower case) says happened, in order."""
    raw = norm.split()
    words = [w.strip(".,;:!?'\"()") for w in raw]
    stems = [_stem(w) for w in words]
    # Where each clause ends: what moved, and where to, never runs past it.
    ends = [i for i, w in enumerate(raw) if w.endswith((",", ";", ".", ":"))]
    found: list[_Change] = []
    for at, stem in enumerate(stems):
        if _habitual(words, at, ends):
            continue
        particles = _CHANGE_PARTICLES.get(stem)
        if words[at] == "switched" and (not at or words[at - 1] not in _HABITUAL_BEFORE):
            particles = _SWITCHED
        if words[at] in ("closed", "shut") and at and words[at - 1] not in _HABITUAL_BEFORE:
            found.append(_Change(words[at], "state"))  # "the kennels closed", not "is closed"
            continue
        end = at
        if particles:
            reach = range(at + 1, min(at + 1 + _CHANGE_PARTICLE_REACH, len(words)))
            end = next((i for i in reach if words[i] in particles), -1)
            if end < 0:
                continue
        elif stem not in _CHANGE_VERBS:
            continue
        kind = "value"
        if stem in _HANDOVER_VERBS and words[end] in ("to", "over", "on", "down", "off", "away"):
            kind = "handover"
        elif stem in _STATE_VERBS or (particles and words[end] in ("out", "off", "on")):
            kind = "state" if stem not in _HANDOVER_VERBS else "handover"
        stop = next((i + 1 for i in ends if i >= max(at, end)), len(words))
        moved = words[at + 1 : end] if end > at else []
        after = words[end + 1 : stop] if end > at else words[at + 1 : stop]
        to: list[str] = []
        if after and after[0] in _DESTINATION:
            after = after[1:]
        elif end == at and after and after[0] not in _DESTINATION:
            # "moved the printer to the office": what moved, then where to.
            split = next((i for i, w in enumerate(after) if w in _DESTINATION), len(after))
            moved, after = after[:split], after[split + 1 :]
        for word in after:
            if word in ("and", "but", "so", "because", "when", "since", "after", "before"):
                break
            to.append(word)
        found.append(
            _Change(
                " ".join(words[at : end + 1]),
                kind,
                _tokenise(" ".join(moved)).words,
                _tokenise(" ".join(to)).words,
                frozenset(filter(None, (_head(moved), _head(to)))),
            )
        )
    for match in _CHANGE_ADVERBS.finditer(norm):
        ended = _STATE_ADVERB.fullmatch(match.group(0))
        found.append(_Change(match.group(0), "ending" if ended else "adverb"))
    return tuple(found)


def _habitual(words: list[str], at: int, ends: list[int]) -> bool:
    """The word at ``at`` says what keeps happening or compares, not a change (_HABIT_BEFORE,
    _WHENEVER, _COMPARATIVE_BEFORE)."""
    if at and words[at - 1] in _HABIT_BEFORE:
        return True
    after = words[at + 1] if at + 1 < len(words) else ""
    before = words[at - 1] if at else ""
    if after == "than" or before in _COMPARATIVE_BEFORE or before[:1].isdigit():
        return True  # "reads three degrees lower than it is": a comparison, not a change
    word = words[at]
    present = word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3
    if not present:
        return False
    start = max((i + 1 for i in ends if i < at), default=0)
    stop = next((i + 1 for i in ends if i >= at), len(words))
    return any(w in _WHENEVER for w in words[start:stop])


# --- Parsed statements -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Clause:
    words: frozenset[str]
    negation: str  # the first negation cue as written, "" when the clause is positive


@dataclass(frozen=True)
class _Parsed:
    norm: str
    words: frozenset[str]
    quantities: tuple[Quantity, ...]
    negations: tuple[str, ...]
    clauses: tuple[_Clause, ...]
    state_cues: tuple[str, ...]
    surface: dict[str, str] = field(compare=False, hash=False)
    subject: frozenset[str] | None = None  # content words before the first verb
    anchor: str = ""  # the stem of that verb
    named: bool = False  # the subject is one name ("tom is allergic to cats")
    head: str = ""  # the subject's head noun: "lamp" in "the office lamp"
    changes: tuple[_Change, ...] = ()  # what it says changed ("slipped to", "handed over to")
    additive: bool = False  # "too", "also", "as well": it adds to what was said, never replaces

    @property
    def plain_words(self) -> frozenset[str]:
        """Content words without the quantity tokens: the statement's subject."""
        return self.words - {q.token for q in self.quantities}


@lru_cache(maxsize=4096)
def _parse(text: str) -> _Parsed:
    norm = normalise(text)
    tokens = _tokenise(norm)
    clauses = []
    for part in _CLAUSE_SPLIT.split(norm):
        words = _tokenise(part).words
        if words:
            cue = _NEGATION.search(part)
            clauses.append(_Clause(words, cue.group(0) if cue else ""))
    subject, anchor, named, head = _subject_and_anchor(norm)
    changes = _changes_in(norm)
    return _Parsed(
        norm=norm,
        words=tokens.words,
        quantities=tokens.quantities,
        negations=tuple(m.group(0) for m in _NEGATION.finditer(norm)),
        clauses=tuple(clauses),
        state_cues=tuple(m.group(0) for m in _STATE_CHANGE.finditer(norm)),
        surface=dict(tokens.surface),
        subject=subject,
        anchor=anchor,
        named=named,
        head=head,
        changes=changes,
        additive=bool(_ADDITIVE.search(norm)),
    )


# --- What a statement is about: its subject, before its first verb ---------------------------

#: Words that open a statement's predicate: auxiliaries, copulas and modals.
_AUXILIARIES = _word_set(
    """
    is are was were be been am isn't aren't wasn't weren't has have had hasn't haven't does do
    did doesn't don't didn't can could will would should must may might shall can't cannot
    won't wouldn't shouldn't mustn't needs need keeps gets got used
    """
)
#: Verbs common in household, team and coding statements, as the stems their forms share.
_VERBS = frozenset(
    _stem(word)
    for word in _word_set(
        """
    accept add allow answer appear arrive ask back bark beep begin belong block boil break
    bring build buy call carry catch change charge check chirp clean clear close come commit
    compile connect contain control cook cost cover crash cut dance deploy depend die dim
    disconnect display drain draw dream drink drive drop dry eat empty enable end enjoy
    exclude expect expire face fail fall feed feel fetch fill find finish fit fix flash flicker
    float flood follow forbid forget freeze get give go grow handle hang hate head hear heat
    help hide hit hold host hum ignore include install jam join keep kick knock know land last
    lead leak learn leave let lie like limit listen live load lock look lose love maintain make
    manage mean meet merge migrate miss mount move need open own pass pay pick place plan play
    plug point power prefer print pull push put reach read reboot receive record refer reject
    release rely remember remove render rent replace report require reset respond rest retire
    return ring rise run save say schedule see sell send serve set share shower shut sing sit
    sleep slow smell snore sort speak spend stand start stay stick stop store stream study
    support swim switch take talk teach tell test think throttle throw time train travel
    trigger trip turn understand unlock update upload use vacuum visit wait wake walk want warm
    wash watch water wear win work worry write permit forbid sign review skip cut push attend
    report target cache protect lift ban approve merge reject host send block measure paint
    repaint weigh cost fit hang chair hand slip postpone delay reschedule extend raise lower
    increase decrease reduce upgrade downgrade migrate relocate redirect transfer resize swap
    quit cancel expire resign grow bump step mow organise organize coordinate cover arrive
    renew practise practice train cycle swim bake coach volunteer knit hike commute garden
    grow collect feed visit drive attend support sing rehearse foster adopt rent own happen
    occur sleep start finish close open
    """
    )
)
_NOT_VERB_AFTER = _word_set(
    "the a an this that these those his her their our its your my every each some no any "
    "which what whose of for to in on at by with from into"
)
_IMPERATIVE_OPENERS = _word_set(
    "never always don't dont do please only avoid make remember ask stop keep use let try"
)
_WORD = re.compile(r"[^\W_][\w'./:%°-]*")


def _subject_and_anchor(norm: str) -> tuple[frozenset[str] | None, str, bool, str]:
    """The content words before the statement's first verb, and that verb's stem.

    "ollie's alarm goes off at 6:45" -> ({"ollie", "alarm"}, "go", False): the verb is the first
    auxiliary, or the first known verb not straight after a determiner or preposition (so
    "the lead" and "for heating" stay nouns); the flag says the subject is one name. (None,
    "", False) when the statement opens with its
    verb (an imperative rule) or has none that is known: then the subject is unknown and
    never tells two statements apart.
    """
    words = [w.strip(".'-") for w in _WORD.findall(norm)]
    words = [w for w in words if w]
    # "the car charger's tariff": a possessive names the subject, it is never its verb
    possessive = {i for i, w in enumerate(words) if w.endswith("'s") and len(w) > 4}
    words = [w[:-2] if w.endswith("'s") else w for w in words]
    if not words or words[0] in _IMPERATIVE_OPENERS:
        return None, "", False, ""
    for index, word in enumerate(words):
        previous = words[index - 1] if index else ""
        # The next word that is not an adverb: "the robot vacuum no longer cleans".
        following = next((w for w in words[index + 1 :] if w not in _SUBJECT_ADVERBS), "")
        is_verb = word in _AUXILIARIES or (
            index not in possessive
            and _stem(word) in _VERBS
            and previous not in _NOT_VERB_AFTER
            and following not in _AUXILIARIES  # "the rate limit is": a noun
            and not (following.endswith("s") and _stem(following) in _VERBS)  # "deploy runs"
            # "the release slipped", "the plan changed": a noun before a verb's past
            and not (following.endswith("ed") and _stem(following) in _VERBS | _CHANGE_VERBS)
        )
        if not is_verb:
            continue
        if index == 0 and word.endswith("s") and word not in _AUXILIARIES:
            continue  # "builds use the -O2 flag": a plural subject, not an imperative
        if index == 0:
            return None, "", False, ""
        before = [w for w in words[:index] if w not in _SUBJECT_ADVERBS]
        subject = _tokenise(" ".join(before)).words
        anchor = _stem(word) if word not in _AUXILIARIES else word.replace("'", "")
        # One bare word before the verb, no determiner, not a plural: a name.
        named = index == 1 and not words[0].endswith("s") and words[0] not in _NOT_VERB_AFTER
        return (subject or None), anchor, named, _head(before)
    # No verb we know: the first content word stands for the subject, so two statements that
    # share a template still differ by what they are about ("the boiler measures 17 cm").
    first = next((w for w in words if w not in _STOPWORDS and w not in _NEGATION_WORDS), "")
    if not first:
        return None, "", False, ""
    return _tokenise(first).words or None, "", False, _stem(first.split("_")[-1])


# Between a subject and its verb these say when or how, not what: "tom no longer works".
_SUBJECT_ADVERBS = _word_set(
    "no not longer never always now usually still also often sometimes currently only "
    "already rarely normally generally typically just nowadays actually really so far yet "
    "ever recently finally eventually luckily sadly thankfully"
)
_PREPOSITIONS = _word_set("in on at of for with from by under behind near inside outside to")


def _head(phrase: list[str]) -> str:
    """The head noun of a subject: English puts it last, before any prepositional phrase
    ("the garage fridge", "the fridge in the garage": both "fridge")."""
    before: list[str] = []
    for word in phrase:
        if word in _PREPOSITIONS and before:
            break
        before.append(word)
    content = [w for w in before if w not in _STOPWORDS and w not in _NEGATION_WORDS]
    return _stem(content[-1].split("_")[-1]) if content else ""


def _same_subject(old: _Parsed, new: _Parsed) -> bool:
    """Both are about the same thing, as far as their subjects say: one subject's words hold
    the other's ("the garage fridge" / "the fridge"), or one subject is unknown."""
    if old.subject is None or new.subject is None:
        return True
    if old.head and new.head and old.head != new.head:
        return False  # "the office" is not "the office lamp"
    return old.subject <= new.subject or new.subject <= old.subject


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _quote(words: list[str], surface: dict[str, str], limit: int = 3) -> str:
    return ", ".join(f"'{surface.get(w, w)}'" for w in words[:limit])


# --- Contradiction checks: each returns a reason, or "" when it does not apply ---------------


def _number_change(old: _Parsed, new: _Parsed, *, any_overlap: bool = False) -> str:
    """Same subject, same unit, a different value: "bedroom at 19" -> "bedroom at 21".
    ``any_overlap``: the caller knows they are about one thing (a change said of it), so the
    rest of their words need not agree."""
    if new.additive:
        return ""
    old_only = [q for q in old.quantities if q not in new.quantities]
    new_only = [q for q in new.quantities if q not in old.quantities]
    pair = next(
        ((q, r) for q in old_only for r in new_only if _same_kind(q, r, loose=any_overlap)),
        None,
    )
    if pair is None:
        return ""
    if not any_overlap and _jaccard(old.plain_words, new.plain_words) < STRONG_OVERLAP:
        return ""
    return f"same subject, {pair[0].text} \u2192 {pair[1].text}"


_DAY_UNITS = ("date", "#")


def _same_kind(old: Quantity, new: Quantity, *, loose: bool = False) -> bool:
    """Two values of one kind: the same unit, or a date and a day of the month ("on 12
    march" and "on the 14th"), or a month and a date of another month; ``loose`` (a change is
    said of the thing): a bare number and a time too ("moved to 8" from "at 7:30")."""
    if old.unit == new.unit:
        return True
    if {old.unit, new.unit} == {"time", ""} and not loose:
        return False
    units = {old.unit, new.unit}
    if units == {"date", "month"}:  # "in june" and "on 14 june" agree; "on 14 july" does not
        return (old.value if old.unit == "month" else new.value) != (
            new.value if new.unit == "date" else old.value
        )[:2]
    return units <= {"date", "#"} or units == {"time", ""}


_PARTICLE_WORDS = frozenset(_word_set("on off up down in out over back"))


def _state_change(old: _Parsed, new: _Parsed) -> str:
    """The new statement says something changed ("moved", "sold", "no longer") about the
    old one's subject."""
    cues = [c for c in new.state_cues if c not in old.state_cues]
    if not cues:
        return ""
    cue_words = frozenset().union(*(_tokenise(c).words for c in cues))
    old_words, new_words = old.words - cue_words, new.words - cue_words
    # "on", "off", "in" shared say nothing of what both are about.
    shared = old_words & new_words - _PARTICLE_WORDS
    smaller = min(len(old_words), len(new_words))
    if len(shared) < STATE_CHANGE_MIN_SHARED or len(shared) / smaller < STATE_CHANGE_OVERLAP:
        return ""
    return f"state change: '{cues[0]}'"


def _best_clause(clause: _Clause, others: tuple[_Clause, ...]) -> tuple[float, _Clause | None]:
    """The most similar clause; on a tie, one with the same polarity (so no false flip)."""
    best: tuple[float, bool, _Clause | None] = (0.0, False, None)
    for other in others:
        key = (_jaccard(clause.words, other.words), bool(other.negation) == bool(clause.negation))
        if key > best[:2]:
            best = (*key, other)
    return best[0], best[2]


def _negation_flip(old: _Parsed, new: _Parsed) -> str:
    """A clause of one matches a clause of the other but only one of them is negated."""
    for ours, theirs in ((old.clauses, new.clauses), (new.clauses, old.clauses)):
        for clause in ours:
            score, match = _best_clause(clause, theirs)
            if match is None:
                continue
            if bool(clause.negation) != bool(match.negation) and score >= STRONG_OVERLAP:
                return f"differs by a '{clause.negation or match.negation}'"
    return ""


_OPPOSITE_STEMS = tuple(
    (x, y, _stem(x), _stem(y))
    for first, second in _OPPOSITES
    for x, y in ((first, second), (second, first))
)


def _opposite_state(old: _Parsed, new: _Parsed) -> str:
    """An opposite state ("off" where the old said "on", ...) about the same subject."""
    for x, y, sx, sy in _OPPOSITE_STEMS:
        swapped = {sx, sy} & old.words == {sx} and {sx, sy} & new.words == {sy}
        if swapped and _jaccard(old.words - {sx}, new.words - {sy}) >= STRONG_OVERLAP:
            return f"opposite state: '{x}' \u2192 '{y}'"
    return ""


def _already_said(old: _Parsed, new: _Parsed) -> bool:
    """Every clause of ``new`` sits inside one clause of ``old`` with the same polarity.

    Clause by clause, so "Sarah is a light sleeper" is already said by "Sarah is a light
    sleeper. Nothing in the hallway should go above 15% ...", while "the office is downstairs"
    is not said by "the office is upstairs, not downstairs".
    """
    return bool(new.clauses) and all(
        any(
            clause.words <= theirs.words and bool(clause.negation) == bool(theirs.negation)
            for theirs in old.clauses
        )
        for clause in new.clauses
    )


def _denied_before(old: _Parsed, new: _Parsed) -> str:
    """The new statement asserts what a negated clause of the old one denied."""
    for clause in old.clauses:
        if not clause.negation or not clause.words:
            continue
        asserted = any(
            not theirs.negation and clause.words <= theirs.words for theirs in new.clauses
        )
        if asserted and not clause.words <= old.words - clause.words:
            return f"says what the old one denied ('{clause.negation}')"
    return ""


_AUX_ANCHORS = _AUXILIARIES | {"isnt", "arent", "wasnt", "werent"}
# What a statement says no longer holds: "not in the study", "from gitlab", "instead of tea".
_LEFT_BEHIND = re.compile(
    r"(?:(?:^|[,;]|\s-|\bbut)\s*(?:and\s+)?not|\bno longer|\binstead of|\brather than|"
    r"\breplacing|\bin place of)\s+(?P<left>(?:[\w'-]+\s+){0,3}[\w'-]+)"
    # "from gitlab to github": what it moved from ("borrowed from the neighbour" is no change)
    r"|\bfrom\s+(?P<moved_from>(?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:to|into|onto)\b"
)


def _denied(parsed: _Parsed) -> frozenset[str]:
    """The words of a statement's negated clauses."""
    return frozenset().union(*(c.words for c in parsed.clauses if c.negation))


def _left_behind(new: _Parsed) -> frozenset[str]:
    """The words ``new`` says were left behind: after "not", "from", "instead of", …"""
    found: set[str] = set()
    for match in _LEFT_BEHIND.finditer(new.norm):
        found |= _tokenise(match.group("left") or match.group("moved_from")).words
    return frozenset(found)


def _changed(old: _Parsed, new: _Parsed) -> tuple[Verdict, str] | None:
    """The new statement says the old one's value, date, place, holder or state changed.

    It names a change the old one does not ("slipped to", "handed over to", "moved to",
    "pushed back to", "ran out", "no longer", "now"), about what the old one is about (the
    same subject, or the thing the change moved: "the dentist moved the appointment"), in the
    same slot (the same verb, a number or a date of the same kind, a word of the old value
    said again, a holder passing on what they held). A contradiction when the old value is
    plainly gone (another number or date, "not …", "from …", a holder passing it on, a state
    that ended, a value of the same kind moved); a conflict when the new one says something
    changed but not surely the old value; None when it says nothing changed of it ("too",
    "also", "as well" add, never replace)."""
    if new.additive:
        return None
    said_before = {change.cue for change in old.changes}
    cues = [change for change in new.changes if change.cue not in said_before]
    if not old.subject:
        # Nothing named before the verb ("we moved into a flat on clarence street"): only
        # "not …" of what it said, by a statement that names nothing either, replaces it.
        left = _left_behind(new)
        asserted = old.words - _left_behind(old) - _denied(old)
        gone = frozenset(word for word in asserted & left if len(word) > 2)
        if new.subject is None and gone and not gone & (new.words - left):
            return "contradiction", f"no longer {_quote(sorted(gone), old.surface, 2)}"
        return None
    subject = old.subject
    value = old.words - subject - {old.anchor}
    same_subject = new.subject is not None and _same_subject(old, new)
    # "the conference moved" is of what "zoe is going to lisbon for a conference" holds
    # and "anna's visit moved" of what "sarah's sister anna is visiting on the 20th" holds
    its_thing = bool(
        new.subject
        and not new.named
        and (new.subject <= value or (new.subject <= value | subject and new.subject & value))
    )
    # What the old one asserted and the new one leaves behind (not what both deny).
    asserted = value - _left_behind(old) - _denied(old)
    gone = frozenset(word for word in asserted & _left_behind(new) if len(word) > 2)
    if (same_subject or its_thing) and gone and not gone & (new.words - _left_behind(new)):
        # "the mot is due in may, not april": the old value said to be gone, no cue needed
        return "contradiction", f"no longer {_quote(sorted(gone), old.surface, 2)}"
    if not cues:
        return None
    verbs = [change for change in cues if change.kind not in ("adverb", "ending")]
    moved_it = not old.named and any(
        old.head in change.heads and subject - {old.head} <= new.words for change in verbs
    )
    # "the car's warranty" is what "our car is under warranty" said of the car; "football
    # practice moved" is what "ollie has football practice on thursdays" holds
    of_its_value = bool(new.subject and subject < new.subject and new.subject - subject <= value)
    # "the council changed bin day to wednesday", "we raised the image service timeout to
    # 60 seconds": what moved holds the old subject, and a value of the same kind changed
    holds_it = any(subject <= change.moved | change.to for change in cues)
    if (its_thing or holds_it) and _number_change(old, new, any_overlap=True):
        return "contradiction", f"{_number_change(old, new, any_overlap=True)}: '{cues[0].cue}'"
    # what it held changed, said of it in the clause that names it ("the router reboots
    # itself on Sundays; devices dropping off then are expected" changed nothing of the router)
    its_clause = _CLAUSE_SPLIT.split(new.norm, maxsplit=1)[0]
    said_of_it = [change for change in cues if change.cue in its_clause]
    if its_thing and said_of_it and not (same_subject or moved_it or of_its_value):
        # what it held changed, but not surely what it said of it: a person says
        return "conflict", f"may have changed: '{said_of_it[0].cue}'"
    if not (same_subject or moved_it or of_its_value):
        held = [
            change
            for change in verbs
            if change.kind == "handover" and value and value & (change.moved | change.to)
        ]
        if held and subject <= new.words:
            return "contradiction", f"the role passed on: '{held[0].cue}'"
        return None
    changed_value = _number_change(old, new, any_overlap=True)
    if changed_value or gone:
        why = changed_value or f"no longer {_quote(sorted(gone), old.surface, 2)}"
        return "contradiction", f"{why}: '{cues[0].cue}'"
    # What a person said of themselves ends only where the change names it: "i stopped
    # growing tomatoes on the balcony" ends "i grow tomatoes on my balcony", not "i got an
    # allotment".
    if old.named and not any(value & (change.moved | change.to) for change in verbs):
        verbs = []
    kinds = {change.kind for change in cues}
    again = value & (new.words - (new.subject or frozenset()))
    same_verb = old.anchor == new.anchor and old.anchor not in _AUX_ANCHORS
    in_slot = bool(again or same_verb or moved_it or of_its_value)
    first = (verbs or cues)[0].cue
    ended = {change.kind for change in verbs if change.kind in ("handover", "state")}
    if ended and in_slot:
        return "contradiction", f"state change: '{first}'"
    if "ending" in kinds and in_slot and not value <= new.words:
        return "contradiction", f"state change: '{cues[0].cue}'"
    if verbs and in_slot:
        if value <= new.words and not moved_it:
            return None  # every word of the old value said again: nothing of it changed
        return "contradiction", f"a new value: '{first}'"
    if verbs and not old.named:
        return "conflict", f"may have changed: '{first}'"
    if _moved_elsewhere(old, new) or (same_verb and not value <= new.words):
        return "conflict", f"may have changed: '{cues[0].cue}'"
    return None


def says_a_change(text: str, speaker: str = "") -> bool:
    """``text`` says that something changed ("slipped to", "handed over to", "moved to",
    "no longer", "now", "not …"): the statements that may replace one already known."""
    parsed = _parse(wording.canonical(normalise(text), speaker))
    return not parsed.additive and bool(parsed.changes or _left_behind(parsed))


def _news_of(old: _Parsed, new: _Parsed) -> bool:
    """The new one says something changed that the old one did not: never the same thing said
    again, however close their meaning ("we moved the broadband to the 900 plan" is not "the
    broadband is on the 150 plan" in other words)."""
    said_before = {change.cue for change in old.changes}
    return not new.additive and any(c.cue not in said_before for c in new.changes)


def _moved_elsewhere(old: _Parsed, new: _Parsed) -> bool:
    """Both say where it is, and the places differ."""
    here, there = _PLACE.search(old.norm), _PLACE.search(new.norm)
    return bool(
        here
        and there
        and _tokenise(here.group("place")).words.isdisjoint(_tokenise(there.group("place")).words)
    )


_CONTRADICTIONS = (
    _number_change,
    _state_change,
    _negation_flip,
    _opposite_state,
    _denied_before,
)


def compare(old: str, new: str, *, old_speaker: str = "", new_speaker: str = "") -> Comparison:
    """Judge ``new`` against ``old``, checking in this order (the first rule that fits wins).

    Both are first put in one wording (``wording.canonical``: first person becomes the
    speaker, number words become digits, "around the clock" becomes "24/7", a passive with an
    agent becomes active), so wordings of one thing compare as one.

    1. "same": identical once in one wording (and said by the same person when first person).
    2. Different subjects (the words before the first verb, ``_same_subject``): "novel" —
       Ollie's alarm is not Maya's, whatever the numbers — unless a role passed from the old
       subject to the new one ("contradiction": "aisha has taken over the revamp from
       marco"), or both claim one role with no word of change ("conflict": a person settles
       whether "marco leads the revamp" still holds).
    3. "contradiction" about the same subject: a number of the same unit changed
       ("same subject, 19 degrees → 21 degrees"); or the new one carries a state-change cue
       the old one lacks ("state change: 'moved'"; see STATE_CHANGE_OVERLAP); or a clause is
       negated in one and not the other ("differs by a 'not'"); or an opposite state or verb
       ("opposite state: 'accepts' → 'rejects'"); or the new one asserts what the old one
       denied ("the den means the back room, not the playroom" → "the den means the
       playroom").
    4. "refinement": the new one keeps >= REFINEMENT_COVERAGE of the old one's content words
       and adds more.
    5. "same": overlap >= SAME_THRESHOLD with equal negation counts and equal numbers; or
       every clause of the new one (CONTAINED_MIN_WORDS content words at least) already sits
       inside a clause of the old one with the same polarity. Statements that differ by a
       "not" are therefore never "same".
    6. "conflict": the same subject and the same one-valued slot (what something means, is
       called, where it is kept, who leads it) with another value and no cue: the old one may
       be replaced, and only a person can say.
    7. "related": overlap >= RELATED_THRESHOLD; otherwise "novel".

    Direction matters: "refinement" and the state-change cue are read from ``new``.
    """
    a = _parse(wording.canonical(normalise(old), old_speaker))
    b = _parse(wording.canonical(normalise(new), new_speaker))
    if a.norm == b.norm:
        return Comparison("same", 1.0, "identical once normalised", could_be_same=True)
    similarity = round(_jaccard(a.words, b.words), 3)
    changed = _changed(a, b)
    if not _same_subject(a, b):
        if changed:
            return Comparison(changed[0], similarity, changed[1])
        other = _other_subject(a, b, similarity)
        if other.could_be_same and _news_of(a, b):
            return Comparison(other.verdict, other.similarity, other.reason)
        return other
    for check in _CONTRADICTIONS:
        reason = check(a, b)
        if reason:
            return Comparison("contradiction", similarity, reason)
    if changed:
        return Comparison(changed[0], similarity, changed[1])

    added = sorted(b.words - a.words)
    # A refinement keeps what the old one said of its subject: "it has a garden" names
    # nothing a longer statement could be keeping.
    grows = len(a.words) >= CONTAINED_MIN_WORDS and len(b.words) > len(a.words)
    grows = grows and a.subject is not None
    if grows and len(a.words & b.words) / len(a.words) >= REFINEMENT_COVERAGE:
        return Comparison("refinement", similarity, f"adds {_quote(added, b.surface)}")

    same_values = set(a.quantities) == set(b.quantities)
    same_polarity = len(a.negations) == len(b.negations)
    if same_polarity and similarity >= SAME_THRESHOLD and same_values:
        return Comparison("same", similarity, "same content words, said another way", True)
    if len(b.words) >= CONTAINED_MIN_WORDS and _already_said(a, b):
        return Comparison("same", similarity, "already said by the old statement", True)

    slot = _changed_subject(a, b) or _one_valued_slot(a, b) or _swapped_value(a, b, similarity)
    if slot:
        return Comparison("conflict", similarity, slot)
    could_be_same = (
        same_values and same_polarity and not _is_swap(a, b, similarity) and not _news_of(a, b)
    )
    shared = sorted(a.words & b.words)
    if shared and similarity >= RELATED_THRESHOLD:
        return Comparison(
            "related", similarity, f"shares {_quote(shared, b.surface)}", could_be_same
        )
    return Comparison("novel", similarity, "nothing in common", could_be_same)


def about_one_thing(old: str, new: str, *, old_speaker: str = "", new_speaker: str = "") -> bool:
    """Both statements name what they are about, and it is the same thing ("the garage
    fridge" / "the fridge"): not a guess from one that names nothing."""
    a = _parse(wording.canonical(normalise(old), old_speaker))
    b = _parse(wording.canonical(normalise(new), new_speaker))
    return a.subject is not None and b.subject is not None and _same_subject(a, b)


#: What holding a role says: a verb of holding ("marco leads the revamp"; "in charge of" and
#: "responsible for" are "leads" in one wording), or a role's name ("gemma is the treasurer").
_ROLE_VERBS = frozenset(
    _stem(w)
    for w in _word_set(
        "lead own manage head chair run maintain look handle organise organize coordinate "
        "cover host mind do mow answer"
    )
)
_ROLE_NOUNS = frozenset(
    _stem(w)
    for w in _word_set(
        "lead owner manager head chair chairperson treasurer secretary contact coordinator "
        "organiser organizer captain maintainer keeper admin rep representative director "
        "president editor"
    )
)


def _holds_a_role(parsed: _Parsed) -> bool:
    return parsed.anchor in _ROLE_VERBS or bool(parsed.words & _ROLE_NOUNS)


#: Verbs whose object has one holder at a time: a project has one lead, a word one meaning.
_ONE_HOLDER = frozenset(_stem(w) for w in _word_set("lead own manage head chair run maintain"))
_ONE_VALUE = frozenset(
    _stem(w) for w in _word_set("mean call refer stand belong live sit report prefer")
)
_PLACE = re.compile(
    r"\b(?:kept|stored|lives?|sits?|sleeps?|works?|hangs?|parked|located|is|are) "
    r"(?:(?:now|still|usually|upstairs|downstairs|kept|stored|back) )*(?:in|on|at|under|"
    r"behind|beside|inside|above|below|next to|near) (?:the )?(?P<place>.+?)(?: now)?$"
)


#: A swap of at most this many words on each side, in statements at least SWAP_OVERLAP alike,
#: is the same sentence with another value ("signs tokens with RS256" → "with HS256"), not a
#: paraphrase: it is never "same" by meaning, and about one subject it is a conflict to settle.
SWAP_MAX_WORDS = 2
SWAP_OVERLAP = 0.3


def _swapped_value(a: _Parsed, b: _Parsed, similarity: float) -> str:
    """The same subject with a value swapped for another: "" when that is not the case."""
    if a.subject is None or b.subject is None or not _is_swap(a, b, similarity):
        return ""
    if (
        a.named and b.named and a.anchor not in _ONE_VALUE
    ):  # a person or a team holds many: allergies, projects, likes
        return ""
    old, new = sorted(a.words - b.words), sorted(b.words - a.words)
    return f"{_quote(old, a.surface, 2)} became {_quote(new, b.surface, 2)}"


def _is_swap(a: _Parsed, b: _Parsed, similarity: float) -> bool:
    """The same verb with up to SWAP_MAX_WORDS words swapped (another verb is another way
    of saying it, not another value)."""
    old, new = a.words - b.words, b.words - a.words
    return (
        a.anchor == b.anchor
        and similarity >= SWAP_OVERLAP
        and 0 < len(old) <= SWAP_MAX_WORDS
        and 0 < len(new) <= SWAP_MAX_WORDS
    )


_IDENTITY = re.compile(r"\b(?:is|are) (?:the|their|our|his|her) ")


def _holder_denied(a: _Parsed, b: _Parsed, role: frozenset[str]) -> bool:
    """The new one gives the old one's role to another and says it is not the old holder's:
    "bill's son mows the verge now, not bill" after "our neighbour bill mows the verge"."""
    if a.subject is None or not role or not role <= b.words or not _holds_a_role(a):
        return False
    left = _left_behind(b)
    return bool(left) and left <= a.subject


def _other_subject(a: _Parsed, b: _Parsed, similarity: float) -> Comparison:
    """Two statements whose subjects differ: novel, unless one role passed between them."""
    # Both subjects are known: _same_subject holds when either is not.
    assert a.subject is not None and b.subject is not None
    role_a, role_b = a.words - (a.subject or frozenset()), b.words - (b.subject or frozenset())
    handed_over = (
        a.subject is not None
        and a.subject <= b.words
        and _holds_a_role(a)
        and _HANDOVER.search(b.norm)
        and len(role_a & role_b - a.subject) >= 2
    )
    if handed_over or _holder_denied(a, b, role_a):
        return Comparison("contradiction", similarity, "the role passed to someone else")
    same_role = a.anchor and a.anchor == b.anchor and a.anchor in _ONE_HOLDER
    same_role = same_role or (
        a.anchor == b.anchor == "is" and bool(_IDENTITY.search(a.norm) and _IDENTITY.search(b.norm))
    )
    if same_role and role_a == role_b and not (a.subject & b.subject):
        return Comparison("conflict", similarity, "both hold the same role")
    verdict: Verdict = "related" if similarity >= RELATED_THRESHOLD else "novel"
    # The same words in another order ("for benchmarks, build with --release" / "builds need
    # --release for benchmarks") name no other subject: meaning may still find them the same.
    reordered = (
        a.subject is not None
        and b.subject is not None
        and a.subject <= b.words
        and b.subject <= a.words
        and set(a.quantities) == set(b.quantities)
        and len(a.negations) == len(b.negations)
        and not _is_swap(a, b, similarity)
    )
    return Comparison(verdict, similarity, "about something else", could_be_same=reordered)


def _changed_subject(a: _Parsed, b: _Parsed) -> str:
    """The new one says the old one's subject (or its value) changed, sharing little else:
    "the router is in the hallway" → "we moved the router to the office". Likely replaced,
    but with so little in common only a person can say."""
    cues = [c for c in b.state_cues if c not in a.state_cues]
    if not cues or a.subject is None:
        return ""
    value = a.words - a.subject
    if a.subject <= b.words or (value and value <= b.words):
        return f"state change: '{cues[0]}'"
    return ""


def _one_valued_slot(a: _Parsed, b: _Parsed) -> str:
    """The same subject and a one-valued slot (a meaning, a name, a place, a holder) that now
    holds another value, with nothing else said: "" when that is not the case."""
    if a.subject is None or a.subject != b.subject or a.anchor != b.anchor:
        return ""
    if a.anchor in _ONE_VALUE:  # a word has one meaning, a thing one name and one home
        return f"a new value for what it {a.surface.get(a.anchor, a.anchor)}"
    if a.anchor in ("is", "are") and _IDENTITY.search(a.norm) and _IDENTITY.search(b.norm):
        return "the same thing named two ways"
    place_a, place_b = _PLACE.search(a.norm), _PLACE.search(b.norm)
    if place_a and place_b and place_a.group("place") != place_b.group("place"):
        return "kept somewhere else"
    return ""
