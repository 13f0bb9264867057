"""Deep review: read the facts, findings and rules, and propose guesses and findings.

Offline heuristics by default, each deterministic:

- a device with QUIRK_AT_LEAST facts about the same kind of quirk ("drops offline", "triggers by
  itself", "reads high") → "Hall sensor dropping offline briefly is normal — right?";
- a rule you set for a check on a device whose facts say why → "Night motion on Landing motion
  is not a problem because the cat sleeps on the landing — right?";
- a fact taught once, with low confidence and no outcome, for STALE_AFTER → the fact itself,
  asked again ("The loft is used by guests — right?");
- a health note saying a device's battery is at or below BATTERY_LOW_AT % → a low-severity
  "battery low" finding on that device.

Everything proposed goes through ``guesses.propose_guess`` and ``findings.raise_finding``, so
the limits hold whatever this module finds: three open guesses, never one already answered in any
wording, and rules keep findings quiet. At most NEW_GUESSES_PER_RUN guesses are worked out per
run; what is left over is found again by the next run.

When a model is configured it may add up to that many guess statements of its own, through the
same door — asked only while a guess slot is free, and never holding a transaction open across
the call. When the model fails, the offline heuristics' proposals stand alone.

Safe to run twice: a second run finds its guesses pending and its findings already seen.

A Deep review in the background (the Knowledge tab's button, weekly on beat) is an insight run
of kind ``deep_review`` (``DeepReview``), and its row is the lease (``brain/leases.py``): one
running per memory, claimed by a conditional UPDATE (or taken over when its worker is gone),
settled only by the process holding it, and settled as lost by the next start when its worker
is gone.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pydantic
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from brain import leases, llm
from brain.celery import send_on_commit
from brain.words import clauses, counted
from knowledge import statements, visibility
from knowledge.models import Fact, Memory, Subject
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import OPEN_GUESSES_AT_MOST, DeepReview, Finding, Guess, Rule, Severity

logger = logging.getLogger(__name__)

QUIRK_AT_LEAST = 3  # facts about the same quirk on one device before brain calls it normal
STALE_AFTER = timedelta(days=60)
LOW_CONFIDENCE = 0.4  # "low" as taught (knowledge.actions.CONFIDENCE)
BATTERY_LOW_AT = 20  # percent
BATTERY_CHECK = "battery_low"
NEW_GUESSES_PER_RUN = OPEN_GUESSES_AT_MOST
MODEL_TIMEOUT_S = 60.0
# A review makes one model call at most (MODEL_TIMEOUT_S): one not settled in this long has lost
# its worker.
LEASE = timedelta(minutes=15)
LOST = (
    "The review was lost (its worker stopped before it finished); a new one can be started "
    "from the Knowledge tab."
)
MODEL_FACTS_AT_MOST = 200  # the newest live facts the model is shown

NOT_EVIDENCE = (Fact.Kind.JUDGEMENT, Fact.Kind.CORRECTION)  # brain's own arithmetic; answers


@dataclass(frozen=True)
class Quirk:
    name: str
    pattern: re.Pattern[str]
    guess: str  # with {name}


QUIRKS = (
    Quirk(
        "offline",
        re.compile(
            r"\b(?:drop(?:s|ped|ping)? (?:offline|out)|(?:goes|went|going|gone) offline|"
            r"unavailable|disconnect(?:s|ed|ing)?|"
            r"los(?:es|t|ing) (?:its )?(?:connection|signal))\b",
            re.IGNORECASE,
        ),
        "{name} dropping offline briefly is normal",
    ),
    Quirk(
        "false_trigger",
        re.compile(
            r"\b(?:false (?:alarm|trigger|positive)s?|ghost|phantom|"
            r"trigger(?:s|ed|ing)? (?:by itself|on its own|for no reason))\b",
            re.IGNORECASE,
        ),
        "{name} triggering by itself now and then is normal",
    ),
    Quirk(
        "odd_reading",
        re.compile(
            r"\b(?:reads? (?:high|low)|read (?:high|low)|spik(?:e|es|ed|ing)|jump(?:s|ed)? to)\b",
            re.IGNORECASE,
        ),
        "{name} showing an odd reading now and then is normal",
    ),
)
SAID_NORMAL = re.compile(
    r"\b(?:normal|expected|fine|harmless|by design|not a fault|nothing to worry about)\b",
    re.IGNORECASE,
)
BATTERY = re.compile(
    r"\bbatter(?:y|ies)\b\D{0,40}?(\d{1,3})\s?(?:%|percent\b)"
    r"|(\d{1,3})\s?(?:%|percent\b)\D{0,20}?\bbatter(?:y|ies)\b",
    re.IGNORECASE,
)
PLAIN_START = {"the", "a", "an", "our", "my", "it", "its", "it's", "there", "this", "that"}


# The report ----------------------------------------------------------------------------------


@dataclass
class Report:
    """What a deep review did, counted, and in words (``text``)."""

    memory: str
    facts_read: int = 0
    findings_read: int = 0
    rules_read: int = 0
    guesses_asked: int = 0  # open now, on the Findings tab
    guesses_waiting: int = 0  # worked out, waiting for a free slot
    guesses_refused: int = 0  # already asked, pending or answered, in some wording
    findings_raised: int = 0
    findings_quiet: int = 0  # a rule you set keeps it quiet
    findings_seen: int = 0  # already raised or settled since what brain read
    model: str = ""  # what became of asking the model, in words; empty when none is set up
    lines: list[str] = field(default_factory=list)  # one per proposal, for the run's log

    @property
    def guesses_proposed(self) -> int:
        return self.guesses_asked + self.guesses_waiting

    @property
    def text(self) -> str:
        sentences = [
            f"Deep review of {self.memory} read {counted(self.facts_read, 'fact')}, "
            f"{counted(self.findings_read, 'finding')} and {counted(self.rules_read, 'rule')}."
        ]
        guesses = clauses(
            (self.guesses_asked, f"{counted(self.guesses_asked, 'guess', 'guesses')} asked"),
            (self.guesses_waiting, f"{self.guesses_waiting} waiting for a free slot"),
            (
                self.guesses_refused,
                f"{self.guesses_refused} not asked again (already asked or answered)",
            ),
        )
        findings = clauses(
            (self.findings_raised, f"{counted(self.findings_raised, 'finding')} raised"),
            (self.findings_quiet, f"{self.findings_quiet} kept quiet by a rule you set"),
            (self.findings_seen, f"{self.findings_seen} already seen"),
        )
        if guesses:
            sentences.append(f"Guesses: {', '.join(guesses)}.")
        if findings:
            sentences.append(f"Findings: {', '.join(findings)}.")
        if not guesses and not findings:
            sentences.append("Nothing new to ask or raise.")
        if self.model:
            sentences.append(self.model)
        return " ".join(sentences)

    def __str__(self) -> str:
        return self.text


# Running it --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    text: str
    why: str
    subject: Subject | None = None


def run(memory: Memory, *, now: datetime | None = None) -> Report:
    """One deep review of ``memory``. Safe to run twice; each proposal is its own transaction."""
    now = now or timezone.now()
    # A deep review's proposals are the household's: drawn only from what every member reads.
    facts = list(
        Fact.objects.for_memory(memory)
        .readable_by(visibility.household(memory))
        .live(now=now)
        .prefetch_related("subjects")
    )
    rules = list(Rule.objects.for_memory(memory).active(now=now).select_related("subject"))
    report = Report(
        memory=memory.name,
        facts_read=len(facts),
        findings_read=Finding.objects.for_memory(memory).count(),
        rules_read=len(rules),
    )
    candidates = [*_rule_explanations(rules, facts), *_quirks(facts), *_stale(facts, now)]
    budget = NEW_GUESSES_PER_RUN
    for candidate in candidates:
        if budget <= 0:
            break
        budget -= _propose(memory, candidate, report)
    if budget > 0 and DEEP_REVIEW.configured(memory):
        for candidate in _ask_the_model(memory, facts, rules, report):
            if budget <= 0:
                break
            budget -= _propose(memory, candidate, report)
    for subject, fact, percent in _low_batteries(facts):
        _raise_battery_low(memory, subject, fact, percent, report)
    return report


def start(*, memory: Memory, by=None) -> DeepReview:
    """Start a Deep review in the background, unless one is already running for this memory
    (that one is returned); one whose worker is gone is settled as lost first."""
    leases.settle_lost_among(
        DeepReview.objects.filter(memory=memory), DeepReview.State.FAILED, report=LOST
    )
    running = DeepReview.objects.running().filter(memory=memory).first()
    if running is not None:
        return running
    review = leases.start(DeepReview, lease=LEASE, memory=memory, requested_by=by)
    if review is None:  # another request won the partial unique index
        return DeepReview.objects.running().get(memory=memory)
    send_on_commit("review.tasks.deep_review", review.pk)
    return review


def execute(review_id: int) -> DeepReview | None:
    """The task's body (``leases.drive``): claim the review, run it and keep its report. Safe
    to run twice: a review already settled, held by a living process, or gone is left alone;
    one whose worker is gone is taken over."""
    return leases.drive(REVIEWS, review_id)


def _work(review: DeepReview) -> None:
    report = run(review.memory)
    leases.finish(review, DeepReview.State.DONE, report=report.text)
    logger.info("%s", report.text)


def _failed(review: DeepReview, error: Exception) -> None:
    leases.finish(review, DeepReview.State.FAILED, report=f"Deep review failed: {error}")


REVIEWS = leases.Kind(
    rows=lambda: DeepReview.objects.select_related("memory"),
    lease=lambda: LEASE,
    work=_work,
    failed=_failed,
    takes_over=True,
)


def _propose(memory: Memory, candidate: Candidate, report: Report) -> int:
    """Offer one guess through the limits; 1 when a guess was worked out (open or waiting)."""
    try:
        proposed = review_guesses.propose_guess(
            memory=memory, text=candidate.text, why=candidate.why, subject=candidate.subject
        )
    except ValidationError as error:
        report.guesses_refused += 1
        report.lines.append(f"Not asked: {' '.join(error.messages)} (“{candidate.text}”)")
        return 0
    report.lines.append(f"{proposed.message} “{candidate.text}”")
    if proposed.guess is None:
        report.guesses_refused += 1
        return 0
    if proposed.guess.state == Guess.State.OPEN:
        report.guesses_asked += 1
    else:
        report.guesses_waiting += 1
    return 1


# Guesses from patterns -----------------------------------------------------------------------


def _devices(fact: Fact) -> list[Subject]:
    return [s for s in fact.subjects.all() if s.kind == Subject.Kind.DEVICE]


def _evidence(fact: Fact) -> bool:
    return fact.kind not in NOT_EVIDENCE and not statements.is_negated(fact.text)


def _quirks(facts: list[Fact]) -> list[Candidate]:
    """A device with QUIRK_AT_LEAST facts about the same quirk, none yet saying it is normal."""
    seen: dict[tuple[int, str], list[Fact]] = defaultdict(list)
    subjects: dict[int, Subject] = {}
    said_normal: set[tuple[int, str]] = set()
    for fact in facts:
        for quirk in QUIRKS:
            if not quirk.pattern.search(fact.text):
                continue
            for device in _devices(fact):
                subjects[device.pk] = device
                if SAID_NORMAL.search(fact.text):
                    said_normal.add((device.pk, quirk.name))
                elif _evidence(fact):
                    seen[(device.pk, quirk.name)].append(fact)
    by_name = {quirk.name: quirk for quirk in QUIRKS}
    found = []
    for (pk, name), evidence in sorted(seen.items()):
        if len(evidence) < QUIRK_AT_LEAST or (pk, name) in said_normal:
            continue
        device = subjects[pk]
        found.append(
            Candidate(
                text=by_name[name].guess.format(name=device.name),
                why=f"{len(evidence)} facts about {device.name} say it does this "
                f"(facts {', '.join(f'#{f.pk}' for f in evidence)}).",
                subject=device,
            )
        )
    return found


def _phrase(check_id: str) -> str:
    words = " ".join(re.split(r"[_.\-\s]+", check_id)).strip()
    return words[:1].upper() + words[1:]


def _clause(text: str) -> str:
    """A fact's text to follow "because": no final stop, "The" → "the", names kept."""
    clause = text.strip().rstrip(".!")
    first = clause.split(" ", 1)[0].lower()
    return clause[:1].lower() + clause[1:] if first in PLAIN_START else clause


