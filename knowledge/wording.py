"""One wording for statements that say the same thing differently, before they are compared.

``canonical(text, speaker)`` rewrites a normalised statement so that wordings people use
interchangeably become the same words, and nothing else changes:

- first person is the speaker: "I like the bedroom at 19", said by Sarah, is about Sarah
  ("sarah like the bedroom at 19"), so Tom's "I like it at 21" is about someone else. An
  unknown speaker becomes "someone", which matches nobody by name;
- numbers written as words become digits ("twenty degrees" → "20 degrees", "twenty-one");
- clock phrases become times ("half past six" → "6:30", "seven o'clock" → "7:00");
- phrases with one meaning become one token ("around the clock", "all day and night",
  "non-stop" → "24/7");
- a passive with a named agent becomes active ("the revamp is led by marco" → "marco led
  the revamp"), except after verbs of place, where "by" means beside ("kept by the door"),
  and verbs of change, where the sentence is about what changed ("was replaced by a tado");
- a few synonyms that households use for one thing ("refrigerator" → "fridge", "supposed
  to" → "meant to");
- a question asks the statement it would answer yes to: a tag is dropped ("…, right?",
  "…, isn't it?") and an inverted auxiliary goes back after the subject ("is the fridge in
  the garage meant to run 24/7" → "the fridge in the garage is meant to run 24/7"; "does the
  hall light switch on at 06:10" → "the hall light does switch on at 06:10"). Only
  auxiliaries that never open an instruction count: "do", "have" and the negative ones open
  imperatives too ("don't put the pan in the dishwasher"), so those are left alone. The
  subject ends before the first word that opens a predicate (a participle, an adverb of
  frequency, "a"/"an", "be"/"been"/"being", "meant"/"allowed"/"able"); a question to be with
  none ("is the loft warm") ends its subject before its last word; any other question is
  left as it is, since a wrong subject would compare worse than none.

The output is lower case (the input is already ``statements.normalise``d). Deterministic,
standard library only.
"""

from __future__ import annotations

import re
from functools import lru_cache

UNKNOWN_SPEAKER = "someone"


def _words(text: str) -> tuple[str, ...]:
    """A word list written as one whitespace-separated string."""
    return tuple(text.split())


_UNITS = _words(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SMALL = {word: value for value, word in enumerate(_UNITS)}
_NUMBER_WORD = re.compile(
    r"\b(?P<tens>" + "|".join(_TENS) + r")(?:[\s-](?P<unit>" + "|".join(_UNITS[1:10]) + r"))?\b"
    r"|\b(?P<small>" + "|".join(_UNITS) + r")\b"
    r"|\b(?P<hundred>a|one) hundred\b"
)
# "one" is a pronoun as often as a number ("the blue one"): only before a unit or a noun of
# quantity is it a number. The other small numbers are numbers wherever they stand.
_ONE_AS_NUMBER = re.compile(
    r"^\s*(?:o'?clock|%|percent|per cent|degrees?|hours?|minutes?|days?|weeks?|months?|years?|"
    r"times?|kw|kwh|metres?|meters?|litres?|liters?|gb|mb|request|second|am\b|pm\b)"
)

_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (
            r"\b(?:a)?round the clock\b|\ball day(?:,| and) (?:all )?night\b|\bday and night\b"
            r"|\bnight and day\b|\bnon-?stop\b|\ball day every day\b|\b24 hours a day\b"
            r"|\btwenty-?four seven\b|\b24x7\b|\bconstantly\b|\bcontinuously\b",
            "24/7",
        ),
        (r"\bevery single day\b|\bevery day\b|\beach day\b", "daily"),
        (r"\bevery night\b|\beach night\b", "nightly"),
        (r"\bevery week\b|\beach week\b|\bonce a week\b", "weekly"),
        (r"\bevery month\b|\beach month\b|\bonce a month\b", "monthly"),
        (r"\b(\d{1,2})\s?o'?clock\b", r"\1:00"),
        (r"\b(\d{1,2}(?::\d\d)?) (?:in the (?:evening|afternoon)|at night)\b", r"\1pm"),
        (r"\b(\d{1,2}(?::\d\d)?) in the morning\b", r"\1am"),
        (r"\b(\d+)k\b", r"\g<1>000"),
        (r"\bkilowatt[- ]hours?\b", "kwh"),
        (r"^(?P<who>.+?)(?:'s|') bedtime is (?:at )?", r"\g<who> go to bed at "),
        (
            r"^(?P<boss>\w+) is (?P<report>\w+)'s (?:manager|boss|line manager)\b",
            r"\g<report> reports to \g<boss>",
        ),
        # An attribute named, or its verb: one claim either way.
        (r"^(?P<x>.+?)(?:'s|') rate limit is\b", r"\g<x> allows"),
        (r"^(?P<x>.+?)(?:'s|') capacity is\b", r"\g<x> holds"),
        (r"\b(?:is|are) (\d+ \w+) long\b", r"lasts \1"),
        (r"\b(?:a )?quarter of an hour\b", "15 minutes"),
        (r"\bhalf an hour\b", "30 minutes"),
        (r"\bhalf a minute\b", "30 seconds"),
        (r"\ban hour and a half\b", "90 minutes"),
        (r"\b(?:an|per|a) (hour|minute|second|day|week|month|year)\b", r"per \1"),
        (r"\bhalf past (\d{1,2})\b", r"\1:30"),
        (r"\bquarter past (\d{1,2})\b", r"\1:15"),
        (r"\b([ap])\.m\.?", r"\1m"),
        (r"\bper cent\b|\bpercent\b", "%"),
        (r"\bin charge of\b|\bresponsible for\b|\bthe lead (?:on|for)\b|\bthe owner of\b", "leads"),
        (r"\bat the weekend\b|\bon weekends\b|\bon the weekend\b", "at weekends"),
        (r"\bon weekdays\b|\bduring the week\b", "on weekdays"),
    )
)

