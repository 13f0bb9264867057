"""What a statement is: the kind of fact it is stored as, the section of the memory document it
is filed under, and how long it stays true.

The one classifier. The kind a taught fact is stored as (``kind_for``), the section the offline
composer files a line under (``section_for``) and the voice distillate's order all read
:func:`classify`, so no sentence is a rule to one of them and a note to another. Lexical and
deterministic, standard library only apart from the kind names: the same text always gets the
same answer.

The first of these that applies decides the kind, and the kind the section:

1. rule: an instruction. It starts "never", "always", "don't", "avoid", "make sure", "ask
   before", "stop", "only ever", or "only" and a verb ("only heat the office on weekdays", not
   "only Sarah uses the loft"); or it says "without asking", "must never", "not allowed",
   "should always" anywhere. Filed under Rules.
2. nickname: another name for something ("is called", "we call", "known as", "aka", "short
   for", "means", "refers to"). Filed with what it names.
3. health note: how a device is doing (a battery, a signal, offline, firmware, "keeps dropping
   out", "needs replacing"). Filed under Devices; true for HEALTH_NOTE_LIFETIME.
4. quirk: what looks wrong and is not ("is normal", "not a fault", "reads high", "false
   alarm"). Filed with what it is about.
5. preference: a stated liking ("likes", "prefers", "wants", "would rather", "favourite",
   "can't stand", "I'd like"; never a bare "like", which is as often "looks like"). Filed under
   Preferences.
6. routine: anything else the section cues file under Routines (a time, "every", weekdays).
7. note: the rest, filed where the cues say.

So Rules holds exactly the rules, Preferences exactly the preferences, and a routine is always
under Routines. "Filed with what it is about" is the section cues: People (names, family words,
"is a light sleeper"), Routines (times, "every", weekdays), Devices (entity ids, device words),
Rooms and House (heating, roof, solar, address); the sentence's subject counts extra ("the
garage fridge" is about the fridge) and ties go to the earlier of Routines, People, Devices,
Rooms, House. With no cue at all, House.

Whether a line asks rather than teaches (the ask bar's choice) is :func:`asks` here too.

A correction (a person putting a fact right) is a kind only the caller knows: ``kind_for(text,
correction=True)``. A judgement is written by the arithmetic in review, never read from words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from knowledge.models import Fact
from knowledge.statements import has_verb_form, is_stopword, normalise

HEALTH_NOTE_LIFETIME = timedelta(days=30)  # "the hall sensor's battery is at 12%"
JUDGEMENT_LIFETIME = timedelta(days=30)  # renewed when the arithmetic is written again

SECTIONS: tuple[str, ...] = (
    "House",
    "People",
    "Rooms",
    "Devices",
    "Preferences",
    "Routines",
    "Rules",
)


@dataclass(frozen=True)
class Classification:
    """What a statement is: ``kind`` a ``Fact.Kind`` value, ``section`` one of SECTIONS."""

    kind: str
    section: str


# --- What kind of statement it is (patterns read the normalised, casefolded text) -------------

_RULE_START = re.compile(
    r"^(?:please\s+)?(?:never|always|don't|dont|do not|avoid|only ever|make sure|"
    r"remember to|ask before|ask first|stop)\b"
)
_RULE_ANYWHERE = re.compile(
    r"\b(?:without (?:asking|checking|permission|confirmation)|ask (?:me |us )?(?:before|first)|"
    r"check with (?:me|us)|must (?:never|not|always)|mustn't|should (?:never|always)|"
    r"(?:is|are) never to|(?:is|are) not allowed|not allowed to|never ever)\b"
)
# "Only" and a verb is an instruction; "Only Sarah …", "Only the hall light …" are statements.
# Read on the text as written: a capital after "only" is a name.
_ONLY_AND_A_VERB = re.compile(
    r"^(?i:please\s+)?(?i:only)\s+(?![A-Z0-9])(?!(?i:the|a|an|my|our|your|his|her|their|its|"
    r"this|that|these|those|one|on|in|at|when|if|after|before|during|for|with|by|to|from|"
    r"we|you|they|he|she|it|i|me|us|them|some|two|three)\b)[a-z]"
)
_NICKNAME = re.compile(
    r"\b(?:means|meant by|is called|are called|we call|call it|calls it|nickname|known as|"
    r"aka|refers to|short for)\b"
)
_HEALTH = re.compile(
    r"\b(?:battery|batteries|signal|offline|unavailable|low on|firmware|needs? (?:replacing|a new)|"
    r"\d+\s?% (?:charge|battery)|dropping out|keeps dropping)\b"
)
_QUIRK = re.compile(
    r"\b(?:quirk|is normal|not a fault|reads? (?:high|low)|false alarm|by itself)\b"
)
_PREFERENCE = re.compile(
    r"\b(?:prefers?|preferred|preference|likes|liked|dislikes?|loves|hates|wants|wanted|"
    r"would rather|favou?rite|can't stand|"
    r"(?:i|we|you|they|would|do|[a-z]+n't|not|also|really|both|all|kids|children|i'd|we'd|"
    r"they'd|you'd) (?:like|love|hate|want|rather))\b"
)


def _as_written(text: str) -> str:
    """``text`` with its case kept: NFKC, straight apostrophes, leading quotes dropped."""
    text = re.sub(r"[\u2018\u2019\u201b\u2032\u00b4`]", "'", unicodedata.normalize("NFKC", text))
    return text.strip().lstrip("\"'(\u201c\u201d ")


def _compared(text: str) -> str:
    """``text`` in the form statements are compared in, from its first word (leading quotes and
    brackets dropped): what the patterns below read."""
    return normalise(text).lstrip("\"'( ")


def _is_rule(norm: str, written: str) -> bool:
    return bool(
        _RULE_START.match(norm) or _RULE_ANYWHERE.search(norm) or _ONLY_AND_A_VERB.match(written)
    )


# Asking, not telling: a question mark; a question word or an auxiliary first ("is the
# freezer on in winter", but not "do not …", an instruction); or a request to be told.
_ASKS = re.compile(
    r"\?$|^(?:what|what's|whats|when|where|where's|who|who's|whom|whose|why|how|how's|which)\b"
    r"|^(?:is|are|was|were|am|do|does|did|can|could|would|will|should|shall|has|have|had)\b"
    r"(?! not\b)|^(?:tell|show|remind) me\b|^(?:any ?one|does anyone) know\b"
)


@lru_cache(maxsize=8192)
def asks(text: str) -> bool:
    """Whether ``text`` asks something (a question, or a request to be told) rather than
    teaches it: "Is the garage freezer off in winter?", "what temperature does Sarah like",
    "tell me about the heat pump" ask; "the garage freezer is off in winter" and "don't
    rename entity ids" (an instruction: a rule) teach. The ask bar decides with it."""
    norm = _compared(text)
    return bool(text.strip().endswith("?") or _ASKS.search(norm))


