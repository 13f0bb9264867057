"""Conversations taught through ``learn``, turn by turn, and what the gate did with each line.

``conversations.txt`` holds conversations between two or three people over several sessions
(its header says how they are written): each turn is taught through
``memory.actions.learn`` as a line of a chat, by its speaker (a person of their own), into
one memory that holds every conversation, as a household's memory holds every conversation
it hears. Then every line is scored against its marks:

- refused: learn said it was not kept (talk: a greeting, thanks, a goodbye, small talk; a
  line that only asks). A refused line a question needs is lost.
- merged: the gate said it was known already (verdict same). Right when the line says again
  what its ``=tag`` said and it joined that fact; otherwise wrong, and lost when needed. A
  merge that joins two speakers is counted apart, and of those the ones of two different
  statements (wrong merges across speakers).
- retired: a line's fact is no longer believed at the end. Right when a later line marked
  ``>tag`` changed it; otherwise wrong, and lost when needed.
- changes: a line marked ``>tag`` is caught when the fact it changes is retired or an open
  conflict asks about the two; missed when both stay believed in silence, merged when the
  change was taken for the old statement said again.

Targets (the issue's): no needed statement retired, merged away or refused; no merge across
speakers of two different statements.

``python -m bench.conversations`` (Django set up) prints the figures and every line that went
wrong; :func:`conversations_through_learn` and :func:`conversations_through_the_api` are the
sections ``make bench`` writes.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

CONVERSATIONS_FILE = Path(__file__).with_name("conversations.txt")
BENCH_SLUG = "bench-conversations"


class ConversationsError(ValueError):
    """A line of the conversations file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class Line:
    """One turn: who said it, its words, and its marks (see the file's header)."""

    conversation: str
    session: int
    day: int
    speaker: str
    text: str
    tag: str = ""
    needed: bool = False
    repeats: str = ""  # =tag
    changes: str = ""  # >tag
    number: int = 0  # its line in the file

    @property
    def key(self) -> str:
        """The tag's key, unique across conversations."""
        return f"{self.conversation}:{self.tag}" if self.tag else ""

    def refers(self, tag: str) -> str:
        return f"{self.conversation}:{tag}"


@dataclass(frozen=True)
class Conversation:
    id: str
    people: tuple[str, ...]
    sessions: tuple[tuple[int, tuple[Line, ...]], ...]  # (day, its lines)

    @property
    def lines(self) -> list[Line]:
        return [line for _, lines in self.sessions for line in lines]


_HEAD = re.compile(r"^===\s*(?P<id>[\w-]+):\s*(?P<people>.+)$")
_SESSION = re.compile(r"^---\s*day\s+(?P<day>\d+)\s*$")
_TURN = re.compile(
    r"^(?P<speaker>[A-Z][\w'-]*)(?P<marks>(?:\s+(?:\[[\w-]+\]|\*|[=>][\w-]+))*):\s+(?P<text>\S.*)$"
)
_MARK = re.compile(r"\[(?P<tag>[\w-]+)\]|(?P<needed>\*)|=(?P<repeats>[\w-]+)|>(?P<changes>[\w-]+)")


