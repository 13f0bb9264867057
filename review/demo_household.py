"""The demo household: a year of a real family's teaching, loaded into any memory.

The data is written by hand and committed: the rooms, devices and people in
``memory/fixtures/demo-house.yaml`` and what the family taught in
``memory/fixtures/demo-facts.yaml`` (its header says who they are and how a line is written).
Everything goes through the same actions as every other surface: the registry's sync,
``memory.actions.learn`` (the secret filter and the write gate), the consolidator, the house
checks' ``raise_finding`` and ``propose_guess``. Only the clock is the demo's own: each moment is
dated ``days_ago`` back, so the House page's chart and "learned this week" read like a year.

The rules:

- Into any memory, twice without harm. A line already in the memory (any status: a corrected
  line is still there, superseded) is not taught again, a moment's source is found again by its
  reference, a finding already raised for that check and device is left alone, and an open or
  answered guess is not offered again. A second load adds nothing.
- No race with a running worker. ``make run`` may be filing this memory while the demo teaches
  it (early filing starts a pass on the worker at 20 waiting lines). The demo never edits the
  document on top of a generation it read earlier; it files by asking for passes like every
  surface and, when a pass is already running elsewhere, waits for that one to finish before
  asking again, so it can neither fail with DocumentChanged nor leave its lines unfiled.
- Corrections say what they correct, and the gate must agree: ``replaces`` names the earlier
  line, and the load reports any correction whose verdict retired something else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone

from brain.words import plural
from knowledge import registry
from knowledge.actions import expire_facts
from knowledge.models import Fact, Memory, Observation, Source, Subject
from knowledge.read_layer import SYSTEM
from memory import actions, brief, consolidator, taught
from memory.models import Brief, ConsolidationRun, InboxItem, Origin
from memory.taught import Statement
from review import counts
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import Event, Finding

FIXTURES = Path(__file__).resolve().parents[1] / "memory" / "fixtures"
HOUSE = FIXTURES / "demo-house.yaml"
FACTS = FIXTURES / "demo-facts.yaml"
REFERENCE = "demo-household/{index}"
# A pass running elsewhere (the worker's) is waited for at most its own deadline and a margin.
WAIT_FOR_PASS_S = 30.0
POLL_S = 0.5
MAX_PASSES = 50  # each files everything waiting; more than a few means something is wrong
SOURCE_KINDS = {
    Origin.VOICE: Source.Kind.CONVERSATION,
    Origin.CHAT: Source.Kind.CONVERSATION,
    Origin.TERMINAL: Source.Kind.TERMINAL,
    Origin.TYPED: Source.Kind.TYPED,
    Origin.INSIGHT: Source.Kind.INSIGHT,
    Origin.STUDY: Source.Kind.STUDY,
}
SOURCE_TITLES = {
    Origin.VOICE: "Voice conversation with {who}",
    Origin.CHAT: "Chat with {who}",
    Origin.TERMINAL: "{who} at the terminal",
    Origin.TYPED: "Typed by {who} on the Knowledge tab",
    Origin.INSIGHT: "Insight run",
    Origin.STUDY: "Study session",
}


@dataclass(frozen=True)
class Line:
    text: str
    replaces: str = ""
    went_wrong: bool = False


@dataclass(frozen=True)
class Moment:
    index: int
    days_ago: int
    via: str
    by: str
    waiting: bool
    lines: tuple[Line, ...]


@dataclass(frozen=True)
class Household:
    teachers: tuple[str, ...]
    moments: tuple[Moment, ...]
    findings: tuple[dict, ...]
    guesses: tuple[dict, ...]

    @property
    def lines(self) -> list[Line]:
        return [line for moment in self.moments for line in moment.lines]

    @property
    def corrections(self) -> list[Line]:
        return [line for line in self.lines if line.replaces]


@dataclass
class Loaded:
    """What one load did, for the command's summary and the tests."""

    memory: Memory
    registry_summary: str = ""
    taught: int = 0
    already_known: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    misjudged: list[str] = field(default_factory=list)
    passes: int = 0
    findings: int = 0
    guesses: int = 0

    def summary(self) -> str:
        """What the load did, with the numbers House then shows (``review.counts``)."""
        counted = counts.for_reader(self.memory, SYSTEM)
        if not self.taught:
            head = f"{self.memory.name}: nothing new, the demo household was already here"
        else:
            head = f"{self.memory.name}: taught {self.taught:,} lines"
            if self.already_known:
                head += f" ({self.already_known:,} were already known)"
        deciding = (
            plural(counted.findings, "finding")
            + " and "
            + plural(counted.guesses, "guess", "guesses")
        )
        return (
            f"{head}; {counted.known:,} facts known, {counted.waiting_to_be_filed:,} waiting to "
            f"be filed; {deciding} wait on you."
        )