@lru_cache(maxsize=8192)
def classify(text: str) -> Classification:
    """The kind ``text`` is and the section it is filed under; see the module docstring."""
    norm = _compared(text)
    if _is_rule(norm, _as_written(text)):
        return Classification(Fact.Kind.RULE, "Rules")
    if _NICKNAME.search(norm):
        return Classification(Fact.Kind.NICKNAME, _cued_section(text, norm))
    if _HEALTH.search(norm):
        return Classification(Fact.Kind.HEALTH_NOTE, "Devices")
    if _QUIRK.search(norm):
        return Classification(Fact.Kind.QUIRK, _cued_section(text, norm))
    if _PREFERENCE.search(norm):
        return Classification(Fact.Kind.PREFERENCE, "Preferences")
    section = _cued_section(text, norm)
    return Classification(Fact.Kind.ROUTINE if section == "Routines" else Fact.Kind.NOTE, section)


def kind_for(text: str, *, correction: bool = False) -> str:
    """The kind a fact saying ``text`` is stored as."""
    return Fact.Kind.CORRECTION if correction else classify(text).kind


def section_for(text: str) -> str:
    """The section of the memory document ``text`` is filed under (one of SECTIONS)."""
    return classify(text).section


def expiry_for(kind: str, now: datetime) -> datetime | None:
    if kind == Fact.Kind.HEALTH_NOTE:
        return now + HEALTH_NOTE_LIFETIME
    if kind == Fact.Kind.JUDGEMENT:
        return now + JUDGEMENT_LIFETIME
    return None


