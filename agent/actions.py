"""Agent memory: the life cycle of what an agent learns, one action per verb. Every surface (the
MCP tools, ``/api/episodes/``, ``/api/procedures/``, ``/api/agent/…``, ``brain agent …``, the
session hooks and the beat) calls these and shows the result's ``.message``.

The interface (keyword-only; each returns a result object carrying its own message):

    encode(memory=, text=, outcome="unknown", by=None, occurred_at=None) -> Encoded
    pending(memory=, limit=50) -> list[Episode]
    sleep(memory=, by=None, tidy=True, keep=PRUNE_KEEP, now=None) -> Slept
    distil(memory=, episode_ids=, propositions=, by=None) -> Distilled
    decay(memory=, now=None) -> Decayed
    prune(memory=, keep=PRUNE_KEEP) -> Pruned
    record_procedure(memory=, task=, steps=, outcome="unknown", by=None) -> ProcedureRecorded
    procedure_outcome(procedure=, outcome=) -> ProcedureRecorded
    record_outcome(memory=, ref=, outcome=) -> OutcomeRecorded  # "12": a fact, "p3": a procedure
    set_core(memory=, text=, by=None) -> CoreSaved
    stats(memory=, reader=) -> Stats
    parse_outcome(value) -> "ok" | "fail" | "unknown"   # ValidationError for anything else

Refusals are ``django.core.exceptions.ValidationError`` (bad outcome, empty or secret text, an
unknown episode id) with a message naming the problem. Permissions are checked by the surfaces
(``knowledge.access``): episodes, distillation, procedures, outcomes and the sleep pass need
teach; the core needs curate to change; everything else reads.

Where things live: the models (``Episode``, ``Procedure``, ``Memory.core``) are in the knowledge
app, because the layers that read them are there — the write gate compares a new statement with
the waiting episodes, explain cites the episodes a belief came from, and ``context()`` loads the
core and shows procedures. These actions are here, above memory, because the sleep pass
distils through ``memory.actions.learn``: the same gate as every other write, no back door.
`brain mcp` serves the agent's MCP tools beside the memory app's (``surfaces.mcp_server``).

The sleep pass (``sleep``): the waiting episodes, oldest first, in batches of SLEEP_BATCH (50:
one model prompt) and at most MAX_BATCHES a pass (the next pass takes the rest). Each batch is
extracted first (``distiller``: offline rules, or the model), with no transaction open; then in
one transaction its episodes are claimed and every proposition is learned citing the episodes
it came from, valid from the first of them. An extractor failure writes nothing for its batch
and leaves its episodes waiting. Then decay and pruning (``forgetting``) when ``tidy``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agent import distiller, forgetting
from brain.db.retry import retry_transaction
from knowledge import actions as knowledge_actions
from knowledge import episodes as knowledge_episodes
from knowledge import gate, retrieval, statements
from knowledge.embedding import embedder_for, vector_or_none
from knowledge.models import CORE_MAX_CHARS, Episode, Fact, Memory, Procedure, Source, name_of
from knowledge.read_layer import reader_for
from knowledge.secret_filter import refuse_secrets, secret_in
from memory import actions as memory_actions
from memory import switches, taught
from memory.taught import Statement

OUTCOMES = knowledge_episodes.OUTCOMES
PRUNE_KEEP = forgetting.PRUNE_KEEP
SLEEP_BATCH = 50
MAX_BATCHES = 20
PROCEDURE_PRIOR = 0.5  # Laplace's rule: (1 + successes) / (2 + runs), with PRIOR_WEIGHT = 2
MAX_STEPS = 20
MAX_TASK_CHARS = 300
MAX_STEP_CHARS = 500


def parse_outcome(value) -> str:
    """``ok``, ``fail`` or ``unknown`` (None and "" are unknown). Anything else, "success" and
    "failure" included, is refused rather than guessed at."""
    return knowledge_episodes.check_outcome(value)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _ids(numbers: list[int]) -> str:
    """#1, #2 or #3."""
    named = [f"#{number}" for number in numbers]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]