def load(path: Path | str | None = None) -> list[Conversation]:
    """Every conversation in ``path`` (``conversations.txt`` by default), in file order.

    Raises ConversationsError naming the line: a turn outside a session or by someone the
    conversation does not name, a tag used twice, a mark naming a tag not said before."""
    path = Path(path) if path is not None else CONVERSATIONS_FILE
    found: list[Conversation] = []
    current: dict | None = None
    tags: set[str] = set()

    def close() -> None:
        if current is not None:
            sessions = tuple((day, tuple(lines)) for day, lines in current["sessions"])
            found.append(Conversation(current["id"], current["people"], sessions))

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue

        def fail(problem: str, number: int = number) -> ConversationsError:
            return ConversationsError(f"{path}, line {number}: {problem}")

        if head := _HEAD.match(line):
            close()
            people = tuple(name.strip() for name in head.group("people").split(","))
            current = {"id": head.group("id"), "people": people, "sessions": []}
            continue
        if current is None:
            raise fail("a line before the first conversation")
        if session := _SESSION.match(line):
            current["sessions"].append((int(session.group("day")), []))
            continue
        turn = _TURN.match(line)
        if turn is None:
            raise fail("not a turn (Speaker [marks]: words)")
        if not current["sessions"]:
            raise fail("a turn before the first session")
        if turn.group("speaker") not in current["people"]:
            raise fail(f"{turn.group('speaker')} is not one of {', '.join(current['people'])}")
        marks: dict = {"tag": "", "needed": False, "repeats": "", "changes": ""}
        for mark in _MARK.finditer(turn.group("marks")):
            kind = mark.lastgroup
            assert kind is not None  # each of _MARK's alternatives is a named group
            marks[kind] = True if kind == "needed" else mark.group(kind)
        for kind in ("repeats", "changes"):
            if marks[kind] and f"{current['id']}:{marks[kind]}" not in tags:
                raise fail(f"{marks[kind]} is not a tag said before")
        if marks["tag"]:
            key = f"{current['id']}:{marks['tag']}"
            if key in tags:
                raise fail(f"the tag {marks['tag']} is used already")
            tags.add(key)
        day, lines = current["sessions"][-1]
        lines.append(
            Line(
                conversation=current["id"],
                session=len(current["sessions"]),
                day=day,
                speaker=turn.group("speaker"),
                text=turn.group("text").strip(),
                number=number,
                **marks,
            )
        )
    close()
    return found


# --- Teaching ---------------------------------------------------------------------------------


@dataclass
class Taught:
    """What ``learn`` did with one line."""

    line: Line
    verdict: str  # refused | novel | same | contradiction | refinement | conflict | ...
    reason: str
    fact: int | None = None  # the fact filed, or strengthened
    by: int | None = None  # the person who said it
    target_by: int | None = None  # same: who taught the fact it joined


