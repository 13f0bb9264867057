"""How well the write gate judges a new statement against an old one, on labelled pairs.

``gate_pairs.jsonl`` holds hand-written pairs (an old statement already believed, a new one, who
said each when it matters) with the verdict ``knowledge.gate.relate`` should give:

- same: the new one says the old thing in other words (cases ``paraphrase``, ``restatement``);
- refinement: the old thing with more detail, so the new one may replace it (``refinement``);
- contradiction: both cannot be true at once (``explicit_contradiction``,
  ``implicit_contradiction``, ``negation``, ``same_person_change``);
- novel: both can be true (``template_lookalike``, ``different_person``, ``independent``,
  ``unrelated``).

Scoring. "conflict" (the judge is unsure; both stay live and a person settles it) is correct for
a true contradiction; for a true novel pair it is harmless (it costs a person one question, not a
fact), so it counts as correct and is reported separately; for a paraphrase or a refinement it
is wrong. Precision and recall are computed over that scored verdict. A novel pair judged
contradiction or refinement is a true fact retired (either verdict closes the old fact); a
negation pair judged same is a negation merged.

Targets, and why:

- contradiction precision ≥ 0.97: a wrong contradiction silently retires a true fact, the harm
  users reported; a missed one leaves two facts live, which recall and review can still catch;
- negations merged = 0: merging "X" with "not X" keeps one of two opposite statements and
  throws away the word that mattered;
- same recall ≥ 0.8 at same precision ≥ 0.95: a missed paraphrase costs a duplicate row, a wrong
  "same" loses a fact, so precision is held higher than recall;
- accuracy ≥ 0.9 over every pair.

Splits. About 30% of every case is ``held_out`` and never a ``hard`` pair: tune on ``dev``, read
``held_out`` to see whether the tuning generalises. ``hard`` pairs (every pair from the user
report and the sharpest of each case) are in ``dev`` and pinned by
``knowledge/tests/test_gate_pairs.py``.

``python -m bench.gate_quality --split dev --embedder minilm --misses 20`` prints the figures and
the pairs judged wrongly; :func:`gate_quality` is the section ``make bench`` writes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.test.utils import override_settings

from knowledge.embedding import (
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    get_embedder,
    minilm_available,
)

PAIRS_FILE = Path(__file__).with_name("gate_pairs.jsonl")

LABELS = ("same", "refinement", "contradiction", "novel")
#: Each case and the one label its pairs carry.
CASES = {
    "paraphrase": "same",
    "restatement": "same",
    "refinement": "refinement",
    "explicit_contradiction": "contradiction",
    "implicit_contradiction": "contradiction",
    "negation": "contradiction",
    "same_person_change": "contradiction",
    "template_lookalike": "novel",
    "different_person": "novel",
    "independent": "novel",
    "unrelated": "novel",
    # From conversation: a greeting or thanks beside a statement, two people's statements that
    # read alike, a stated value, owner, date, place or state that changed, and one person (or
    # two, about one thing in the house) saying the same thing again.
    "greeting": "novel",
    "thanks": "novel",
    "two_speakers": "novel",
    "change_of_value": "contradiction",
    "change_of_owner": "contradiction",
    "change_of_date": "contradiction",
    "change_of_place": "contradiction",
    "change_of_state": "contradiction",
    "conversation_restatement": "same",
}
DOMAINS = ("household", "coding", "team", "conversation")
SPLITS = ("dev", "held_out")
VERDICTS = (*LABELS, "conflict")  # what relate() may answer

CONTRADICTION_PRECISION = 0.97
SAME_RECALL = 0.8
SAME_PRECISION = 0.95
ACCURACY = 0.9

_REQUIRED = {
    "id": str,
    "domain": str,
    "case": str,
    "old": str,
    "new": str,
    "label": str,
    "split": str,
    "hard": bool,
    "from_issue": bool,
}
_OPTIONAL = {"old_by": str, "new_by": str, "note": str}


class PairsError(ValueError):
    """A line of the pairs file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Pair:
    id: str
    domain: str
    case: str
    old: str
    new: str
    label: str
    split: str
    hard: bool
    from_issue: bool
    old_by: str = ""
    new_by: str = ""
    note: str = ""