# Results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    """An episode recorded. ``known``: a live belief that already said it (its support rose, the
    episode is cited by it); ``restates``: a waiting episode that already said it."""

    episode: Episode
    known: Fact | None = None
    restates: Episode | None = None

    @property
    def message(self) -> str:
        if self.known is not None:
            return (
                f"Already known (fact #{self.known.pk}, now said {self.known.support} times); "
                f"episode #{self.episode.pk} is cited by it."
            )
        if self.restates is not None:
            return (
                f"Recorded episode #{self.episode.pk}; it says what episode "
                f"#{self.restates.pk} says, which is still waiting: they are distilled together."
            )
        return (
            f"Recorded episode #{self.episode.pk} ({self.episode.outcome}); it waits for the "
            "sleep pass to be distilled."
        )


@dataclass(frozen=True)
class Distilled:
    episodes: list[Episode] = field(default_factory=list)
    learned: list = field(default_factory=list)  # memory.actions.Learned, one per proposition
    dropped: list[str] = field(default_factory=list)  # fragments that did not stand alone
    error: str = ""  # the extractor failed: nothing was written for its batch
    waiting: int = 0  # episodes still waiting after this
    off: str = ""  # learning is switched off: why nothing was distilled

    @property
    def message(self) -> str:
        if self.off:
            return f"{self.off} {_plural(self.waiting, 'episode')} still wait."
        if self.error:
            if not self.episodes:
                return (
                    f"The episodes could not be distilled ({self.error}); nothing was written "
                    f"and {_plural(self.waiting, 'episode')} still wait."
                )
            return (
                f"{self._done()} Then distilling failed ({self.error}): "
                f"{_plural(self.waiting, 'episode')} still wait."
            )
        if not self.episodes:
            return "Nothing was waiting to be distilled."
        return self._done()

    def _done(self) -> str:
        new = sum(1 for learned in self.learned if learned.verdict != "same")
        known = len(self.learned) - new
        parts = [_plural(new, "new belief")] if new else []
        parts += [f"{known} already known"] if known else []
        into = " and ".join(parts) or "nothing worth keeping"
        text = f"Distilled {_plural(len(self.episodes), 'episode')} into {into}"
        if self.dropped:
            quoted = ", ".join(f"“{fragment}”" for fragment in self.dropped)
            were = "was" if len(self.dropped) == 1 else "were"
            did = _plural(len(self.dropped), "fragment")
            text += f"; {did} did not stand alone and {were} left out: {quoted}"
        return text + "."


@dataclass(frozen=True)
class Decayed:
    retired: list[Fact] = field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.retired:
            return "Nothing has gone stale."
        return (
            f"Retired {_plural(len(self.retired), 'belief')} nobody used or said again in "
            f"{forgetting.DECAY_AFTER.days} days (still answerable as of earlier)."
        )


@dataclass(frozen=True)
class Pruned:
    retired: list[Fact] = field(default_factory=list)
    kept: int = 0
    keep: int = PRUNE_KEEP
    scored: int = 0

    @property
    def message(self) -> str:
        if not self.retired:
            return (
                f"{_plural(self.scored, 'guideline')} scored by outcomes, within the cap of "
                f"{self.keep} a class (or proven); nothing was retired."
            )
        return (
            f"Kept the {self.kept} most useful of {self.scored} guidelines scored by outcomes; "
            f"retired {len(self.retired)}."
        )


@dataclass(frozen=True)
class Slept:
    distilled: Distilled
    decayed: Decayed | None = None
    pruned: Pruned | None = None

    @property
    def message(self) -> str:
        said = [self.distilled.message]
        if self.decayed is not None and self.decayed.retired:
            said.append(self.decayed.message)
        if self.pruned is not None and self.pruned.retired:
            said.append(self.pruned.message)
        return " ".join(said)


@dataclass(frozen=True)
class ProcedureRecorded:
    procedure: Procedure
    created: bool

    @property
    def message(self) -> str:
        procedure = self.procedure
        tried = procedure.successes + procedure.failures
        score = f"it worked {procedure.successes} of {tried} times" if tried else "no outcome yet"
        if self.created:
            return f"Recorded procedure p{procedure.pk} ({procedure.task}): {score}."
        return f"Recorded another run of procedure p{procedure.pk} ({procedure.task}): {score}."


@dataclass(frozen=True)
class OutcomeRecorded:
    ref: str  # "12" or "p3"
    previous_confidence: float
    confidence: float
    successes: int
    failures: int
    worked: bool = True

    @property
    def message(self) -> str:
        what = f"procedure {self.ref}" if self.ref.startswith("p") else f"fact #{self.ref}"
        did = "worked" if self.worked else "did not work"
        return (
            f"Recorded that acting on {what} {did}: confidence {self.previous_confidence:.2f} "
            f"→ {self.confidence:.2f} ({self.successes} worked, {self.failures} failed)."
        )


@dataclass(frozen=True)
class CoreSaved:
    text: str
    changed: bool

    @property
    def message(self) -> str:
        if not self.changed:
            return "The core is unchanged."
        if not self.text:
            return "Cleared the core."
        return (
            f"Saved the core ({len(self.text):,} characters, about "
            f"{retrieval.tokens(self.text)} tokens of every memory block)."
        )


@dataclass(frozen=True)
class Stats:
    memory: str
    beliefs: int
    failures: int
    procedures: int
    episodes: int
    pending: int
    retired: int
    core_tokens: int

    @property
    def message(self) -> str:
        return (
            f"{self.memory}: {_plural(self.beliefs, 'belief')} "
            f"({_plural(self.failures, 'failure')} among them), "
            f"{_plural(self.procedures, 'procedure')}, {_plural(self.episodes, 'episode')} "
            f"({self.pending} waiting to be distilled), {self.retired} retired; the core takes "
            f"about {self.core_tokens} tokens."
        )


# Episodes --------------------------------------------------------------------------------------


@retry_transaction
def encode(
    *, memory: Memory, text: str, outcome: str = "unknown", by=None, occurred_at=None
) -> Encoded:
    """Record what the agent saw happen. The gate reads it first: a live belief that already
    says it (with the same class of outcome) is strengthened now and cites the episode; a
    waiting episode that says it makes this one its restatement, distilled with it. Otherwise
    it waits for the sleep pass. Raises ValidationError."""
    switches.require_learning(memory)
    outcome = parse_outcome(outcome)
    text = knowledge_episodes.clean(text)
    as_bool = Episode.as_bool(outcome)
    embedder = embedder_for(memory)
    embedding = vector_or_none(embedder, text)  # none from an absent worker: judged by words
    speaker = name_of(by)
    recording = {
        "memory": memory,
        "text": text,
        "outcome": outcome,
        "by": by,
        "occurred_at": occurred_at,
        "embedding": embedding,
        "embedder": embedder.name,
    }
    near = gate.neighbours(memory, text, embedding, reader=reader_for(by))
    judgement = gate.judge(near, text, outcome=as_bool, speaker=speaker)
    if (
        judgement.verdict == "same"
        and judgement.target is not None  # a "same" verdict always names the fact it repeats
        and len(text) <= taught.MAX_ITEM_CHARS
    ):
        try:
            with transaction.atomic():
                episode = knowledge_episodes.record(**recording, distilled=True)
                learned = memory_actions.learn(
                    Statement.distilled(
                        memory=memory,
                        text=text,
                        by=by,
                        outcome=as_bool,
                        verdict="same",
                        target=judgement.target.pk,
                        evidence=[episode],
                    )
                )
            return Encoded(episode, known=learned.fact)
        except gate.BadVerdict:  # the belief went out of use a moment ago: this one waits
            pass
    twins = gate.pending_twins(memory, text, outcome=as_bool, embedding=embedding, speaker=speaker)
    twin = twins[0] if twins else None
    with transaction.atomic():
        episode = knowledge_episodes.record(**recording, restates=twin, distilled=twin is not None)
    return Encoded(episode, restates=twin)


def pending(*, memory: Memory, limit: int = 50) -> list[Episode]:
    """The episodes waiting for the sleep pass, oldest first."""
    waiting = Episode.objects.for_memory(memory).pending().in_time_order()
    return list(waiting.defer("embedding")[:limit])


# The sleep pass --------------------------------------------------------------------------------


def sleep(
    *,
    memory: Memory,
    by=None,
    tidy: bool = True,
    keep: int = PRUNE_KEEP,
    now: datetime | None = None,
) -> Slept:
    """Distil the waiting episodes into beliefs, then (``tidy``) decay and prune. ``by``: who
    the beliefs are taught by when an episode names nobody. Safe to run twice, and two at once:
    an episode is claimed by one pass only. With learning off it distils, decays and prunes
    nothing (what is known is left as it is) and says so."""
    if not switches.learning_on(memory):
        waiting = Episode.objects.for_memory(memory).pending().count()
        return Slept(Distilled(waiting=waiting, off=str(switches.LearningOff(memory))))
    distilled = _distil_waiting(memory, by=by)
    if not tidy:
        return Slept(distilled)
    return Slept(distilled, decay(memory=memory, now=now), prune(memory=memory, keep=keep))


def _distil_waiting(memory: Memory, *, by) -> Distilled:
    done: list[Episode] = []
    learned: list = []
    dropped: list[str] = []
    waiting = Episode.objects.for_memory(memory).pending().in_time_order().defer("embedding")
    for _ in range(MAX_BATCHES):
        batch = list(waiting.exclude(pk__in=[e.pk for e in done])[:SLEEP_BATCH])
        if not batch:
            break
        try:
            kept, left_out = _extract(batch)
        except distiller.ExtractorFailed as error:
            return Distilled(done, learned, dropped, str(error), waiting.count())
        claimed, results = _commit(memory, batch, kept, by=by)
        if not claimed:  # another pass took this batch: it distils it
            break
        done += claimed
        learned += results
        dropped += left_out
    return Distilled(done, learned, dropped, "", waiting.count())


def _extract(batch: list[Episode]) -> tuple[list[distiller.Proposition], list[str]]:
    if distiller.DISTIL_EPISODES.configured(batch[0].memory_id if batch else None):
        return distiller.with_model(batch)
    kept, dropped = [], []
    for episode in batch:
        more, less = distiller.offline(episode)
        kept += more
        dropped += less
    return kept, dropped


@retry_transaction
def _commit(
    memory: Memory,
    episodes: list[Episode],
    propositions: list[distiller.Proposition],
    *,
    by,
    all_or_nothing: bool = False,
) -> tuple[list[Episode], list]:
    """In one transaction: claim ``episodes`` and learn each proposition citing those it came
    from (and their restatements). ``all_or_nothing``: refuse (ValidationError) when another
    pass claimed one of them first."""
    learned = []
    with transaction.atomic():
        claimed = knowledge_episodes.claim(episodes)
        if all_or_nothing and len(claimed) != len(episodes):
            taken = sorted({e.pk for e in episodes} - {e.pk for e in claimed})
            raise ValidationError(
                f"Episode {_ids(taken)} was distilled meanwhile: nothing was distilled."
            )
        claimed_ids = {episode.pk for episode in claimed}
        for proposition in propositions:
            cited = [episode for episode in proposition.episodes if episode.pk in claimed_ids]
            text = distiller.as_belief(proposition.text)
            if not cited or not text:
                continue
            try:
                learned.append(
                    memory_actions.learn(
                        Statement.distilled(
                            memory=memory,
                            text=text,
                            by=cited[0].recorded_by or by,
                            outcome=_outcome_of(proposition, cited),
                            evidence=knowledge_episodes.with_restatements(cited),
                            source=_source(memory, cited),
                        )
                    )
                )
            except ValidationError:  # too long or a secret: a belief brain does not keep
                continue
    return claimed, learned


def _outcome_of(proposition: distiller.Proposition, cited: list[Episode]) -> bool | None:
    """A failure lesson is a failure; a proposition from episodes that all worked worked;
    anything else has no outcome."""
    if proposition.failure or all(episode.outcome == "fail" for episode in cited):
        return False
    if all(episode.outcome == "ok" for episode in cited):
        return True
    return None


def _source(memory: Memory, cited: list[Episode]) -> Source:
    numbers = [episode.pk for episode in cited]
    return Source.objects.create(
        memory=memory,
        kind=Source.Kind.API,
        title=f"Distilled from episode {', '.join(f'#{n}' for n in numbers)}"[:300],
        reference="episodes:" + ",".join(str(n) for n in numbers)[:280],
        text="\n".join(episode.text for episode in cited),
    )


def distil(
    *, memory: Memory, episode_ids: list[int], propositions: list[str], by=None
) -> Distilled:
    """The agent's own distillation: ``propositions`` learned through the gate, each citing all
    of ``episode_ids``, which stop waiting. An empty list of propositions clears them (nothing
    in them was worth keeping). A proposition labelled "Avoid:", or from episodes that all
    failed, is a failure. Raises ValidationError naming every id that is not a waiting episode
    of ``memory``; nothing is distilled then. Raises LearningOff while learning is off."""
    switches.require_learning(memory)
    try:
        wanted = list(dict.fromkeys(int(number) for number in episode_ids))
    except (TypeError, ValueError):
        raise ValidationError("episode_ids must be a list of episode numbers.") from None
    if not wanted:
        raise ValidationError("Name the episodes you distilled (episode_ids).")
    found = {
        episode.pk: episode
        for episode in Episode.objects.for_memory(memory)
        .pending()
        .filter(pk__in=wanted)
        .defer("embedding")
    }
    unknown = [number for number in wanted if number not in found]
    if unknown:
        raise ValidationError(
            f"No waiting episode {_ids(unknown)} in {memory.name}: nothing was distilled."
        )
    episodes = sorted(found.values(), key=lambda e: (e.occurred_at, e.pk))
    kept, dropped = [], []
    for text in propositions:
        belief = distiller.as_belief(str(text))
        lesson = bool(distiller.AVOID.match(str(text)))
        if not belief:
            continue
        if distiller.standalone(belief, lesson=lesson):
            dropped.append(belief)
            continue
        kept.append(distiller.Proposition(belief, tuple(episodes), lesson))
    claimed, learned = _commit(memory, episodes, kept, by=by, all_or_nothing=True)
    waiting = Episode.objects.for_memory(memory).pending().count()
    return Distilled(claimed, learned, dropped, "", waiting)


# Decay and pruning -----------------------------------------------------------------------------


def decay(*, memory: Memory, now: datetime | None = None) -> Decayed:
    """Retire the stale, never used, single-support beliefs (agent/forgetting.py)."""
    now = now or timezone.now()
    stale = forgetting.stale(memory, now=now)
    return Decayed(forgetting.retire(stale, reason=forgetting.decay_reason(), now=now))


def prune(*, memory: Memory, keep: int = PRUNE_KEEP) -> Pruned:
    """Cap the beliefs scored by outcomes at ``keep`` a class, retiring the least useful and
    never the proven (agent/forgetting.py). Raises ValidationError for a ``keep`` out of
    range."""
    low, high = forgetting.KEEP_RANGE
    if not isinstance(keep, int) or isinstance(keep, bool) or not low <= keep <= high:
        raise ValidationError(f"keep must be between {low} and {high:,}; got {keep!r}.")
    beyond, scored = forgetting.beyond_the_cap(memory, keep=keep)
    retired = forgetting.retire(beyond, reason=forgetting.prune_reason(keep), now=timezone.now())
    return Pruned(retired, scored - len(retired), keep, scored)


# Procedures ------------------------------------------------------------------------------------


def _clean_procedure(task: str, steps: list[str]) -> tuple[str, list[str]]:
    task = " ".join(str(task or "").split())
    if not task:
        raise ValidationError("A procedure needs its task: what the steps achieve.")
    if len(task) > MAX_TASK_CHARS:
        raise ValidationError(f"The task is at most {MAX_TASK_CHARS} characters.")
    if not isinstance(steps, list | tuple):
        raise ValidationError("steps must be a list of the actions, in order.")
    steps = [" ".join(str(step).split()) for step in steps]
    steps = [step for step in steps if step]
    if not steps:
        raise ValidationError("A procedure needs at least one step.")
    if len(steps) > MAX_STEPS:
        raise ValidationError(f"A procedure has at most {MAX_STEPS} steps; this has {len(steps)}.")
    if any(len(step) > MAX_STEP_CHARS for step in steps):
        raise ValidationError(f"Each step is at most {MAX_STEP_CHARS} characters.")
    for said in (task, *steps):
        refuse_secrets(said)
    return task, steps


def _score(procedure: Procedure, outcome: str) -> None:
    """Count one run's outcome; confidence is its success rate, Laplace-smoothed."""
    if outcome == "ok":
        procedure.successes += 1
    elif outcome == "fail":
        procedure.failures += 1
    runs = procedure.successes + procedure.failures
    weight = knowledge_actions.PRIOR_WEIGHT
    procedure.confidence = round(
        (PROCEDURE_PRIOR * weight + procedure.successes) / (weight + runs), 4
    )
    procedure.last_run_at = timezone.now()
    procedure.save(update_fields=["successes", "failures", "confidence", "last_run_at"])