# --- Talk, not facts: greetings, thanks, small talk ---------------------------------------------

# Each pattern reads one clause (a sentence cut at commas and semicolons), casefolded, with its
# end punctuation and a leading interjection ("oh", "well", "wow") taken off. A name after a
# greeting or thanks is allowed ("hi sam", "thanks a lot, priya"): up to two words.
_NAME_AFTER = r"(?: [a-z][\w'-]*){0,2}"
_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|heya|howdy|yo|hallo|greetings|morning|evening|afternoon|"
    r"good (?:morning|afternoon|evening|day)|welcome(?: back| home| aboard)?|hey hey|hi again|"
    r"hello again|hey there|hi there|hello there|long time no (?:see|speak|talk))"
    + _NAME_AFTER
    + r"|(?:it'?s |it is |so |really |how )?(?:great|good|nice|lovely|wonderful|fab|brilliant|"
    r"a pleasure) (?:to )?(?:finally )?(?:see|meet|hear from|hear|talk to|speak to|catch up with|"
    r"chat with|have) (?:you|ya|y'all|everyone|you all|you both|you two)(?: again| too| all| both"
    r"| in person| at last)*"
    r"|(?:nice|pleased|glad|great) to meet you(?: too)?|hope you(?:'re| are) (?:well|ok|okay|good)"
    r"|hope (?:you|everyone) (?:had|has|is having) a (?:good|great|nice|lovely) \w+"
    r"|thanks for (?:joining|coming|having me|inviting me))$"
)
_GOODBYE = re.compile(
    r"^(?:(?:bye|goodbye|bye bye|bye for now|see you|see ya|see you later|see you soon|"
    r"see you then|see you tomorrow|see you around|see you next \w+|take care|talk soon|"
    r"talk later|talk to you (?:soon|later|tomorrow)|speak soon|catch you later|later|night|"
    r"good ?night|night night|until next time|all the best|have a (?:good|great|nice|lovely) "
    r"(?:one|day|evening|night|weekend|week|time|trip|holiday))" + _NAME_AFTER + r")$"
)
_THANKS = re.compile(
    r"^(?:(?:thanks|thank you|thank u|thx|ta|cheers|many thanks|much appreciated|"
    r"thanks (?:a lot|so much|very much|a million|again|loads|heaps)|thank you (?:so|very) much|"
    r"thank you again|cheers (?:mate|for that))"
    + _NAME_AFTER
    + r"|(?:thanks|thank you|cheers|grateful) (?:so much |again |a lot )?for .+"
    r"|(?:i |we )?(?:really |so |truly |very )?(?:appreciate|appreciated) (?:it|that|this|you|"
    r"the .+|your .+|all .+|you .+)"
    r"|(?:i'?m |we'?re |i am |we are )?(?:really |so |very |truly )?grateful(?: for .+)?"
    r"|(?:that'?s|you'?re|that is|you are) (?:so |very |really )?(?:kind|sweet|a star|a lifesaver|"
    r"a legend|the best|too kind)(?: of you)?|we owe you(?: one)?|i owe you(?: one)?"
    r"|you'?re welcome|no problem|no worries|any ?time|my pleasure|don'?t mention it|not at all)$"
)
_REACTION_WORDS = (
    r"great|good|nice|awesome|amazing|cool|lovely|wonderful|brilliant|exciting|fantastic|"
    r"terrible|awful|sad|a shame|a pity|too bad|funny|hilarious|interesting|tough|rough|hard|"
    r"fun|impressive|great news|good news|wild|crazy|incredible|unfortunate|perfect|fair|"
    r"fab|fabulous|grand|excellent|horrible|scary|annoying|frustrating|a relief|gorgeous|"
    r"beautiful|delicious|mad|insane|unreal|so cool|so good|a nightmare|(?:a lot|lots) of fun|"
    r"a lot"
)
_SMALL_TALK = re.compile(
    r"^(?:ok|okay|k|sure|yes|yeah|yep|yup|yah|no|nope|nah|right|alright|all right|great|cool|"
    r"nice|awesome|lovely|brilliant|perfect|excellent|wow|oh|ah|aw|aww|hmm|hm|um|uh|ha|haha+|"
    r"hehe|lol|lmao|omg|oh my|oh dear|oh no|oh wow|indeed|exactly|absolutely|definitely|"
    r"of course|totally|true|fair enough|i see|got it|gotcha|makes sense|sounds good|"
    r"sounds great|sounds like a plan|will do|me too|same here|same|agreed|i agree|i know|"
    r"i know right|you too|likewise|really|seriously|no way|good for you|well done|congrats|"
    r"congratulations(?: on .+)?|good luck(?: with .+)?|best of luck(?: with .+)?|"
    r"happy (?:birthday|new year|anniversary|holidays|easter|christmas)|merry christmas|"
    r"bless you|sorry|so sorry|my bad|no rush|no hurry|take your time|fingers crossed|"
    r"go on then|why not|good idea|great idea|what a (?:shame|pity|relief|surprise|day|week)|"
    r"(?:i'?m |so |really |very )?(?:sorry|glad|happy|pleased|thrilled|sad) (?:to hear|for you)"
    r"(?: that| it| about .+)?|good to (?:hear|know)(?: that| it)?|"
    r"(?:that|it|this)(?:'s| is| was| sounds| looks| seems)(?: like)? (?:so |really |very |too |"
    r"pretty |quite |such |absolutely )?(?:a |an )?(?:" + _REACTION_WORDS + r")(?: news| idea| "
    r"plan| to hear| of you| one)?(?: though| indeed| actually| too)?|"
    r"how (?:nice|lovely|exciting|awful|fun|cool|wonderful|sad|great|funny|annoying|rude)|"
    r"(?:i'?m|i am|im|doing|been|all|things are|everything'?s|life'?s|not)? ?(?:really |pretty |"
    r"very |so |quite |not too |not so )?(?:good|great|fine|well|ok|okay|alright|not bad|busy|"
    r"grand|so-so|fab|brilliant|can'?t complain|keeping busy|surviving)(?: thanks?| thank you"
    r"| too| as always| as ever| for asking| thanks for asking| and you)*|"
    r"not (?:much|a lot|a great deal)(?: really)?|nothing much|same old(?: same old)?|"
    r"can'?t wait|you'?ll (?:love|like|enjoy) it|i bet|i can imagine|tell me about it|"
    r"fair play|not yet|me neither|neither do i|nor me|(?:i )?hope so|i think so|i guess|"
    r"i suppose|not really|kind of|sort of|maybe|perhaps|who knows|we'?ll see|never mind|"
    r"no idea|good question|it happens|these things happen|such is life|that'?s life|"
    r"(?:i'?ll|will) try|let'?s see|luckily|thankfully|sadly|unfortunately|honestly|though|"
    r"anyway|you know|as usual|by the way|remember|at last|finally|typical|snap|small world|"
    r"(?:much|so much|a lot) (?:better|worse)|good (?:call|move|shout|one|stuff|work|job)|"
    r"nice (?:one|work|job|progress)|(?:well|fair) done|poor (?:thing|you|\w+)|"
    r"(?:lucky|jammy|clever|brave) (?:you|thing|them|him|her)|(?:just )?in time|just about|"
    r"not long (?:now|to go)|nearly there|almost there|love|mate|dear|darling|hun|pal|buddy|"
    r"guys|folks|everyone|all|both|you two|you lot)$"
)
# A few words with no verb and no number: an exclamation ("Twins!", "Ouch.", "Lovely spot.").
_BARE = re.compile(r"^[a-z][a-z' -]*$")
_MAX_BARE_WORDS = 3
_SMALL_TALK_QUESTION = re.compile(
    r"^(?:and )?(?:how (?:are|r) (?:you|u|ya|things|the kids|you all|you both|you doing|you "
    r"keeping|you getting on|you feeling)(?: doing| keeping| getting on| feeling| today| these "
    r"days| lately)*|how(?:'s| is| has) (?:it going|everything|life|things|work|the family|your "
    r"day|your week|your weekend|your morning|your evening|it been|life treating you|the new \w+|"
    r"everyone|the family|the weather)(?: going| been| treating you| with you)*|"
    r"how (?:have|'ve) you been(?: keeping| doing)?|how(?:'ve| have) things been|"
    r"what(?:'s| is) (?:new|up|going on|the news|happening|new with you|the latest|new on your "
    r"side|been happening)(?: with you| these days| lately| on your side)*|"
    r"what have you been up to(?: lately| recently| these days)?|what are you up to(?: today| "
    r"this weekend)?|how was (?:your |the )?(?:day|weekend|week|trip|holiday|evening|night|"
    r"morning|flight|break|time off)|how did it go|did you have a (?:good|nice|great|lovely) "
    r"(?:time|weekend|day|trip|holiday|break)|how about you|and you|what about you|you|"
    r"you (?:ok|okay|alright|good)|are you (?:ok|okay|alright|well)|anything new|any news|"
    r"all good|all well|everything (?:ok|okay|alright|good)|(?:isn'?t|is) it|right|really|"
    r"you know|know what i mean|remember|guess what|how come|why not|what do you think)$"
)
_INTERJECTION = re.compile(
    r"^(?:(?:oh|ah|aw|aww|wow|well|so|but|and|then|hey|ok|okay|yeah|yes|no|um|uh|hmm|haha+|lol|gosh|"
    r"blimp|blimey|ooh|ohh|oh wow|oh no|oh dear|right|anyway|honestly|seriously)\b[,!.\s]*)+"
)
_CLAUSES = re.compile(r"\s*(?:[,;:]|\s[-\u2013\u2014]\s)\s*")
_TALK_SENTENCES = re.compile(r"(?<=[.!?\u2026])\s+|\n+|(?<=[.!?])(?=[A-Z])")
_TALK_KINDS = (("a greeting", _GREETING), ("thanks", _THANKS), ("a goodbye", _GOODBYE))