def _people(conversations: Sequence[Conversation]):
    """A person for each speaker of each conversation: named as they are called, and a
    second person of a name already taken gets the conversation's id after it."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    people: dict[tuple[str, str], object] = {}
    taken: dict[str, str] = {}
    for conversation in conversations:
        for name in conversation.people:
            username = name.casefold()
            if taken.get(username, conversation.id) != conversation.id:
                username = f"{username}-{conversation.id}"
            taken.setdefault(username, conversation.id)
            people[(conversation.id, name)], _ = users.get_or_create(
                username=username, defaults={"first_name": name}
            )
    return people


def teach(memory, conversations: Sequence[Conversation]) -> tuple[list[Taught], float]:
    """Every line of ``conversations`` taught through ``learn`` into ``memory``, as a chat:
    each session is a conversation source, each line cites its turn. Returns what was done
    with each line and the seconds ``learn`` took for all of them."""
    from django.core.exceptions import ValidationError

    from knowledge.models import Fact
    from memory import conversations as kept
    from memory.actions import learn
    from memory.taught import Statement

    people = _people(conversations)
    taught: list[Taught] = []
    seconds = 0.0
    for conversation in conversations:
        for _day, lines in conversation.sessions:
            source = kept.record_conversation(
                memory=memory,
                channel="chat",
                messages=[{"speaker": line.speaker, "text": line.text} for line in lines],
            ).source
            for position, line in enumerate(lines):
                person = people[(conversation.id, line.speaker)]
                started = time.perf_counter()
                try:
                    learned = learn(
                        Statement.said(
                            memory=memory,
                            text=line.text,
                            origin="chat",
                            by=person,
                            source=source,
                            turn=position,
                        )
                    )
                except ValidationError as refused:
                    seconds += time.perf_counter() - started
                    taught.append(Taught(line, "refused", " ".join(refused.messages)))
                    continue
                seconds += time.perf_counter() - started
                target_by = None
                if learned.verdict == "same":
                    target_by = (
                        Fact.objects.as_system("the benchmark reads what it taught")
                        .filter(pk=learned.fact.pk)
                        .values_list("taught_by_id", flat=True)
                        .first()
                    )
                taught.append(
                    Taught(
                        line,
                        learned.verdict,
                        learned.reason,
                        learned.fact.pk,
                        person.pk,
                        target_by,
                    )
                )
    return taught, seconds


# --- Scoring ----------------------------------------------------------------------------------


@dataclass
class Score:
    """The figures of one run (see the module docstring)."""

    turns: int = 0
    statements: int = 0  # lines that said something a question or a later line marks
    needed: int = 0
    refused: Counter = field(default_factory=Counter)  # reason -> lines
    refused_needed: list[Taught] = field(default_factory=list)
    merged: int = 0
    merged_right: int = 0
    merged_wrong: list[Taught] = field(default_factory=list)
    merged_needed: list[Taught] = field(default_factory=list)
    repeats: int = 0  # lines marked =tag
    across_speakers: int = 0  # merges that join two speakers
    across_wrong: list[Taught] = field(default_factory=list)
    retired: int = 0
    retired_right: int = 0
    retired_wrong: list[Taught] = field(default_factory=list)
    retired_needed: list[Taught] = field(default_factory=list)
    changes: int = 0
    changes_caught: int = 0
    changes_retired: int = 0
    changes_asked: int = 0
    changes_missed: list[Taught] = field(default_factory=list)
    changes_merged: list[Taught] = field(default_factory=list)
    conflicts_unasked: list[Taught] = field(default_factory=list)  # conflicts no change marks
    verdicts: Counter = field(default_factory=Counter)

    @property
    def needed_lost(self) -> int:
        return len(self.refused_needed) + len(self.merged_needed) + len(self.retired_needed)

    @property
    def met(self) -> bool:
        return self.needed_lost == 0 and not self.across_wrong


def score(taught: Sequence[Taught]) -> Score:
    """Score what was taught against the marks, reading the facts as they are now."""
    from knowledge.models import Conflict, Fact

    facts = Fact.objects.as_system("the benchmark reads what it taught")
    ids = {t.fact for t in taught if t.fact}
    live = set(facts.filter(pk__in=ids).live().values_list("pk", flat=True))
    replaced_by = dict(facts.filter(pk__in=ids).values_list("pk", "superseded_by_id"))
    conflicts = Conflict.objects.as_system("the benchmark reads what it taught").filter(
        new_id__in=ids
    )
    asked = {(c.old_id, c.new_id) for c in conflicts.filter(state=Conflict.State.OPEN)}
    fact_of: dict[str, int | None] = {}
    changed: set[str] = set()
    result = Score(turns=len(taught))
    for t in taught:
        line = t.line
        result.verdicts[t.verdict] += 1
        result.needed += line.needed
        result.repeats += bool(line.repeats)
        result.statements += bool(line.tag or line.repeats or line.changes or line.needed)
        if line.changes:
            changed.add(line.refers(line.changes))
        if t.verdict == "refused":
            result.refused[_refusal(t.reason)] += 1
            if line.needed:
                result.refused_needed.append(t)
            continue
        if line.tag:
            fact_of[line.key] = t.fact
        if t.verdict == "same":
            result.merged += 1
            right = bool(line.repeats) and fact_of.get(line.refers(line.repeats)) == t.fact
            if right:
                result.merged_right += 1
            else:
                result.merged_wrong.append(t)
                if line.needed:
                    result.merged_needed.append(t)
            if t.target_by != t.by:
                result.across_speakers += 1
                if not right:
                    result.across_wrong.append(t)
        if t.verdict == "conflict" and not line.changes:
            result.conflicts_unasked.append(t)
    said_again_by = {
        t.fact: t.line.refers(t.line.repeats) for t in taught if t.line.repeats and t.fact
    }
    for t in taught:
        line = t.line
        if t.fact is None or t.fact in live or t.verdict == "same":
            continue
        if line.repeats and fact_of.get(line.refers(line.repeats)) == t.fact:
            continue
        result.retired += 1
        mine = {line.key, line.refers(line.repeats) if line.repeats else ""} - {""}
        # Replaced by the same statement said again (a refinement of it): nothing is lost.
        successor = replaced_by.get(t.fact)
        again = said_again_by.get(successor) if successor is not None else None
        if mine & changed or (again and again in mine):
            result.retired_right += 1
        else:
            t.reason = _why_retired(t.fact, replaced_by.get(t.fact))
            result.retired_wrong.append(t)
            if line.needed:
                result.retired_needed.append(t)
    for t in taught:
        line = t.line
        if not line.changes:
            continue
        result.changes += 1
        old = fact_of.get(line.refers(line.changes))
        if t.verdict == "same":
            result.changes_merged.append(t)
        elif old is not None and old not in live:
            result.changes_caught += 1
            result.changes_retired += 1
        elif old is not None and t.fact is not None and (old, t.fact) in asked:
            result.changes_caught += 1
            result.changes_asked += 1
        else:
            result.changes_missed.append(t)
    return result


def _why_retired(fact: int, by: int | None) -> str:
    """What retired ``fact``: the line that replaced it, or the reason it was forgotten."""
    from knowledge.models import Fact

    facts = Fact.objects.as_system("the benchmark reads what it taught")
    if by is not None:
        newer = facts.filter(pk=by).values_list("text", "taught_by_name").first()
        return f"replaced by {newer[1] or 'someone'}'s “{newer[0]}”" if newer else "replaced"
    row = facts.filter(pk=fact).values_list("status", "forgotten_reason").first()
    return f"{row[0]}: {row[1]}" if row else "gone"


def _refusal(reason: str) -> str:
    if reason.startswith("That is "):
        return reason[len("That is ") :].split(",", 1)[0]
    if reason.startswith("That asks"):
        return "a question"
    return reason.split(";", 1)[0][:60]


# --- Reporting --------------------------------------------------------------------------------


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({part / whole:.0%})" if whole else "")


def figures_table(result: Score) -> str:
    refused = ", ".join(f"{reason} {n}" for reason, n in result.refused.most_common())
    caught = _share(result.changes_caught, result.changes)
    lost = f"{result.needed_lost} of {result.needed}"
    rows = [
        ("lines taught", f"{result.turns}"),
        ("statements marked (tagged, repeated, changed or needed)", f"{result.statements}"),
        ("refused", f"{sum(result.refused.values())} ({refused})"),
        ("… of them needed by a question", f"{len(result.refused_needed)}"),
        ("merged as the same", f"{result.merged}"),
        ("… saying again what the line it joined said (right)", f"{result.merged_right}"),
        ("… wrongly (two statements made one)", f"{len(result.merged_wrong)}"),
        ("… of them needed by a question", f"{len(result.merged_needed)}"),
        ("lines marked as said again, merged", _share(result.merged_right, result.repeats)),
        ("merges joining two speakers", f"{result.across_speakers}"),
        ("… of two different statements", f"{len(result.across_wrong)}"),
        ("retired (no longer believed at the end)", f"{result.retired}"),
        ("… by the change marked for them (right)", f"{result.retired_right}"),
        ("… wrongly", f"{len(result.retired_wrong)}"),
        ("… of them needed by a question", f"{len(result.retired_needed)}"),
        ("changes caught (old line retired or asked about)", caught),
        ("… retired / asked", f"{result.changes_retired} / {result.changes_asked}"),
        ("… missed: both believed in silence", f"{len(result.changes_missed)}"),
        ("… merged into the old line", f"{len(result.changes_merged)}"),
        ("conflicts no change marks (a question for a person)", f"{len(result.conflicts_unasked)}"),
        ("needed statements lost (refused, merged away or retired)", lost),
    ]  # fmt: skip
    lines = ["| measure | lines |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def misses_text(result: Score) -> str:
    out = []
    groups = (
        ("needed and refused", result.refused_needed),
        ("merged wrongly", result.merged_wrong),
        ("retired wrongly", result.retired_wrong),
        ("change missed", result.changes_missed),
        ("change merged", result.changes_merged),
        ("conflict no change marks", result.conflicts_unasked),
    )
    for title, taught in groups:
        for t in taught:
            line = t.line
            out.append(
                f"{title}: {line.conversation} day {line.day} {line.speaker}: {line.text} "
                f"— {t.verdict} ({t.reason})"
            )
    return "\n".join(out)


def _fresh_memory(slug: str = BENCH_SLUG):
    from bench import knowledge as knowledge_bench
    from knowledge.models import Memory

    knowledge_bench.delete_household(slug)
    return Memory.objects.create(slug=slug, name="Conversations (benchmark)")


def _plain_rate(memory, texts: Sequence[str]) -> float:
    """Statements a second for plain ``Fact.objects.create`` rows in ``memory`` (the texts
    normalised and their vectors computed beforehand): the insert beneath any teaching."""
    from knowledge import statements
    from knowledge.embedding import embedder_for
    from knowledge.models import Fact

    embedder = embedder_for(memory)
    vectors = embedder.embed(list(texts))
    normalised = [statements.normalise(text) for text in texts]
    started = time.perf_counter()
    for text, norm, vector in zip(texts, normalised, vectors, strict=True):
        Fact.objects.create(
            memory=memory,
            text=text,
            normalized=norm,
            channel="chat",
            embedding=vector,
            embedder=embedder.name,
        )
    return len(texts) / (time.perf_counter() - started)


def run_through_learn(conversations: Sequence[Conversation] | None = None):
    """Teach the set into a fresh memory; returns (Score, statements/s through learn, plain
    statements/s, lines, embedder name). The memory is deleted afterwards."""
    from bench import knowledge as knowledge_bench
    from knowledge.embedding import embedder_for

    conversations = conversations or load()
    memory = _fresh_memory()
    try:
        taught, seconds = teach(memory, conversations)
        result = score(taught)
        texts = [t.line.text for t in taught][:200]
        plain = _plain_rate(_fresh_memory(f"{BENCH_SLUG}-plain"), texts)
        name = embedder_for(memory).name
    finally:
        knowledge_bench.delete_household(BENCH_SLUG)
        knowledge_bench.delete_household(f"{BENCH_SLUG}-plain")
    return result, len(taught) / seconds, plain, name


def conversations_through_learn() -> str:
    """The docs/BENCHMARKS.md section: the set taught through learn, scored."""
    conversations = load()
    load_before = os.getloadavg()[0]
    result, rate, plain, embedder = run_through_learn(conversations)
    people = Counter(len(c.people) for c in conversations)
    sessions = sum(len(c.sessions) for c in conversations)
    return (
        "## Conversations taught through learn\n\n"
        f"{len(conversations)} conversations in `bench/conversations.txt` "
        f"({people[2]} between two people, {people[3]} between three; {sessions} sessions, "
        f"{result.turns} lines), written for this benchmark: greetings, thanks, small talk and "
        "questions between what people say of themselves, their household, work and plans; two "
        "people saying alike things of their own; the same thing said again in a later "
        "session; values, owners, dates, places and states that change. Every line taught "
        "through `memory.actions.learn` as a line of a chat by its speaker (each person "
        f"their own), into one memory holding every conversation, judged with `{embedder}`. "
        "Each line is scored against its marks (a question needs it; it says again what an "
        "earlier line said; it changes one): see `bench/conversations.py`.\n\n"
        f"{figures_table(result)}\n\n"
        f"Target: no needed statement retired, merged away or refused, and no merge across "
        f"speakers of two different statements — {'met' if result.met else '**not met**'} "
        f"({result.needed_lost} needed lost, {len(result.across_wrong)} merges across "
        "speakers).\n\n"
        "| path | statements/s | ratio to baseline |\n|---|---:|---:|\n"
        f"| learn() of every line (talk refused, the gate on the rest) | {rate:.0f} | "
        f"{plain / rate:.1f}× slower |\n"
        f"| plain `Fact.objects.create` (vector and words computed beforehand) | {plain:.0f} "
        "| 1.0× |\n\n"
        f"{_load_note(load_before)}\n"
    )


def _load_note(before: float) -> str:
    after = os.getloadavg()[0]
    return (
        f"Load average (1 min) on this machine's {os.cpu_count()} cores: {before:.1f} when "
        f"this benchmark started, {after:.1f} when it ended."
    )


def main() -> None:
    result, rate, plain, embedder = run_through_learn()
    print(figures_table(result))
    print(f"\n{rate:.0f} statements/s through learn; plain create {plain:.0f}/s ({embedder})\n")
    print(misses_text(result))


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
    django.setup()
    main()


# --- Through the API --------------------------------------------------------------------------

BULK_LARGE = 5_000  # one request of a program's list, as bench.memory.bulk_adds sends


def _client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.update_or_create(
        username="bench", defaults={"is_superuser": True, "is_staff": True}
    )
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    return client


@dataclass
class ApiFigures:
    requests: int
    statements: int
    seconds: float
    plain_seconds: float
    added: int = 0
    known: int = 0
    refused: int = 0
    judged: Counter = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.statements / self.seconds

    @property
    def plain_rate(self) -> float:
        return self.statements / self.plain_seconds


def _plain_groups(memory, groups: Sequence[Sequence[str]]) -> float:
    """Seconds for plain ``bulk_create`` of the same statements, a request's worth at a time."""
    from knowledge.models import Fact

    started = time.perf_counter()
    for texts in groups:
        Fact.objects.bulk_create(
            [Fact(memory=memory, text=t, normalized=t.lower(), channel="api") for t in texts]
        )
    return time.perf_counter() - started