@retry_transaction
def record_procedure(
    *, memory: Memory, task: str, steps: list[str], outcome: str = "unknown", by=None
) -> ProcedureRecorded:
    """Record a run of a sequence of actions and its outcome. The same task with the same steps
    is the same procedure, run again; other steps are another way of doing it, scored apart."""
    outcome = parse_outcome(outcome)
    task, steps = _clean_procedure(task, steps)
    text = f"{task}: {' → '.join(steps)}"
    normalized = statements.normalise(text)
    same_way = Procedure.objects.select_for_update().defer("search_vector")
    with transaction.atomic():
        procedure = same_way.filter(memory=memory, normalized=normalized).first()
        created = False
        if procedure is None:
            try:
                with transaction.atomic():
                    procedure = Procedure.objects.create(
                        memory=memory,
                        task=task,
                        steps=steps,
                        normalized=normalized,
                        text=text,
                        confidence=PROCEDURE_PRIOR,
                        recorded_by=by,
                        recorded_by_name=name_of(by),
                    )
                created = True
            except IntegrityError:  # recorded a moment ago by another run
                procedure = same_way.get(memory=memory, normalized=normalized)
        _score(procedure, outcome)
    return ProcedureRecorded(procedure, created)


@retry_transaction
def procedure_outcome(*, procedure: Procedure, outcome: str) -> ProcedureRecorded:
    """Count one more run of ``procedure``: ``ok`` or ``fail``."""
    outcome = parse_outcome(outcome)
    if outcome == "unknown":
        raise ValidationError("An outcome to report is ok or fail.")
    with transaction.atomic():
        procedure = (
            Procedure.objects.select_for_update().defer("search_vector").get(pk=procedure.pk)
        )
        _score(procedure, outcome)
    return ProcedureRecorded(procedure, created=False)