def read(path: Path = FACTS) -> Household:
    """The household as written. Raises ValueError naming the moment that is malformed."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    moments = []
    for index, raw in enumerate(document["moments"]):
        via = Origin(raw["via"])
        if via not in SOURCE_KINDS:
            raise ValueError(f"moment {index}: {raw['via']!r} is not a channel the demo uses")
        if via in (Origin.INSIGHT, Origin.STUDY) and raw.get("by"):
            raise ValueError(f"moment {index}: brain's own runs are taught by nobody")
        lines = tuple(Line(item) if isinstance(item, str) else Line(**item) for item in raw["said"])
        moments.append(
            Moment(
                index=index,
                days_ago=int(raw["days_ago"]),
                via=via,
                by=raw.get("by", ""),
                waiting=bool(raw.get("waiting", False)),
                lines=lines,
            )
        )
    return Household(
        teachers=tuple(document["teachers"]),
        moments=tuple(moments),
        findings=tuple(document.get("findings", ())),
        guesses=tuple(document.get("guesses", ())),
    )


def load(
    memory: Memory,
    *,
    household: Household | None = None,
    on_line: Callable[[], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> Loaded:
    """Load the demo household into ``memory`` (made by the caller). Safe to run twice.

    ``on_line`` is called after each line of the file (taught or already known), for progress;
    ``say`` with a line worth telling a person (a correction the gate read otherwise)."""
    household = household or read()
    loaded = Loaded(memory=memory)
    loaded.registry_summary = registry.load_file(memory=memory, path=HOUSE, partial=True).summary()
    people = _teachers(household.teachers)
    now = timezone.now()
    later = [m for m in household.moments if m.waiting]
    for moment in [m for m in household.moments if not m.waiting]:
        _teach(memory, moment, people, loaded, now, on_line, say)
    if loaded.taught:  # a second load leaves what waits from the first waiting
        loaded.passes = file_everything(memory)
    for moment in later:
        _teach(memory, moment, people, loaded, now, on_line, say)
    expire_facts(now=timezone.now(), among=Fact.objects.for_memory(memory))
    loaded.findings = _raise_findings(memory, household.findings, people, now)
    loaded.guesses = _offer_guesses(memory, household.guesses)
    if loaded.taught and not Brief.objects.filter(memory=memory, written_at__date=now.date()):
        brief.write(memory)
    return loaded


def file_everything(memory: Memory, *, wait_s: float | None = None) -> int:
    """File what waits in ``memory``, pass after pass, as every surface asks for one. A pass
    asked for with no worker on it yet (early filing while no worker runs) is run here; one a
    worker is running is waited for rather than raced. Returns how many passes ran here."""
    wait_s = WAIT_FOR_PASS_S + consolidator.deadline_seconds() if wait_s is None else wait_s
    ran = 0
    give_up_at = time.monotonic() + wait_s
    for _ in range(MAX_PASSES):
        if (
            not InboxItem.objects.as_system("the demo household, loaded as the system")
            .for_memory(memory)
            .pending()
            .exists()
        ):
            break
        request = consolidator.request_consolidation(
            memory=memory, trigger=ConsolidationRun.Trigger.CLI, send=False
        )
        if request.started or request.run.claimed_at is None:
            # execute() claims it with a conditional update: a worker that claimed it a moment
            # before keeps it, and this returns at once with the pass still running.
            consolidator.execute(request.run.pk)
            run = ConsolidationRun.objects.get(pk=request.run.pk)
            if run.state != ConsolidationRun.State.RUNNING:
                ran += 1
                if run.state != ConsolidationRun.State.FILED:
                    break  # kept, refused or failed: it says why; the lines stay waiting
                continue
        if time.monotonic() > give_up_at:
            break
        time.sleep(POLL_S)  # a worker is filing this memory: let it finish
    return ran


def _teachers(usernames: tuple[str, ...]) -> dict[str, Any]:
    User = get_user_model()
    people = {}
    for name in usernames:
        user, created = User.objects.get_or_create(
            username=name, defaults={"first_name": name.title()}
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        people[name] = user
    return people


def _teach(
    memory: Memory,
    moment: Moment,
    people: dict,
    loaded: Loaded,
    now: datetime,
    on_line: Callable[[], None] | None,
    say: Callable[[str], None] | None,
) -> None:
    when = now - timedelta(days=moment.days_ago)
    by = people.get(moment.by) if moment.by else None
    known = set(
        Fact.objects.as_system("the demo household, loaded as the system")
        .for_memory(memory)
        .filter(text__in=[taught.clean_fact_text(line.text) for line in moment.lines])
        .values_list("text", flat=True)
    )
    source = None
    for line in moment.lines:
        text = taught.clean_fact_text(line.text)
        if text in known:
            loaded.already_known += 1
        else:
            source = source or _source(memory, moment, by, when)
            learned = actions.learn(
                Statement.typed(
                    memory=memory,
                    text=text,
                    origin=Origin.CORRECTION if line.replaces else moment.via,
                    by=by,
                    outcome=False if line.went_wrong else None,
                    source=source,
                    confidence="high"
                    if moment.via in (Origin.TYPED, Origin.TERMINAL)
                    else "medium",
                )
            )
            loaded.taught += 1
            loaded.verdicts[learned.verdict] = loaded.verdicts.get(learned.verdict, 0) + 1
            _check_verdict(memory, line, learned, loaded, say)
            _date(learned, when)
        if on_line:
            on_line()


def _source(memory: Memory, moment: Moment, by, when: datetime) -> Source:
    """One source per moment, found again by its reference on a second load."""
    who = (by.first_name or by.get_username()) if by is not None else "brain"
    source, _ = Source.objects.as_system("the demo household, loaded as the system").get_or_create(
        memory=memory,
        kind=SOURCE_KINDS[Origin(moment.via)],
        reference=REFERENCE.format(index=moment.index),
        defaults={
            "title": SOURCE_TITLES[Origin(moment.via)].format(who=who),
            "text": "\n".join(line.text for line in moment.lines),
            "created_at": when,
        },
    )
    return source


def _check_verdict(
    memory: Memory, line: Line, learned: actions.Learned, loaded: Loaded, say
) -> None:
    expected = "contradiction/refinement" if line.replaces else "novel"
    if line.replaces:
        old = learned.superseded.text if learned.superseded is not None else ""
        ok = old == taught.clean_fact_text(line.replaces)
    else:
        ok = learned.verdict in ("novel", "different_outcome")
    if not ok:
        message = f"“{line.text}” was read as {learned.verdict}, not {expected}"
        loaded.misjudged.append(message)
        if say:
            say(message)


def _date(learned: actions.Learned, when: datetime) -> None:
    """Put a newly taught line at its moment: the fact, its observation, its waiting item, the
    timeline's event, and the line it superseded closing then. Expiry keeps its lifetime."""
    fact = learned.fact
    shift = timezone.now() - when
    Fact.objects.filter(pk=fact.pk).update(
        created_at=when,
        valid_from=when,
        expires_at=F("expires_at") - shift if fact.expires_at else None,
    )
    Observation.objects.filter(fact=fact).update(created_at=when)
    InboxItem.objects.filter(fact=fact).update(created_at=when)
    Event.objects.filter(memory=fact.memory, data__fact=fact.pk).update(created_at=when)
    if learned.superseded is not None:
        Fact.objects.filter(pk=learned.superseded.pk).update(valid_to=when)