def _clause_talk(clause: str, *, said: bool = False) -> str:
    """What kind of talk one clause is ("a greeting", "thanks", "a goodbye", "small talk"),
    or "" when it says something. ``said``: a line of a conversation, where a few words with
    no verb are an exclamation ("Twins!", "Lovely spot.")."""
    whole = clause.strip(" .!?\u2026\"'()")
    text = _INTERJECTION.sub("", whole).strip(" .!?\u2026\"'()")
    if not text:
        return "small talk" if clause.strip(" .!?,\u2026") else ""
    for reason, pattern in _TALK_KINDS:
        if pattern.match(whole) or pattern.match(text):
            return reason
    if _SMALL_TALK.match(text) or _SMALL_TALK_QUESTION.match(text):
        return "small talk"
    if said and _exclamation(whole):
        return "small talk"
    return ""


def _exclamation(text: str) -> bool:
    """A few words with no verb, no number and no name: "twins", "ouch", "lovely spot"."""
    words = text.split()
    return (
        0 < len(words) <= _MAX_BARE_WORDS
        and bool(_BARE.match(text))
        and not any(has_verb_form(word) for word in words)
    )


def _sentence_talk(sentence: str, said: bool = False) -> str:
    """The kind of talk a sentence is when every clause of it is talk; "" otherwise."""
    norm = normalise(sentence)
    clauses = [clause for clause in _CLAUSES.split(norm) if clause.strip(" .!?\u2026")]
    kinds = [_clause_talk(clause, said=said) for clause in clauses] or ["small talk"]
    if not all(kinds):
        return ""
    return next((kind for kind in kinds if kind != "small talk"), "small talk")