def _rule_explanations(rules: list[Rule], facts: list[Fact]) -> list[Candidate]:
    """A rule on a device, and a fact about that device that talks about what the check saw."""
    found = []
    for rule in rules:
        if rule.subject is None or rule.scope not in (Rule.Scope.SENSOR, Rule.Scope.DEVICE):
            continue
        phrase = _phrase(rule.check_id)
        if review_findings.PROTECTED_WORDS.search(phrase):
            continue  # leaks, smoke, gas and freezing are never explained away
        # What the check saw, less the device's own name: "night", not "motion".
        words = statements.content_words(phrase) - statements.content_words(
            " ".join(rule.subject.labels)
        )
        related = [
            (len(words & statements.content_words(fact.text)), fact.created_at, fact.pk, fact)
            for fact in facts
            if _evidence(fact) and rule.subject in fact.subjects.all()
        ]
        related = [entry for entry in related if entry[0] > 0]
        if not related:
            continue
        *_, fact = max(related, key=lambda entry: entry[:3])
        found.append(
            Candidate(
                text=f"{phrase} on {rule.subject.name} is not a problem because "
                f"{_clause(fact.text)}",
                why=f"You set a rule ({rule.describe()}), and fact #{fact.pk} may say why.",
                subject=rule.subject,
            )
        )
    return found