def _raise_findings(memory: Memory, entries: tuple[dict, ...], people: dict, now) -> int:
    raised = 0
    settler = next(iter(people.values()), None)
    for entry in entries:
        subject = (
            Subject.objects.as_system("the demo household, loaded as the system")
            .filter(memory=memory, entity_id=entry["entity_id"])
            .first()
        )
        if Finding.objects.filter(memory=memory, check_id=entry["check"], subject=subject).exists():
            continue
        finding = review_findings.raise_finding(
            memory=memory,
            check_id=entry["check"],
            text=entry["text"],
            severity=entry["severity"],
            entity_id=entry["entity_id"],
        ).finding
        if finding is None:
            continue
        raised += 1
        when = now - timedelta(days=entry["days_ago"])
        if entry["settled"] == "fixed":
            review_findings.mark_fixed(finding=finding, by=settler)
        elif entry["settled"] == "not_a_problem":
            review_findings.not_a_problem(finding=finding, by=settler)
        settled_at = when + timedelta(hours=20) if entry["settled"] != "open" else None
        Finding.objects.filter(pk=finding.pk).update(
            first_raised_at=when, last_raised_at=when, settled_at=settled_at
        )
        Event.objects.filter(memory=memory, data__finding=finding.pk).update(created_at=when)
    return raised


def _offer_guesses(memory: Memory, entries: tuple[dict, ...]) -> int:
    offered = 0
    for entry in entries:
        proposed = review_guesses.propose_guess(memory=memory, text=entry["text"], why=entry["why"])
        if proposed.guess is not None and proposed.message == "Asked.":
            offered += 1
    return offered