def load_pairs(path: Path | str | None = None) -> list[Pair]:
    """Every pair in ``path`` (``gate_pairs.jsonl`` by default), in file order.

    Raises :class:`PairsError` naming the line on the first line that is not a JSON object
    with the known fields, a known case, domain and split, the case's label, non-empty texts
    and an id not used before. Blank lines are skipped.
    """
    path = Path(path) if path is not None else PAIRS_FILE
    pairs: list[Pair] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue

        def fail(problem: str, number: int = number) -> PairsError:
            return PairsError(f"{path}, line {number}: {problem}")

        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise fail(f"not valid JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise fail("not a JSON object")
        if missing := [key for key in _REQUIRED if key not in row]:
            raise fail(f"missing {', '.join(missing)}")
        if unknown := sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL)):
            raise fail(f"unknown field {', '.join(unknown)}")
        for key, kind in (_REQUIRED | _OPTIONAL).items():
            if key in row and not isinstance(row[key], kind):
                raise fail(f"{key} must be a {kind.__name__}, not {row[key]!r}")
        if row["case"] not in CASES:
            raise fail(f"unknown case {row['case']!r} (one of {', '.join(CASES)})")
        if row["label"] not in LABELS:
            raise fail(f"unknown label {row['label']!r} (one of {', '.join(LABELS)})")
        if row["label"] != CASES[row["case"]]:
            raise fail(f"a {row['case']} pair is labelled {CASES[row['case']]}, not {row['label']}")
        if row["split"] not in SPLITS:
            raise fail(f"unknown split {row['split']!r} (one of {', '.join(SPLITS)})")
        if row["domain"] not in DOMAINS:
            raise fail(f"unknown domain {row['domain']!r} (one of {', '.join(DOMAINS)})")
        for key in ("id", "old", "new"):
            if not row[key].strip():
                raise fail(f"{key} is empty")
        if row["id"] in seen:
            raise fail(f"id {row['id']} is used already on line {seen[row['id']]}")
        seen[row["id"]] = number
        pairs.append(Pair(**row))
    return pairs


# --- Judging ---------------------------------------------------------------------------------


def scored(label: str, verdict: str) -> str:
    """The verdict as scored: "conflict" counts as the label when the label is contradiction
    or novel (see the module docstring), and stays "conflict" (wrong) otherwise."""
    if verdict == "conflict" and label in ("contradiction", "novel"):
        return label
    return verdict


@dataclass(frozen=True)
class Judged:
    pair: Pair
    verdict: str
    reason: str
    seconds: float

    @property
    def correct(self) -> bool:
        return scored(self.pair.label, self.verdict) == self.pair.label


def evaluate(pairs: Sequence[Pair], *, embedder: Embedder) -> Report:
    """Judge every pair with ``knowledge.gate.relate``, both statements embedded by ``embedder``
    (every distinct text once, in one batch), each judgement timed.

    Raises ``ValueError`` if the gate answers a verdict it has no business giving.
    """
    # The gate reads the models module, which needs Django set up: imported here so that
    # ``python -m bench.gate_quality`` can set Django up first.
    from knowledge.gate import Said, relate

    texts = list(dict.fromkeys(text for pair in pairs for text in (pair.old, pair.new)))
    started = time.perf_counter()
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    embed_seconds = time.perf_counter() - started

    def said(pair: Pair) -> tuple[Said, Said]:
        return (
            Said(pair.old, pair.old_by, vectors[pair.old]),
            Said(pair.new, pair.new_by, vectors[pair.new]),
        )

    if pairs:
        relate(*said(pairs[0]))  # warm up: first-call costs are not a judgement's
    judged: list[Judged] = []
    for pair in pairs:
        old, new = said(pair)
        started = time.perf_counter()
        relation = relate(old, new)
        seconds = time.perf_counter() - started
        if relation.verdict not in VERDICTS:
            raise ValueError(f"{pair.id}: the gate answered {relation.verdict!r}")
        judged.append(Judged(pair, relation.verdict, relation.reason, seconds))
    return Report(embedder.name, tuple(judged), embed_seconds, len(texts))


@dataclass(frozen=True)
class Target:
    name: str
    value: str
    met: bool