def _stale(facts: list[Fact], now: datetime) -> list[Candidate]:
    """Taught once, with low confidence, and nothing has borne it out since: still true?"""
    stale = sorted(
        (
            fact
            for fact in facts
            if fact.kind not in (*NOT_EVIDENCE, Fact.Kind.RULE, Fact.Kind.HEALTH_NOTE)
            and fact.support == 1
            and fact.confidence <= LOW_CONFIDENCE
            and fact.outcome is None
            and fact.successes == fact.failures == 0
            and fact.created_at <= now - STALE_AFTER
        ),
        key=lambda fact: (fact.created_at, fact.pk),
    )
    return [
        Candidate(
            text=fact.text,
            why=f"Taught once, with low confidence, {(now - fact.created_at).days} days ago; "
            f"nothing has borne it out since (fact #{fact.pk}). Is it still true?",
            subject=next(iter(fact.subjects.all()), None),
        )
        for fact in stale
    ]


# Findings from facts -------------------------------------------------------------------------


def _low_batteries(facts: list[Fact]) -> list[tuple[Subject, Fact, int]]:
    """The newest battery health note per device, when it says BATTERY_LOW_AT % or less."""
    newest: dict[int, tuple[Subject, Fact, int]] = {}
    for fact in sorted(facts, key=lambda fact: (fact.created_at, fact.pk)):
        if fact.kind != Fact.Kind.HEALTH_NOTE:
            continue
        match = BATTERY.search(fact.text)
        if match is None:
            continue
        percent = int(match.group(1) or match.group(2))
        for device in _devices(fact):
            if device.entity_id:
                newest[device.pk] = (device, fact, percent)
    return [entry for _, entry in sorted(newest.items()) if entry[2] <= BATTERY_LOW_AT]