def record_outcome(*, memory: Memory, ref: str | int, outcome: str, reader) -> OutcomeRecorded:
    """Acting on a fact (``12``) or a procedure (``p3``) of ``memory`` worked (``ok``) or not
    (``fail``): the only thing that moves confidence. A fact ``reader`` may not read is not
    there for them."""
    outcome = parse_outcome(outcome)
    if outcome == "unknown":
        raise ValidationError("An outcome to report is ok or fail.")
    ref = str(ref).strip()
    if ref[:1] in ("p", "P") and ref[1:].isdigit():
        procedure = Procedure.objects.for_memory(memory).filter(pk=int(ref[1:])).first()
        if procedure is None:
            raise ValidationError(f"There is no procedure {ref} in {memory.name}.")
        previous = procedure.confidence
        procedure = procedure_outcome(procedure=procedure, outcome=outcome).procedure
        return OutcomeRecorded(
            f"p{procedure.pk}",
            previous,
            procedure.confidence,
            procedure.successes,
            procedure.failures,
            outcome == "ok",
        )
    facts = Fact.objects.for_memory(memory).readable_by(reader)
    fact = facts.filter(pk=int(ref)).first() if ref.isdigit() else None
    if fact is None:
        raise ValidationError(f"There is no fact #{ref} in {memory.name}.")
    previous = fact.confidence
    fact = knowledge_actions.record_outcome(fact=fact, success=outcome == "ok")
    return OutcomeRecorded(
        str(fact.pk), previous, fact.confidence, fact.successes, fact.failures, outcome == "ok"
    )