@dataclass(frozen=True)
class Figures:
    """The scores of one split (or of every pair)."""

    count: int
    accuracy: float | None
    precision: dict[str, float | None]
    recall: dict[str, float | None]
    retired: int  # label novel, judged contradiction or refinement
    novel: int
    negations_merged: int  # case negation, judged same
    negations: int
    conflicts: dict[str, int]  # conflicts opened, by label
    cases: dict[str, tuple[int, float | None]]  # case: (pairs, accuracy)

    @classmethod
    def of(cls, judged: Sequence[Judged]) -> Figures:
        precision: dict[str, float | None] = {}
        recall: dict[str, float | None] = {}
        for verdict in LABELS:
            said = [j for j in judged if scored(j.pair.label, j.verdict) == verdict]
            truly = [j for j in judged if j.pair.label == verdict]
            hits = sum(j.pair.label == verdict for j in said)
            precision[verdict] = _share(hits, len(said))
            recall[verdict] = _share(hits, len(truly))
        cases = {}
        for case in CASES:
            of_case = [j for j in judged if j.pair.case == case]
            cases[case] = (len(of_case), _share(sum(j.correct for j in of_case), len(of_case)))
        return cls(
            count=len(judged),
            accuracy=_share(sum(j.correct for j in judged), len(judged)),
            precision=precision,
            recall=recall,
            retired=sum(
                j.pair.label == "novel" and j.verdict in ("contradiction", "refinement")
                for j in judged
            ),
            novel=sum(j.pair.label == "novel" for j in judged),
            negations_merged=sum(j.pair.case == "negation" and j.verdict == "same" for j in judged),
            negations=sum(j.pair.case == "negation" for j in judged),
            conflicts={
                label: sum(j.pair.label == label and j.verdict == "conflict" for j in judged)
                for label in LABELS
            },
            cases=cases,
        )

    def targets(self) -> list[Target]:
        """The four targets, each with its figure; an undefined precision is not met."""
        contradiction = self.precision["contradiction"]
        same_p, same_r = self.precision["same"], self.recall["same"]
        return [
            Target(
                f"contradiction precision ≥ {CONTRADICTION_PRECISION}",
                _ratio(contradiction),
                contradiction is not None and contradiction >= CONTRADICTION_PRECISION,
            ),
            Target(
                "negations merged = 0",
                f"{self.negations_merged} of {self.negations}",
                self.negations_merged == 0,
            ),
            Target(
                f"same recall ≥ {SAME_RECALL} at precision ≥ {SAME_PRECISION}",
                f"{_ratio(same_r)} at {_ratio(same_p)}",
                same_r is not None
                and same_p is not None
                and same_r >= SAME_RECALL
                and same_p >= SAME_PRECISION,
            ),
            Target(
                f"accuracy ≥ {ACCURACY}",
                _ratio(self.accuracy),
                self.accuracy is not None and self.accuracy >= ACCURACY,
            ),
        ]


@dataclass(frozen=True)
class Report:
    embedder: str  # the embedder's versioned name
    judged: tuple[Judged, ...]
    embed_seconds: float  # embedding every distinct text, batched
    texts_embedded: int

    def of_split(self, split: str = "all") -> list[Judged]:
        if split != "all" and split not in SPLITS:
            raise ValueError(f"unknown split {split!r} (one of {', '.join(SPLITS)}, all)")
        return [j for j in self.judged if split == "all" or j.pair.split == split]

    def figures(self, split: str = "all") -> Figures:
        return Figures.of(self.of_split(split))

    def misses(self, split: str = "all") -> list[Judged]:
        return [j for j in self.of_split(split) if not j.correct]

    @property
    def judgement_seconds(self) -> tuple[float, float]:
        """Median and mean seconds per judgement."""
        seconds = [j.seconds for j in self.judged] or [0.0]
        return statistics.median(seconds), statistics.fmean(seconds)

    @property
    def embedding_seconds(self) -> float:
        """Seconds per text embedded, batched."""
        return self.embed_seconds / max(self.texts_embedded, 1)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1e3:.2f} ms"


# --- The embedders ---------------------------------------------------------------------------

EMBEDDERS = {"minilm": MiniLMEmbedder.name, "hash": HashEmbedder.name}


@contextmanager
def using_embedder(choice: str) -> Iterator[Embedder]:
    """``settings.BRAIN_EMBEDDER`` set to ``choice`` for the block, and the embedder it picks.

    ``get_embedder`` reads the setting on every call (only the MiniLM model and the check that
    its packages import are kept per process), so code inside the block that asks for the
    embedder itself gets this one too. Checked by name rather than trusted: the block gets the
    hash embedder for "minilm" only when the MiniLM packages are missing, and then the report
    carries the hash embedder's name.
    """
    with override_settings(BRAIN_EMBEDDER=choice):
        embedder = get_embedder()
        fell_back = choice == "minilm" and not minilm_available()
        if embedder.name != EMBEDDERS[choice] and not fell_back:
            raise RuntimeError(
                f"BRAIN_EMBEDDER={choice!r} gave the {embedder.name} embedder, not "
                f"{EMBEDDERS[choice]}"
            )
        yield embedder


# --- Reporting -------------------------------------------------------------------------------

Column = tuple[str, Figures]