def _raise_battery_low(
    memory: Memory, device: Subject, fact: Fact, percent: int, report: Report
) -> None:
    since = Q(last_raised_at__gte=fact.created_at) | Q(settled_at__gte=fact.created_at)
    if (
        Finding.objects.for_memory(memory)
        .filter(check_id=BATTERY_CHECK, entity_id=device.entity_id)
        .filter(since)
        .exists()
    ):
        report.findings_seen += 1  # raised, fixed or answered since brain was told
        return
    raised = review_findings.raise_finding(
        memory=memory,
        check_id=BATTERY_CHECK,
        entity_id=device.entity_id,
        severity=Severity.LOW,
        text=f"{device.name}: battery low ({percent}%)",
    )
    report.lines.append(f"{raised.message} “{device.name}: battery low ({percent}%)”")
    if raised.outcome == "quiet":
        report.findings_quiet += 1
    elif raised.outcome == "again":
        report.findings_seen += 1
    else:
        report.findings_raised += 1


# Asking the model (optional) -----------------------------------------------------------------


class SuggestedGuess(pydantic.BaseModel):
    statement: str = pydantic.Field(
        description="One belief about the home, as a plain statement (not a question)."
    )
    about: str = pydantic.Field(
        "", description="The entity id or name of the device, room or person it is about."
    )
    why: str = pydantic.Field("", description="What in the facts made you think it, briefly.")