_SYNONYMS = {
    "refrigerator": "fridge",
    "television": "tv",
    "telly": "tv",
    "sofa": "couch",
    "mom": "mum",
    "mommy": "mum",
    "mummy": "mum",
    "daddy": "dad",
    "lavatory": "toilet",
    "loo": "toilet",
    "nighttime": "night",
    "favorite": "favourite",
    "color": "colour",
    "gray": "grey",
    "center": "centre",
    "begins": "starts",
    "begin": "start",
    "finishes": "ends",
    "finish": "end",
    "adores": "loves",
    "turns": "switches",
    "turn": "switch",
    "turned": "switched",
    "turning": "switching",
}
_SUPPOSED = (re.compile(r"\bsupposed to\b"), "meant to")
_SYNONYM = re.compile(r"\b(" + "|".join(_SYNONYMS) + r")\b")

_FIRST_PERSON_VERBS = {"m": "is", "ve": "has", "d": "would", "ll": "will"}
_FIRST_PERSON_VERB = re.compile(r"\bi'(m|ve|d|ll)\b")
_FIRST_PERSON = re.compile(r"\b(?:i'm|i've|i'd|i'll|i|me|myself|my|mine)\b")

# Past participles the passive rewrite recognises (regular "-ed" forms are found by shape).
_IRREGULAR_PARTICIPLES = _words(
    "led run kept held built made fed done seen known found paid set put shut read sent "
    "spent told brought bought sold taught written given taken driven ridden chosen broken "
    "worn drawn grown thrown shown caught cut hit won"
)
# After these "by" says where, not who ("kept by the door", "parked by the gate"), or the
# sentence is about what changed, not who changed it ("the thermostat was replaced by a tado").
_KEEP_PASSIVE = frozenset(
    _words(
        "kept stored placed put left parked hung located found mounted installed fitted sat "
        "situated positioned hidden plugged fixed stood replaced swapped sold removed moved "
        "retired cancelled canceled superseded"
    )
)
_PASSIVE = re.compile(
    r"^(?P<object>.+?) (?:is|are|was|were|has been|have been|gets|get|is being|are being) "
    r"(?:(?P<adverb>now|currently|still|usually|always|also) )?"
    r"(?P<verb>\w+ed|" + "|".join(_IRREGULAR_PARTICIPLES) + r") by (?P<agent>[^,;]+?)"
    r"(?P<rest>(?:[,;] .*| (?:since|from|until|on|at|in|every|each|for) .*)?)$"
)