def talk_sentences(text: str, *, said: bool = False) -> list[tuple[str, str]]:
    """``text``'s sentences, each with the kind of talk it is ("" when it says something)."""
    parts = [part.strip() for part in _TALK_SENTENCES.split(text.strip()) if part.strip()]
    return [(part, _sentence_talk(part, said)) for part in parts]


@lru_cache(maxsize=8192)
def small_talk(text: str, *, said: bool = False) -> str:
    """Why ``text`` is talk and not a fact — "a greeting", "thanks", "a goodbye" or "small talk"
    (a reaction, an acknowledgement, "how are you?") — or "" when any sentence of it says
    something. "Hi! Great to see you, what's new?" is a greeting; "Thanks, really appreciate
    the support!" is thanks; "Hi Beth! I got the job at the library." says something.
    ``said``: a line of a conversation, where a few words with no verb are an exclamation
    ("Twins!", "Lucky.") too."""
    sentences = talk_sentences(text, said=said)
    if not sentences or any(not kind for _, kind in sentences):
        return ""
    return next((kind for _, kind in sentences if kind != "small talk"), "small talk")


def without_small_talk(text: str) -> str:
    """``text`` without the talk around what it says: the greeting before and the thanks after
    ("Hi Beth! I got the job at the library. Thanks again!" is "I got the job at the
    library."), and a "yes," or a ", remember" at its edges. What is between two statements
    stays as it was said."""
    said = talk_sentences(text)
    kept = [index for index, (_, kind) in enumerate(said) if not kind]
    if not kept:
        return text
    parts = [part for part, _ in said[kept[0] : kept[-1] + 1]]
    parts[0] = _edges_trimmed(parts[0], front=True)
    parts[-1] = _edges_trimmed(parts[-1], front=False)
    return " ".join(parts)