def bulk_by_session_and_speaker(conversations: Sequence[Conversation]) -> ApiFigures:
    """``POST /api/memory/add/bulk`` of every line, one request per session and speaker (as a
    program holding transcripts would send them), into a fresh memory."""
    from bench import knowledge as knowledge_bench

    memory = _fresh_memory()
    plain_memory = _fresh_memory(f"{BENCH_SLUG}-plain")
    groups: list[list[str]] = []
    for conversation in conversations:
        for _day, lines in conversation.sessions:
            for person in conversation.people:
                said = [line.text for line in lines if line.speaker == person]
                if said:
                    groups.append(said)
    try:
        client = _client()
        figures = ApiFigures(len(groups), sum(map(len, groups)), 0.0, 0.0)
        for texts in groups:
            started = time.perf_counter()
            response = client.post(
                f"/api/memory/add/bulk?memory={memory.slug}",
                {"facts": texts},
                content_type="application/json",
            )
            figures.seconds += time.perf_counter() - started
            assert response.status_code in (200, 201), response.content
            body = response.json()
            figures.added += body["added"]
            figures.known += body["known"]
            figures.refused += body.get("refused", 0)
            figures.judged.update(body.get("judged", {}))
        figures.plain_seconds = _plain_groups(plain_memory, groups)
    finally:
        knowledge_bench.delete_household(BENCH_SLUG)
        knowledge_bench.delete_household(f"{BENCH_SLUG}-plain")
    return figures