class SuggestedGuesses(pydantic.BaseModel):
    guesses: list[SuggestedGuess] = pydantic.Field(default_factory=list)


MODEL_SYSTEM = (
    "You review what a household memory knows about a home. Suggest at most "
    f"{NEW_GUESSES_PER_RUN} beliefs the facts point to but do not say, each one a short plain "
    "statement the household can confirm or reject with a yes or no. Never suggest anything "
    "already answered, never a question, and nothing about a person's health, sleep or "
    "whereabouts. Never suggest that a leak, smoke, gas or freezing alarm is normal."
)
DEEP_REVIEW = llm.Task(
    "deep_review", MODEL_SYSTEM, max_tokens=1000, timeout=MODEL_TIMEOUT_S, output=SuggestedGuesses
)


def _ask_the_model(
    memory: Memory, facts: list[Fact], rules: list[Rule], report: Report
) -> list[Candidate]:
    """Up to NEW_GUESSES_PER_RUN statements from the model; none when no slot is free."""
    if Guess.objects.for_memory(memory).open().count() >= OPEN_GUESSES_AT_MOST:
        report.model = f"The model was not asked: {OPEN_GUESSES_AT_MOST} guesses are open."
        return []
    newest = sorted(facts, key=lambda fact: (fact.created_at, fact.pk))[-MODEL_FACTS_AT_MOST:]
    answered = Guess.objects.for_memory(memory).settled().order_by("-answered_at")[:50]
    prompt = "\n".join(
        [
            "Facts:",
            *(f"- {fact.text}" for fact in newest),
            "",
            "Rules the household set:",
            *(f"- {rule.describe()}" for rule in rules),
            "",
            "Already answered (do not suggest again):",
            *(f"- {guess.text} ({guess.state})" for guess in answered),
        ]
    )
    try:
        answer = DEEP_REVIEW.complete(prompt, memory=memory)
    except llm.LLMError as error:
        report.model = f"The model could not be used ({error}); the offline checks ran alone."
        logger.warning("deep review without the model: %s", error)
        return []
    assert answer.parsed is not None  # asked with output=SuggestedGuesses
    suggested = answer.parsed.guesses[:NEW_GUESSES_PER_RUN]
    report.model = f"The model suggested {counted(len(suggested), 'guess', 'guesses')}."
    return [
        Candidate(
            text=item.statement,
            why=(item.why or "Suggested by the model from the facts.")[:300],
            subject=_named(memory, item.about),
        )
        for item in suggested
        if item.statement.strip()
    ]


def _named(memory: Memory, words: str) -> Subject | None:
    if not words.strip():
        return None
    return (
        Subject.objects.as_system("the subject a proposal names")
        .for_memory(memory)
        .named(words)
        .order_by("-present", "pk")
        .first()
    )


def start_every_deep_review() -> list[DeepReview]:
    """Beat: a Deep review of every memory that is learning (one already running is left to
    finish). Learning off skips a memory: a review proposes what brain would learn."""
    return [start(memory=memory) for memory in Memory.objects.filter(learning=True)]