_JOINING = re.compile(r"^(?:and|but|so|then|also)\s+", re.IGNORECASE)
_CLAUSE_SPLIT = re.compile(r"(\s*(?:[,;]|\s[-\u2013\u2014]\s)\s*)")


def _edges_trimmed(sentence: str, *, front: bool) -> str:
    """``sentence`` without the talk clauses at its front ("Yes, the bins go out on
    Tuesdays") or its end ("… between 1 and 1.5 bar, remember"), as it was written."""
    pieces = _CLAUSE_SPLIT.split(sentence)
    clauses, joints = pieces[::2], pieces[1::2]
    if len(clauses) < 2:
        return sentence
    end = sentence.rstrip()[-1] if sentence.rstrip()[-1:] in ".!?" else ""
    if front:
        while len(clauses) > 1 and _clause_talk(normalise(clauses[0])):
            clauses, joints = clauses[1:], joints[1:]
        text = "".join(c + j for c, j in zip(clauses, [*joints, ""], strict=False))
        if text != sentence:  # "much bigger, and it has a garden": "it has a garden"
            text = _JOINING.sub("", text)
        return text[:1].upper() + text[1:]
    while len(clauses) > 1 and _clause_talk(normalise(clauses[-1])):
        clauses, joints = clauses[:-1], joints[:-1]
    text = "".join(c + j for c, j in zip(clauses, [*joints, ""], strict=False)).rstrip(" ,;:")
    return text if text[-1:] in ".!?" else text + end


def is_question(text: str) -> bool:
    """``text`` is a question as written: it ends with a question mark."""
    return text.rstrip(" \"')\u201d").endswith("?")


def only_asks(text: str) -> bool:
    """Every sentence of ``text`` is a question or talk: nothing in it is told."""
    said = talk_sentences(text)
    return bool(said) and all(kind or is_question(part) for part, kind in said)


# --- Which section: cues of what a statement is about ----------------------------------------

