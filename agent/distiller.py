"""What the sleep pass makes of raw episodes: propositions that can stand alone as beliefs.

Offline (no model configured), the episode's own sentences are the candidates, each half of
"A; B" on its own, and only a claim that reads the same out of its episode is kept
(``standalone``). A claim is dropped when it

- opens on a pronoun that points outside it ("It happened twice", "They rotate the logs"),
- opens on a conjunction, so it is the second half of a thought ("And then the build passed",
  "Because the disk was full"),
- names something by a demonstrative it does not resolve ("Remounting that volume fixed it",
  "Clearing those caches…"): "this", "these" and "those" always point outside; "that" does
  when a noun follows it, but not as a conjunction ("showed that the disk…", "that the …")
  or a relative pronoun ("the script that rotates logs"),
- or has no verb ("The flaky integration tests"): a noun phrase is a topic, not a claim.

The checks are word lists and word shapes, not a parser: a plural noun followed by more words
("the tests on CI") can pass for a verb. They err towards keeping a claim, and the write gate
still judges every one that is kept.

With a model, it is asked for propositions, in two calls under two prompts: failures are
distilled on their own into "Avoid: X fails when Y" lessons, never merged with successes. Each
proposition names the episodes it came from (only those it was shown count); the same
standalone check guards what the model returns. Any failure of the call (unavailable, timed out,
an answer that is not propositions) raises ``ExtractorFailed``: the pass then writes nothing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import pydantic

from brain import llm
from knowledge.models import Episode

EXTRACT_TIMEOUT_S = 60.0  # one call distils a batch of up to 50 episodes
MAX_TOKENS = 4000


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_PRONOUNS = _set(
    "it its it's they them their theirs he him his she her hers this that these those "
    "which who whom whose such"
)
_CONJUNCTIONS = _set(
    "and but or nor so yet because then also although though while whereas since unless "
    "however therefore thus hence plus otherwise meanwhile afterwards instead"
)
_ALWAYS_DEMONSTRATIVE = _set("this these those")
# After "that", these open a clause, so "that" is a conjunction or a relative pronoun there.
_CLAUSE_OPENERS = _set(
    "the a an it its we they i you he she there this these those all every no some any each "
    "our their his her my your is are was were has have had will would can could should "
    "must may might does do did not never"
)
_REPORTING = _set(
    "say says said show shows showed shown know knew known find found finds notice noticed "
    "mean means meant confirm confirmed confirms ensure ensured ensures check checked checks "
    "verify verified note noted suggest suggests suggested think thought believe believed "
    "assume assumed realise realised realize realized learn learned learnt prove proved "
    "proves turned turns so such"
)
_AUXILIARIES = _set(
    """is are was were be been being am isn't aren't wasn't weren't has have had hasn't haven't
    hadn't does do did doesn't don't didn't can could will would should must may might shall
    can't cannot won't wouldn't shouldn't mustn't needs need keeps kept gets got goes went
    takes took makes made runs ran"""
)
_DETERMINERS = _set(
    "the a an this that these those his her their our its your my every each some no any "
    "of for to in on at by with from into"
)
# Common verbs in their base form ("Deploys take 20 minutes", "Backups run nightly").
_VERBS = _set(
    """take run need use break fail work fix build deploy start stop hang crash time pass
    break finish complete block wait lock leak rotate restart reboot retry cache expire
    return require depend load save send read write open close mount point listen serve
    match miss drop lose keep hold help allow let make get go come see show stay change"""
)
_IRREGULAR_PAST = _set(
    """broke ran went took made sped froze hung fell left lost kept held got came saw wrote sent
    built began stuck spent found gave knew led meant put set cut hit let read said told thought
    brought bought caught taught sold stood understood won woke grew threw drew flew rose chose
    spoke shook forgot paid laid felt slept burnt learnt met shot lit fed fled dug spun struck"""
)
_NOT_VERB_S = ("ss", "us", "is", "ics")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\w.:/%-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(\[]?[A-Z0-9])")
AVOID = re.compile(r"^\s*avoid\b\s*:?\s*", re.IGNORECASE)


class ExtractorFailed(Exception):
    """The model could not distil the batch; the message says why. Nothing was written."""


@dataclass(frozen=True)
class Proposition:
    text: str
    episodes: tuple[Episode, ...]
    failure: bool


def _words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def _verb_shaped(word: str, *, last: bool) -> bool:
    """A word that reads as a verb: an auxiliary, a known verb in any of its forms, a past
    tense, or (not at the end, where a plural noun sits) a third-person -s."""
    if word in _AUXILIARIES or word in _VERBS or word in _IRREGULAR_PAST:
        return True
    if len(word) > 3 and word.endswith("ed"):
        return True
    if word.endswith("s") and (word[:-1] in _VERBS or word[:-2] in _VERBS):
        return True
    return not last and len(word) > 3 and word.endswith("s") and not word.endswith(_NOT_VERB_S)


def _is_verb(words: list[str], index: int) -> bool:
    """Whether the word at ``index`` is a verb in its claim (not the first word: a claim that
    opens on a verb is an instruction, and its verb is not a statement's)."""
    word = words[index]
    if word in _AUXILIARIES:
        return True
    if index == 0 or words[index - 1] in _DETERMINERS:
        return False  # "the failed build", "a run": a noun or an adjective
    return _verb_shaped(word, last=index == len(words) - 1)


def standalone(claim: str, *, lesson: bool = False) -> str:
    """Why ``claim`` does not stand alone as a belief, or "" when it does. ``lesson``: a
    failure lesson written "Avoid: X", whose label is its verb ("avoid deploying without the
    VPN"), so it needs none of its own."""
    words = _words(claim)
    if not words:
        return "empty"
    if words[0] in _PRONOUNS:
        return "opens on a pronoun"
    if words[0] in _CONJUNCTIONS:
        return "opens on a conjunction"
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word in _ALWAYS_DEMONSTRATIVE:
            return f"“{word}” points outside it"
        if word == "that" and index > 0:
            previous = words[index - 1]
            opens_clause = (
                not following
                or following in _CLAUSE_OPENERS
                or following[0].isdigit()
                or _verb_shaped(following, last=index + 1 == len(words) - 1)
            )
            if not opens_clause and previous not in _REPORTING:
                return f"“that {following}” points outside it"
    if not lesson and not any(_is_verb(words, index) for index in range(len(words))):
        return "has no verb"
    return ""


def claims(text: str) -> list[str]:
    """The candidate claims of an episode: its sentences, each half of "A; B" on its own, as
    sentences (first letter capital, a full stop)."""
    found = []
    for sentence in _SENTENCE_END.split(text.strip()):
        for part in sentence.split(";"):
            part = part.strip().rstrip(".!?;:, ").strip()
            if part:
                found.append(part[0].upper() + part[1:] + ".")
    return found


def as_belief(text: str) -> str:
    """A proposition as a belief's text: without an "Avoid:" label (the failure class says
    that), first letter capital, one full stop."""
    text = AVOID.sub("", " ".join(text.split())).strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def offline(episode: Episode) -> tuple[list[Proposition], list[str]]:
    """The claims of one episode that stand alone, and the ones dropped."""
    kept, dropped = [], []
    for claim in claims(episode.text):
        if standalone(claim):
            dropped.append(claim)
        else:
            kept.append(Proposition(claim, (episode,), episode.outcome == "fail"))
    return kept, dropped


# With a model ----------------------------------------------------------------------------------


class _Proposition(pydantic.BaseModel):
    text: str
    episodes: list[int]


class _Answer(pydantic.BaseModel):
    propositions: list[_Proposition]


BELIEFS_SYSTEM = (
    "You distil an agent's raw episodes (things it saw happen, each with an id, when, and "
    "whether it worked) into durable beliefs. Write each belief as one self-contained "
    "proposition: a full sentence that names what it is about (no pronoun or 'that thing' "
    "pointing outside it), true beyond the moment. Merge episodes that say the same thing into "
    "one proposition. Leave out what is not worth remembering; invent nothing. For each "
    "proposition list the ids of every episode it comes from."
)
FAILURES_SYSTEM = (
    "You distil an agent's failed episodes (each with an id and when) into lessons to avoid. "
    "Write each lesson as one self-contained sentence of the form 'Avoid: X fails when Y', "
    "naming what failed and the condition it failed under. Never turn a failure into advice "
    "about what works, and never merge it with a success. Invent nothing. For each lesson list "
    "the ids of every episode it comes from."
)
DISTIL_EPISODES = llm.Task(
    "distil_episodes",
    BELIEFS_SYSTEM,
    max_tokens=MAX_TOKENS,
    timeout=EXTRACT_TIMEOUT_S,
    output=_Answer,
)
# Failures are asked apart, for lessons to avoid, within the same limits.
DISTIL_FAILURES = dataclasses.replace(
    DISTIL_EPISODES, name="distil_failures", system=FAILURES_SYSTEM
)


def _listing(episodes: list[Episode]) -> str:
    return "\n".join(
        f"[{episode.pk}] ({episode.outcome}, {episode.occurred_at:%Y-%m-%d %H:%M}) {episode.text}"
        for episode in episodes
    )


def _ask(episodes: list[Episode], *, failures: bool) -> list[Proposition]:
    try:
        task = DISTIL_FAILURES if failures else DISTIL_EPISODES
        answer = task.complete(f"Episodes:\n{_listing(episodes)}", memory=episodes[0].memory_id)
    except llm.LLMError as error:
        raise ExtractorFailed(str(error)) from None
    shown = {episode.pk: episode for episode in episodes}
    found = []
    assert answer.parsed is not None  # asked with output=_Answer
    for proposition in answer.parsed.propositions:
        cited = tuple(shown[pk] for pk in dict.fromkeys(proposition.episodes) if pk in shown)
        if cited:
            found.append(Proposition(proposition.text, cited, failures))
    return found


def with_model(episodes: list[Episode]) -> tuple[list[Proposition], list[str]]:
    """Propositions for ``episodes``: one call for those that worked or whose outcome is not
    known, one for the failures. Raises ExtractorFailed."""
    found: list[Proposition] = []
    beliefs = [episode for episode in episodes if episode.outcome != "fail"]
    failures = [episode for episode in episodes if episode.outcome == "fail"]
    if beliefs:
        found += _ask(beliefs, failures=False)
    if failures:
        found += _ask(failures, failures=True)
    kept, dropped = [], []
    for proposition in found:
        lesson = bool(AVOID.match(proposition.text))
        if standalone(as_belief(proposition.text), lesson=lesson):
            dropped.append(as_belief(proposition.text))
        else:
            kept.append(proposition)
    return kept, dropped