# The core and the numbers ----------------------------------------------------------------------


def set_core(*, memory: Memory, text: str, by=None) -> CoreSaved:
    """Pin ``text`` as the memory's core: loaded first into every block. Raises ValidationError
    when it is longer than CORE_MAX_CHARS or holds a secret."""
    lines = [" ".join(line.split()) for line in str(text or "").replace("\r\n", "\n").split("\n")]
    text = "\n".join(lines).strip()
    if len(text) > CORE_MAX_CHARS:
        raise ValidationError(
            f"The core holds at most {CORE_MAX_CHARS:,} characters; this is {len(text):,}. "
            "Keep it to who the agent works for and the standing rules."
        )
    secret = secret_in(text)
    if secret:
        raise ValidationError(
            f"That looks like {secret}. The core is replayed into every prompt: keep secrets "
            "out of it."
        )
    changed = Memory.objects.filter(pk=memory.pk).exclude(core=text).update(core=text) > 0
    memory.core = text
    return CoreSaved(text, changed)


def stats(*, memory: Memory, reader) -> Stats:
    """How much the agent's memory holds, as ``reader`` may read it."""
    facts = Fact.objects.for_memory(memory).readable_by(reader)
    live = facts.live()
    episodes = Episode.objects.for_memory(memory)
    return Stats(
        memory=memory.slug,
        beliefs=live.count(),
        failures=live.filter(valence=Fact.Valence.FAILURE).count(),
        procedures=Procedure.objects.for_memory(memory).count(),
        episodes=episodes.count(),
        pending=episodes.pending().count(),
        retired=facts.filter(status=Fact.Status.RETIRED).count(),
        core_tokens=retrieval.tokens(memory.core) if memory.core else 0,
    )