# (section, weight, phrases). Weight 3 marks a cue that nearly decides on its own.
_CUES: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("People", 3, (
        "light sleeper", "heavy sleeper", "works from home", "work from home", "wfh",
        "night shift", "shift work", "allergic", "allergy", "asthma", "hard of hearing",
        "deaf", "wheelchair", "pregnant", "vegetarian", "vegan", "birthday", "early riser",
        "night owl", "lives with", "lives here",
    )),
    ("People", 1, (
        "wife", "husband", "partner", "son", "daughter", "kid", "child", "children", "baby",
        "toddler", "teenager", "mum", "mom", "dad", "mother", "father", "parent", "grandma",
        "grandad", "grandpa", "granny", "nan", "nana", "brother", "sister", "guest", "visitor",
        "lodger", "flatmate", "housemate", "roommate", "nanny", "carer", "dog", "cat", "pet",
        "puppy", "kitten", "family", "everyone", "person", "people", "he", "she", "him", "her",
    )),
    ("Routines", 3, ("every", "each morning", "each night", "each evening", "each day",
                     "each week")),
    ("Routines", 2, (
        "weekday", "weekend", "daily", "nightly", "weekly", "monthly", "bedtime", "routine",
        "schedule", "scheduled", "usually", "typically", "go to bed", "goes to bed", "gets up",
        "get up", "wake up", "wakes up", "school run", "leaves for work", "gets home",
        "comes home", "bin day",
    )),
    ("Routines", 1, (
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
        "morning", "evening", "night", "sunrise", "sunset", "dusk", "dawn",
    )),
    ("Devices", 1, (
        "light", "lamp", "bulb", "switch", "smart plug", "plug", "socket", "sensor",
        "motion sensor", "thermostat", "trv", "fridge", "freezer", "fridge-freezer",
        "dishwasher", "washing machine", "washer", "tumble dryer", "dryer", "oven", "hob",
        "cooker", "kettle", "microwave", "tv", "television", "speaker", "soundbar", "sonos",
        "chromecast", "router", "wifi", "wi-fi", "hub", "camera", "doorbell", "lock",
        "smart lock", "blind", "curtain", "shutter", "fan", "extractor", "purifier",
        "humidifier", "dehumidifier", "vacuum", "roomba", "charger", "ev charger", "zigbee",
        "z-wave", "zwave", "mqtt", "esphome", "tasmota", "shelly", "hue", "tado", "nest",
        "alexa", "echo", "homepod", "printer", "nas", "battery", "firmware", "entity",
        "entity_id", "device", "appliance", "automation", "node-red", "integration", "defrost",
        "fault", "brightness", "dimmer", "remote", "button", "valve", "alarm", "smoke alarm",
        "smoke detector", "leak sensor",
    )),
    ("Rooms", 1, (
        "kitchen", "bedroom", "master bedroom", "spare room", "guest room", "bathroom",
        "en-suite", "ensuite", "office", "study", "hallway", "hall", "landing", "stairs",
        "staircase", "garage", "loft", "attic", "basement", "cellar", "living room", "lounge",
        "sitting room", "front room", "dining room", "utility room", "utility", "conservatory",
        "porch", "nursery", "playroom", "toilet", "cloakroom", "wc", "downstairs", "upstairs",
        "garden", "patio", "balcony", "shed", "workshop", "room", "snug",
    )),
    ("House", 2, ("address", "postcode", "built in", "heat pump", "weather compensation")),
    ("House", 1, (
        "heating", "air-source", "ground-source", "boiler", "radiator", "underfloor",
        "hot water", "cylinder", "immersion", "thermal store", "flow temperature", "roof",
        "insulation", "cavity wall", "double glazing", "glazing", "solar", "pv", "inverter",
        "home battery", "tariff", "electricity", "gas", "mains", "water supply", "fuse box",
        "consumer unit", "broadband", "fibre", "storey", "bungalow", "semi-detached",
        "detached", "terraced", "apartment", "house", "property", "epc", "ventilation", "mvhr",
        "chimney", "wood burner", "log burner", "septic", "borehole", "smart meter", "meter",
        "driveway",
    )),
)  # fmt: skip

_CUE_TABLE: dict[str, tuple[str, int]] = {}
for _section, _weight, _phrases in _CUES:
    for _phrase in _phrases:
        _CUE_TABLE.setdefault(_phrase, (_section, _weight))


def _squash(phrase: str) -> str:
    """One key for "air-source", "air source" and "airsource"."""
    return re.sub(r"[\s-]+", "", phrase)


_CUE_BY_SQUASHED = {_squash(phrase): value for phrase, value in reversed(_CUE_TABLE.items())}