def conversations_posted(conversations: Sequence[Conversation]) -> ApiFigures:
    """``POST /api/conversations/`` of every session, each reflected on (the offline reflection,
    run here as its worker would) into a fresh memory: lines a second, post and reflection."""
    from unittest import mock

    from bench import knowledge as knowledge_bench
    from memory import reflection
    from memory.models import ReflectionRun

    memory = _fresh_memory()
    plain_memory = _fresh_memory(f"{BENCH_SLUG}-plain")
    groups = [[line.text for line in lines] for c in conversations for _, lines in c.sessions]
    try:
        client = _client()
        figures = ApiFigures(len(groups), sum(map(len, groups)), 0.0, 0.0)
        asked: list[int] = []
        with mock.patch.object(reflection, "send_on_commit", lambda _task, pk: asked.append(pk)):
            for conversation in conversations:
                for number, (_day, lines) in enumerate(conversation.sessions):
                    messages = [{"speaker": line.speaker, "text": line.text} for line in lines]
                    started = time.perf_counter()
                    response = client.post(
                        f"/api/conversations/?memory={memory.slug}",
                        {
                            "channel": "chat",
                            "reference": f"{conversation.id}-{number}",
                            "messages": messages,
                        },
                        content_type="application/json",
                    )
                    while asked:
                        reflection.execute(asked.pop())
                    figures.seconds += time.perf_counter() - started
                    assert response.status_code in (200, 201), response.content
        runs = ReflectionRun.objects.filter(memory=memory)
        figures.added = sum(len(run.filed) for run in runs)
        figures.plain_seconds = _plain_groups(plain_memory, groups)
    finally:
        knowledge_bench.delete_household(BENCH_SLUG)
        knowledge_bench.delete_household(f"{BENCH_SLUG}-plain")
    return figures