def _table(header: str, columns: Sequence[Column], rows: Iterable[tuple[str, Callable]]) -> str:
    lines = [
        f"| {header} | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name, cell in rows:
        lines.append(f"| {name} | " + " | ".join(cell(figures) for _, figures in columns) + " |")
    return "\n".join(lines)


def _target_cell(index: int) -> Callable[[Figures], str]:
    def cell(figures: Figures) -> str:
        target = figures.targets()[index]
        return f"{target.value}, {'met' if target.met else '**not met**'}"

    return cell


def targets_table(columns: Sequence[Column]) -> str:
    names = [target.name for target in columns[0][1].targets()]
    return _table("target", columns, [(n, _target_cell(i)) for i, n in enumerate(names)])


def verdicts_table(columns: Sequence[Column]) -> str:
    rows: list[tuple[str, Callable]] = []
    for verdict in LABELS:
        rows.append((f"{verdict}: precision", lambda f, v=verdict: _ratio(f.precision[v])))
        rows.append((f"{verdict}: recall", lambda f, v=verdict: _ratio(f.recall[v])))
    rows += [
        ("accuracy", lambda f: _ratio(f.accuracy)),
        ("true facts retired (novel judged contradiction or refinement)",
         lambda f: f"{f.retired} of {f.novel}"),
        ("negations merged (judged same)", lambda f: f"{f.negations_merged} of {f.negations}"),
    ]  # fmt: skip
    for label in LABELS:
        rows.append(
            (f"conflicts opened on {label} pairs", lambda f, la=label: f"{f.conflicts[la]}")
        )
    return _table("measure", columns, rows)


def cases_table(columns: Sequence[Column]) -> str:
    rows = [
        (f"{case} ({label})", lambda f, c=case: _ratio(f.cases[c][1]))
        for case, label in CASES.items()
    ]
    return _table("accuracy by case", columns, rows)


def report_text(report: Report, split: str) -> str:
    """One embedder and one split, for the terminal."""
    figures = report.figures(split)
    columns = [(f"{report.embedder}, {split} ({figures.count} pairs)", figures)]
    median, mean = report.judgement_seconds
    return "\n\n".join(
        [
            targets_table(columns),
            verdicts_table(columns),
            cases_table(columns),
            f"Per judgement: {_duration(median)} median, {_duration(mean)} mean; embedding, "
            f"batched: {_duration(report.embedding_seconds)} per statement.",
        ]
    )


def misses_text(misses: Sequence[Judged]) -> str:
    lines = []
    for j in misses:
        pair = j.pair
        old_by = f" ({pair.old_by})" if pair.old_by else ""
        new_by = f" ({pair.new_by})" if pair.new_by else ""
        lines += [
            f"{pair.id} {pair.case}: expected {pair.label}, judged {j.verdict} — {j.reason}",
            f"    old{old_by}: {pair.old}",
            f"    new{new_by}: {pair.new}",
        ]
    return "\n".join(lines)


#: The cases from conversation, where "same" across two people or between talk and a fact
#: loses a statement.
CONVERSATIONAL = (
    "greeting",
    "thanks",
    "two_speakers",
    "change_of_value",
    "change_of_owner",
    "change_of_date",
    "change_of_place",
    "change_of_state",
    "conversation_restatement",
)
THRESHOLDS = (0.70, 0.75, 0.78, 0.80, 0.82, 0.85, 0.88, 0.90)


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    all: Figures
    conversation: Figures
    wrong_merges: int  # conversational pairs not labelled same, judged same


def threshold_sweep(pairs: Sequence[Pair], *, embedder: Embedder) -> list[ThresholdRow]:
    """Every pair judged again at each of THRESHOLDS for ``gate.SAME_MEANING`` (meaning's
    say in "same"), the conversational pairs apart: what the threshold trades."""
    from knowledge import gate

    kept = gate.SAME_MEANING
    rows = []
    try:
        for threshold in THRESHOLDS:
            gate.SAME_MEANING = threshold
            report = evaluate(pairs, embedder=embedder)
            spoken = [j for j in report.judged if j.pair.case in CONVERSATIONAL]
            wrong = sum(j.verdict == "same" and j.pair.label != "same" for j in spoken)
            rows.append(ThresholdRow(threshold, report.figures("all"), Figures.of(spoken), wrong))
    finally:
        gate.SAME_MEANING = kept
    return rows


def sweep_table(rows: Sequence[ThresholdRow], current: float) -> str:
    lines = [
        "| SAME_MEANING | same precision / recall, all pairs | accuracy, all | "
        "same precision / recall, from conversation | conversational pairs merged wrongly |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        mark = " (in use)" if abs(row.threshold - current) < 1e-9 else ""
        lines.append(
            f"| {row.threshold:.2f}{mark} | {_ratio(row.all.precision['same'])} / "
            f"{_ratio(row.all.recall['same'])} | {_ratio(row.all.accuracy)} | "
            f"{_ratio(row.conversation.precision['same'])} / "
            f"{_ratio(row.conversation.recall['same'])} | {row.wrong_merges} |"
        )
    return "\n".join(lines)


def gate_quality() -> str:
    """The docs/BENCHMARKS.md section: every pair judged with the MiniLM and the hash embedder,
    and the meaning threshold swept with MiniLM."""
    from knowledge import gate

    pairs = load_pairs()
    reports = []
    sweep: list[ThresholdRow] = []
    for choice in EMBEDDERS:
        with using_embedder(choice) as embedder:
            reports.append(evaluate(pairs, embedder=embedder))
            if choice == "minilm":
                sweep = threshold_sweep(pairs, embedder=embedder)
    text = gate_quality_markdown(pairs, reports)
    if sweep:
        conversational = sum(pair.case in CONVERSATIONAL for pair in pairs)
        text += (
            "\nThe meaning threshold (`gate.SAME_MEANING`: the cosine above which two statements "
            "nothing in their words tells apart are the same), swept with "
            f"`{reports[0].embedder}` over every pair and over the {conversational} from "
            "conversation (greetings, thanks, two speakers, changes, restatements): a merge "
            "there joins a greeting to news, two people's statements, or a change to what it "
            "changed.\n\n" + sweep_table(sweep, gate.SAME_MEANING) + "\n"
        )
    return text


def gate_quality_markdown(pairs: Sequence[Pair], reports: Sequence[Report]) -> str:
    def count(**where: object) -> int:
        return sum(all(getattr(p, k) == v for k, v in where.items()) for p in pairs)

    held_out = count(split="held_out")
    columns = [
        (f"{report.embedder} {name}", report.figures(split))
        for report in reports
        for split, name in (("dev", "dev"), ("held_out", "held-out"), ("all", "all"))
    ]
    cases = ", ".join(f"{case} {count(case=case)}" for case in CASES)
    timing = [
        "| embedder | per judgement (median / mean) | baseline: embedding one statement, "
        "batched | judgement vs embedding |",
        "|---|---:|---:|---:|",
    ]
    for report in reports:
        median, mean = report.judgement_seconds
        timing.append(
            f"| {report.embedder} | {_duration(median)} / {_duration(mean)} | "
            f"{_duration(report.embedding_seconds)} | "
            f"{median / report.embedding_seconds:.3f}× |"
        )
    intro = (
        f"{len(pairs)} hand-written pairs in `bench/gate_pairs.jsonl` "
        f"({count(domain='household')} household, {count(domain='coding')} coding agents, "
        f"{count(domain='team')} team): a statement already believed, a new one, and the verdict "
        "`knowledge.gate.relate` should give (same, refinement, contradiction or novel). By "
        f"case: {cases}. {count(hard=True)} are hard (every pair from the user report, "
        f"{count(from_issue=True)}, and the sharpest of each case; "
        f"`knowledge/tests/test_gate_pairs.py` pins them); {held_out} "
        f"({held_out / len(pairs):.0%}, stratified by case) are held out from tuning. Each "
        "statement is embedded once per embedder, in one batch. A conflict verdict counts as "
        "correct for a contradiction, as harmless (correct, counted apart) for a novel pair, and "
        "as wrong otherwise. Targets and their reasons are in `bench/gate_quality.py`."
    )
    sections = [
        "## The write gate on labelled statement pairs",
        intro,
        targets_table(columns),
        verdicts_table(columns),
        cases_table(columns),
        "Time per judgement (`relate` alone, the embeddings computed beforehand), against the "
        "embedder's own time per statement in the same run:\n\n" + "\n".join(timing),
    ]
    return "\n\n".join(sections) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gate_quality",
        description="Score the write gate on the labelled pairs and list the pairs it misses.",
    )
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="dev")
    parser.add_argument("--embedder", choices=list(EMBEDDERS), default="minilm")
    parser.add_argument("--misses", type=int, default=10, metavar="N")
    args = parser.parse_args(argv)
    with using_embedder(args.embedder) as embedder:
        report = evaluate(load_pairs(), embedder=embedder)
    print(report_text(report, args.split))
    misses = report.misses(args.split)
    if args.misses > 0 and misses:
        print(f"\nFirst {min(args.misses, len(misses))} of {len(misses)} pairs judged wrongly:\n")
        print(misses_text(misses[: args.misses]))


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
    django.setup()
    main()