_TIME_CUE = (
    r"\b(?:at\s+)?(?:[01]?\d|2[0-3]):[0-5]\d\b"
    r"|\b(?:at\s+)?(?:1[0-2]|0?[1-9])\s?[ap]m\b"
    r"|\bat (?:1[0-2]|[1-9])\b(?!\s*(?:%|°|degrees?|percent|kw|kwh|w\b|watts?|v\b|c\b|f\b))"
)
_SECTION_CUE = re.compile(
    r"(?P<entity>\b[a-z_]{2,}\.[a-z0-9_]*[a-z0-9]\b)"
    r"|(?P<time>" + _TIME_CUE + r")"
    r"|\b(?P<cue>"
    + "|".join(
        re.escape(p).replace(r"\ ", r"[\s-]+").replace(r"\-", r"[\s-]?")
        for p in sorted(_CUE_TABLE, key=len, reverse=True)
    )
    + r")(?:s|es)?\b"
)

_PERSON_VERBS = (
    "is|was|has|had|and|are|likes|like|prefers|wants|works|sleeps|wakes|gets|goes|leaves|"
    "comes|needs|hates|loves|uses|says|takes|does|doesn't|can|can't|will|won't|would|should|"
    "often|usually|always|never|lives|stays|visits|drives|walks|cycles|starts|finishes|plays|"
    "studies|watches|reads|cooks|feeds"
)
_NAME = re.compile(r"\b([A-Z][a-z]+)(?='s\b|\s+(?:" + _PERSON_VERBS + r")\b)")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_NAMES = (
    _words("not no never nothing nobody none nowhere neither nor cannot")
    | {w for phrase in _CUE_TABLE for w in re.split(r"[\s-]+", phrase)}
    | _words(
        "january february march april may june july august september october november december "
        "brain home assistant google amazon apple ikea philips netflix spotify christmas easter "
        "today tonight tomorrow yesterday it this that there everything nothing"
    )
)

# Ties go to the earlier section: a timed habit is a routine before it is a device fact.
_TIE_ORDER = ("Routines", "People", "Devices", "Rooms", "House")
_HEAD_BONUS = 2  # the subject of the sentence decides more than a passing mention
_NAME_WEIGHT = 2
_ENTITY_WEIGHT = 3
_HEAD_JOIN = re.compile(r"(?:'s)?[\s-]*")  # "garage fridge", "sarah's bedroom"


def _is_name(word: str) -> bool:
    return not is_stopword(word) and word not in _NOT_NAMES


def _cue_matches(original: str, norm: str) -> list[tuple[int, int, str, int]]:
    """(start, end, section, weight) for every cue in ``norm``, in order, non-overlapping."""
    found = []
    for match in _SECTION_CUE.finditer(norm):
        if match.lastgroup == "entity":
            found.append((match.start(), match.end(), "Devices", _ENTITY_WEIGHT))
        elif match.lastgroup == "time":
            found.append((match.start(), match.end(), "Routines", 1))
        else:
            section, weight = _CUE_BY_SQUASHED[_squash(match.group("cue"))]
            found.append((match.start(), match.end(), section, weight))
    names = {m.group(1).casefold() for m in _NAME.finditer(_as_written(original))}
    for name in sorted(filter(_is_name, names)):
        for match in re.finditer(rf"\b{re.escape(name)}\b", norm):
            found.append((match.start(), match.end(), "People", _NAME_WEIGHT))
    return sorted(found)


def _head_section(norm: str, matches: list[tuple[int, int, str, int]]) -> str:
    """Section of the sentence's subject: the last cue of the first run of adjacent cues.

    English compounds put the head last: in "the garage fridge" the fridge is the subject.
    """
    if not matches:
        return ""
    head = matches[0]
    for following in matches[1:]:
        if not _HEAD_JOIN.fullmatch(norm[head[1] : following[0]]):
            break
        head = following
    return head[2]


def _cued_section(text: str, norm: str) -> str:
    """The section the cues of what ``text`` is about choose; House when there are none."""
    matches = _cue_matches(text, norm)
    scores = dict.fromkeys(_TIE_ORDER, 0)
    for _start, _end, section, weight in matches:
        scores[section] += weight
    head = _head_section(norm, matches)
    if head:
        scores[head] += _HEAD_BONUS
    best = max(_TIE_ORDER, key=lambda s: (scores[s], -_TIE_ORDER.index(s)))
    return best if scores[best] > 0 else "House"
