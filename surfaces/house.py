"""The House page (``/``): the overview of one home, read for one person.

It reads every app whose data it shows by import (what waits on you is review's; what was
learned is knowledge's; the brief and the queue are memory's); its view is
``surfaces.views.house``.

What it holds, each number the same count as the page it links to shows:

- what waits on you: the open findings and open guesses (the Findings tab's one list and its
  badge), their count and the first ``FIRST_FEW`` in the Findings tab's order;
- this morning's brief (the Knowledge tab's);
- what was learned recently: the newest ``RECENT`` live facts the person may read, with who
  taught them, through what, and the source to open;
- the state of the memory: facts known and waiting to be filed (the Knowledge tab's
  measurements), the last pass and whether a worker checked in (``brain.health``);
- facts learned and findings raised per week over the last ``WEEKS`` weeks, drawn as a small SVG
  on the server: no script, no charting library, nothing from another origin (the CSP allows
  none), and shapes styled by class from our own stylesheet (the CSP forbids inline styles).

Reads are a fixed number of queries whatever the size of the memory (two grouped counts for the
chart, never one per week).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from brain import health
from brain.words import counted
from knowledge.models import Fact, Memory
from memory import brief as briefs
from memory import counts as fact_counts
from memory import measurements
from review import counts
from review.models import Finding, Guess

FIRST_FEW = 3  # of each kind: enough to see what it is about, the rest is one click away
RECENT = 6
WEEKS = 13  # three months

# The chart's geometry, in SVG user units. The SVG stretches to the card's width at a fixed
# height (its text is HTML beside it, so dates and the scale read the same on a phone).
CHART_WIDTH = 640
CHART_HEIGHT = 120
PLOT_TOP = 4
PLOT_BOTTOM = CHART_HEIGHT  # the baseline
PLOT_LEFT = 0
BAR_GAP = 2
LABEL_EVERY = 4  # weeks: a date under every fourth week and the last


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    count: int


@dataclass(frozen=True)
class Week:
    starts: date
    learned: int
    raised: int
    learned_bar: Bar
    raised_bar: Bar
    label_x: float
    labelled: bool

    @property
    def title(self) -> str:
        return (
            f"Week of {self.starts:%-d %b}: {self.learned} learned, "
            f"{counted(self.raised, 'finding')} raised"
        )


@dataclass(frozen=True)
class Chart:
    weeks: list[Week]
    learned: int
    raised: int
    scale: int  # the number the top of the plot stands for: a round one, 1, 2, 5, 10, 20…
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT
    baseline: int = PLOT_BOTTOM
    top: int = PLOT_TOP

    @property
    def half(self) -> int | None:
        """The scale's middle line, when it is a whole number."""
        return self.scale // 2 if self.scale % 2 == 0 else None

    @property
    def middle_y(self) -> float:
        return (self.top + self.baseline) / 2

    @property
    def description(self) -> str:
        return (
            f"Facts learned and findings raised per week over the last {len(self.weeks)} "
            f"weeks: {self.learned} learned, {self.raised} raised."
        )


@dataclass(frozen=True)
class House:
    findings: list[Finding]
    guesses: list[Guess]
    brief_text: str
    brief_written_at: datetime | None
    recent: list[Fact]
    # Every count the page shows (review.counts): the Knowledge tab, the brief, the Findings tab
    # and the status API count the same way, so no two pages disagree.
    counts: counts.Counts
    # The Knowledge tab's own measurements (memory.measurements): the last pass's words.
    measured: dict[str, measurements.Measurement]
    worker: str  # ok, stale or unknown (brain.health.worker_status)
    worker_seen: datetime | None
    chart: Chart

    @property
    def findings_count(self) -> int:
        return self.counts.findings

    @property
    def guesses_count(self) -> int:
        return self.counts.guesses

    @property
    def waiting_on_you(self) -> int:
        return self.counts.waiting_on_you

    @property
    def empty(self) -> bool:
        """Nothing learned yet and nothing waiting: the page greets a first setup instead."""
        return not (self.counts.known or self.counts.waiting_to_be_filed or self.recent)