def bulk_large() -> ApiFigures:
    """One request of BULK_LARGE new household statements into a fresh memory."""
    from bench import knowledge as knowledge_bench

    memory = _fresh_memory()
    plain_memory = _fresh_memory(f"{BENCH_SLUG}-plain")
    texts = knowledge_bench.new_statements(BULK_LARGE, seed=13)
    try:
        client = _client()
        started = time.perf_counter()
        response = client.post(
            f"/api/memory/add/bulk?memory={memory.slug}",
            {"facts": texts},
            content_type="application/json",
        )
        seconds = time.perf_counter() - started
        assert response.status_code in (200, 201), response.content
        body = response.json()
        figures = ApiFigures(1, len(texts), seconds, _plain_groups(plain_memory, [texts]))
        figures.added, figures.known = body["added"], body["known"]
        figures.refused = body.get("refused", 0)
        figures.judged.update(body.get("judged", {}))
    finally:
        knowledge_bench.delete_household(BENCH_SLUG)
        knowledge_bench.delete_household(f"{BENCH_SLUG}-plain")
    return figures


def api_rows(conversations: Sequence[Conversation]) -> list[tuple[str, ApiFigures]]:
    by_speaker = bulk_by_session_and_speaker(conversations)
    large = bulk_large()
    posted = conversations_posted(conversations)
    return [
        ("bulk adds, one request per session and speaker", by_speaker),
        (f"bulk add, one request of {BULK_LARGE:,} household statements", large),
        ("conversations posted, one request per session, reflected on", posted),
    ]