def _number(match: re.Match[str]) -> str:
    if match.group("hundred"):
        return "100"
    if match.group("tens"):
        value = _TENS[match.group("tens")]
        return str(value + (_SMALL[match.group("unit")] if match.group("unit") else 0))
    word = match.group("small")
    if word == "one" and not _ONE_AS_NUMBER.match(match.string[match.end() :]):
        return word
    return str(_SMALL[word])


def _passive_to_active(text: str) -> str:
    match = _PASSIVE.match(text)
    if match is None or match.group("verb") in _KEEP_PASSIVE:
        return text
    adverb = f"{match.group('adverb')} " if match.group("adverb") else ""
    return (
        f"{match.group('agent')} {adverb}{match.group('verb')} {match.group('object')}"
        f"{match.group('rest') or ''}"
    )


# --- Questions: the statement a yes would confirm ---------------------------------------------

_TAG = re.compile(
    r"(?:,| -) (?:right|correct|yeah|isn't (?:it|that (?:right|so))|aren't (?:they|we)|"
    r"doesn't (?:it|she|he)|don't (?:they|we|you)|didn't (?:it|they)|wasn't it|won't it|"
    r"is that (?:right|so)|am i right)$"
)
# Auxiliaries that open a question and never an instruction: "do" and "have" open both ("do the
# bins on friday", "have the boiler serviced"), and a negative one opens instructions ("don't
# put the pan in the dishwasher"), so those are left as they are.
_INVERTED = re.compile(
    r"^(?P<aux>am|is|are|was|were|has|does|did|can|could|will|would|should|must|might) "
    r"(?!not\b)(?P<rest>.+)$"
)
_TO_BE = frozenset(_words("am is are was were"))
_DETERMINERS = frozenset(_words("the a an my our your his her their its this that these those"))
# Words that open a predicate after the subject of an inverted question.
_OPENERS = frozenset(
    _words(
        "a an be been being meant allowed able not usually always still normally really ever "
        "also never often sometimes currently now actually definitely typically generally "
        "mostly supposed"
    )
)
# Words of an -ed or -ing shape that are things, not participles ("the garden shed", "the
# living room", "the hall landing").
_NOT_PARTICIPLES = frozenset(
    _words(
        "bed shed red seed need feed speed weed reed sled hundred embed living dining sitting "
        "washing drawing changing heating ceiling building evening morning wedding parking "
        "lighting landing ring thing spring string king wing ironing something anything "
        "everything nothing pudding railing flooring wiring plumbing cooling dressing swimming "
        "recycling shopping clothing bedding decking awning skirting boxing"
    )
)


def _opens_predicate(word: str) -> bool:
    if word in _OPENERS or word in _IRREGULAR_PARTICIPLES:
        return True
    return len(word) > 4 and word.endswith(("ed", "ing")) and word not in _NOT_PARTICIPLES


def _as_statement(text: str) -> str:
    """A question as the statement it asks (see the module); anything else unchanged."""
    text = _TAG.sub("", text)
    match = _INVERTED.match(text)
    if match is None:
        return text
    aux = match.group("aux")
    words = match.group("rest").split()
    # The subject is at least one word, and two when it starts with a determiner.
    first = 2 if words[0] in _DETERMINERS and len(words) > 2 else 1
    for at in range(first, len(words)):
        if _opens_predicate(words[at]):
            break
    else:
        if aux not in _TO_BE or len(words) < 2:
            return text
        at = len(words) - 1  # "is the loft warm": the last word is what it is
    return " ".join([*words[:at], aux, *words[at:]])


@lru_cache(maxsize=8192)
def canonical(norm: str, speaker: str = "") -> str:
    """``norm`` (already ``statements.normalise``d) in the one wording; see the module."""
    who = (speaker or UNKNOWN_SPEAKER).casefold()
    norm = _as_statement(norm)
    text = _FIRST_PERSON_VERB.sub(lambda m: f"{who} {_FIRST_PERSON_VERBS[m.group(1)]}", norm)
    text = _FIRST_PERSON.sub(who, text)
    text = _NUMBER_WORD.sub(_number, text)
    for pattern, replacement in _PHRASES:
        text = pattern.sub(replacement, text)
    text = _SYNONYM.sub(lambda m: _SYNONYMS[m.group(1)], text)
    text = _SUPPOSED[0].sub(_SUPPOSED[1], text)
    return _passive_to_active(text)