def overview(memory: Memory, reader, *, now: datetime | None = None) -> House:
    now = now or timezone.now()
    open_findings = Finding.objects.for_memory(memory).open()
    open_guesses = Guess.objects.for_memory(memory).open()
    readable = fact_counts.facts(memory, reader)
    brief_text, brief_written_at = briefs.for_today(memory, reader)
    worker = health.worker_status()
    counted = counts.for_reader(memory, reader, now=now)
    return House(
        findings=list(open_findings.in_review_order().select_related("subject")[:FIRST_FEW]),
        guesses=list(open_guesses.order_by("offered_at", "pk")[:FIRST_FEW]),
        brief_text=brief_text,
        brief_written_at=brief_written_at,
        recent=list(
            readable.live(now=now).without_vectors().order_by("-created_at", "-pk")[:RECENT]
        ),
        counts=counted,
        measured={measure.key: measure for measure in measurements.measure(memory, counted)},
        worker=worker["status"],
        worker_seen=datetime.fromisoformat(worker["last_seen"]) if worker["last_seen"] else None,
        chart=chart(memory, readable, now=now),
    )


def round_scale(tallest: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50… at or above ``tallest``: the top of the scale."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= tallest:
                return step * factor
        step *= 10


def chart(memory: Memory, readable, *, now: datetime) -> Chart:
    """Facts learned (any status: what was taught that week) and findings first raised, per
    week (Monday to Sunday, local time), the last ``WEEKS`` weeks ending with this one: its last
    bar is "learned this week" (``memory.counts``)."""
    this_week = fact_counts.week_starts(now)
    first = this_week - timedelta(weeks=WEEKS - 1)
    since = fact_counts.start_of(first)
    learned = _per_week(readable.filter(created_at__gte=since), "created_at", first)
    raised = _per_week(
        Finding.objects.for_memory(memory).filter(first_raised_at__gte=since),
        "first_raised_at",
        first,
    )
    starts = [first + timedelta(weeks=index) for index in range(WEEKS)]
    scale = round_scale(max([1, *learned.values(), *raised.values()]))
    slot = (CHART_WIDTH - 2 * PLOT_LEFT) / WEEKS
    bar_width = (slot - 3 * BAR_GAP) / 2
    weeks = []
    for index, start in enumerate(starts):
        left = PLOT_LEFT + index * slot + BAR_GAP
        weeks.append(
            Week(
                starts=start,
                learned=learned.get(start, 0),
                raised=raised.get(start, 0),
                learned_bar=_bar(left, bar_width, learned.get(start, 0), scale),
                raised_bar=_bar(left + bar_width + BAR_GAP, bar_width, raised.get(start, 0), scale),
                label_x=round(left + bar_width, 1),
                labelled=index % LABEL_EVERY == 0 or index == WEEKS - 1,
            )
        )
    return Chart(weeks, sum(w.learned for w in weeks), sum(w.raised for w in weeks), scale)


def _per_week(queryset, field: str, first: date) -> dict[date, int]:
    """Counts by local day in one query, folded into the Monday that starts each week."""
    by_day = (
        queryset.annotate(day=TruncDate(field, tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(count=Count("pk"))
        .values_list("day", "count")
    )
    weeks: dict[date, int] = {}
    for day, count in by_day:
        monday = day - timedelta(days=day.weekday())
        if monday >= first:
            weeks[monday] = weeks.get(monday, 0) + count
    return weeks


def _bar(x: float, width: float, count: int, scale: int) -> Bar:
    height = (PLOT_BOTTOM - PLOT_TOP) * count / scale
    return Bar(
        round(x, 1), round(PLOT_BOTTOM - height, 1), round(width, 1), round(height, 1), count
    )