def api_table(rows: Sequence[tuple[str, ApiFigures]]) -> str:
    lines = [
        "| path | requests | statements | statements/s | plain insert/s | ratio to baseline |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, f in rows:
        lines.append(
            f"| {name} | {f.requests:,} | {f.statements:,} | {f.rate:,.0f} | "
            f"{f.plain_rate:,.0f} | {f.plain_rate / f.rate:.1f}× slower |"
        )
    return "\n".join(lines)


def conversations_through_the_api() -> str:
    """The docs/BENCHMARKS.md section: the set through the API, beside a plain insert."""
    conversations = load()
    load_before = os.getloadavg()[0]
    rows = api_rows(conversations)
    by_speaker, large, posted = (figures for _, figures in rows)
    judged = ", ".join(f"{verdict} {n}" for verdict, n in sorted(by_speaker.judged.items()))
    per_request = by_speaker.seconds / by_speaker.requests * 1000
    return (
        "## Conversations and bulk adds through the API\n\n"
        "The same conversations sent over HTTP (Django's test client, signed in): as "
        "`POST /api/memory/add/bulk`, one request per session and speaker (the lines each "
        "person said in a session, as a program holding transcripts would send them); one "
        f"`POST /api/memory/add/bulk` of {BULK_LARGE:,} new household statements (a program's "
        "list); and as `POST /api/conversations/`, one request per session, each reflected on "
        "by the offline reflection as its worker would (the time counts both). Each into a "
        "fresh memory. Baseline: plain `bulk_create` of the same rows, a request's worth at a "
        "time, in the same run.\n\n"
        f"{api_table(rows)}\n\n"
        f"Per session and speaker: {by_speaker.added} added, {by_speaker.known} already known, "
        f"{by_speaker.refused} talk or questions not added; those that said a change were "
        f"judged ({judged or 'none'}); {per_request:.0f} ms a request of "
        f"{by_speaker.statements / by_speaker.requests:.1f} lines on average. One request of "
        f"{BULK_LARGE:,}: {large.added:,} added. Posted conversations: "
        f"{posted.added} statements filed by their reflections.\n\n"
        f"{_load_note(load_before)}\n"
    )
