"""A composer that needs no model: folds candidates into the document by rule.

It edits the markdown document line by line. A line it does not change is written back byte for
byte; the title, headings and any text that is not a top-level ``- `` bullet are never changed or
dropped. Only bullets are content it may skip, replace, add or drop:

- each candidate, oldest first, is compared (``knowledge.statements.compare``) with every bullet:
  "same" is skipped, a "contradiction" replaces the bullet in place (newest wins), a
  "refinement" replaces the bullet it refines, anything else is added under the section
  ``knowledge.kinds`` files it under, the section created in the canonical order when missing;
- a failure (something tried that went wrong) is compared only with the other failures and
  filed as "- Avoid: …" under FAILURES_HEADING, a section kept last; a plain bullet that states
  it as advice (a document written before failures had their heading) is taken out, so the
  document never advises what went wrong. A plain fact is compared only with plain bullets;
- over the cap, bullets are dropped lowest value first, oldest first within a value; rules,
  corrections and failures are worth the most;
- the voice distillate is packed from the result, whole lines only, Rules first, within
  VOICE_MAX_BYTES, and leaves the failures out (see ``distil_voice``).

Deterministic: the same document and candidates give byte-identical output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.kinds import SECTIONS, classify, section_for
from knowledge.models import Fact
from knowledge.statements import compare
from memory.composers.base import (
    FAILURES_HEADING,
    VOICE_MAX_BYTES,
    Candidate,
    Composition,
    Request,
    avoid,
    is_avoid_line,
    is_failures_heading,
    says_the_same,
    statement_of,
)

DEFAULT_TITLE = "# Memory"

# Drop order under the cap: lower value goes first.
VALUE_LOW = 0  # a candidate its source was unsure of (confidence "low")
VALUE_NORMAL = 1
VALUE_HIGH = 2  # a Rule, a person's own correction, a failure: the expensive lessons

FORGET_VERDICTS = {"same", "refinement"}  # compare(forget text, bullet): the bullet says it

RETRY_TARGET = 0.9  # on the retry after an over-cap answer, leave a tenth of the cap spare

VOICE_LINE_MAX_BYTES = 240  # one fact should not crowd out the rest of a 2 KB distillate

_TITLE = re.compile(r"^#(?!#)\s")
_HEADING = re.compile(r"^##(?!#)\s*(?P<name>.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(?P<marker>[-*+])\s+(?P<text>\S.*?)\s*$")
_RULER = re.compile(r"^([-*_])(?:\s*\1){2,}\s*$")  # "* * *" is a thematic break, not a bullet
_CANONICAL = {name.casefold(): name for name in SECTIONS}


@dataclass(eq=False)  # lines are told apart by identity: two may have the same text
class _Line:
    """One line of the document; ``raw`` is written back exactly as it is."""

    raw: str
    kind: str  # "title" | "heading" | "bullet" | "text"
    section: str = ""  # the heading it sits under, "" above the first heading
    text: str = ""  # a bullet's statement, without the marker
    value: int = VALUE_NORMAL
    age: tuple[int, int, int] = (0, 0, 0)  # smaller is older

    @property
    def is_failure(self) -> bool:
        """A bullet stating something that went wrong: under the failures heading, or
        written "Avoid: …" anywhere."""
        return self.kind == "bullet" and (
            is_failures_heading(self.section) or is_avoid_line(self.text)
        )


def _parse(document: str) -> list[_Line]:
    """Split ``document`` into lines ("\\n"; a "\\r" stays part of its line) and classify them.

    An existing bullet's age is its place in its section: earlier lines count as older.
    """
    lines: list[_Line] = []
    section = ""
    position_in_section: dict[str, int] = {}
    for position, raw in enumerate(document.split("\n")):
        bare = raw.rstrip("\r")
        heading = _HEADING.match(bare)
        bullet = None if _RULER.match(bare) else _BULLET.match(bare)
        if _TITLE.match(bare):
            lines.append(_Line(raw, "title", section))
        elif heading:
            section = heading.group("name")
            lines.append(_Line(raw, "heading", section))
        elif bullet:
            index = position_in_section.get(section, 0)
            position_in_section[section] = index + 1
            worth_most = _canonical(section) == "Rules" or is_failures_heading(section)
            value = VALUE_HIGH if worth_most else VALUE_NORMAL
            line = _Line(raw, "bullet", section, bullet.group("text"), value, (0, index, position))
            lines.append(line)
        else:
            lines.append(_Line(raw, "text", section))
    return lines


def _render(lines: list[_Line]) -> str:
    return "\n".join(line.raw for line in lines)


def _canonical(section: str) -> str:
    """The canonical section name a heading stands for ("rules" -> "Rules"), else ""."""
    return _CANONICAL.get(section.strip().casefold(), "")


def bullet_text(text: str) -> str:
    """A candidate as a bullet's text: whitespace collapsed, a leading bullet marker removed,
    and a full stop added when it does not already end a sentence. Nothing else changes."""
    text = " ".join(text.split())
    text = re.sub(r"^[-*+]\s+", "", text)
    if text and not re.search(r"[.!?\u2026][\"')\]\u201d\u2019]*$", text):
        text += "."
    return text


# --- Filing one candidate ---------------------------------------------------------------------


def _candidate_value(candidate: Candidate, section: str) -> int:
    if candidate.origin == "correction" or _canonical(section) == "Rules" or candidate.is_failure:
        return VALUE_HIGH
    return VALUE_LOW if candidate.confidence == "low" else VALUE_NORMAL


def _best(lines: list[_Line], text: str, *, failures: bool) -> dict[str, tuple[_Line, str]]:
    """For each verdict, the bullet it applies to most strongly (earliest on a tie), and why.
    Only failures are compared with a failure, and only plain bullets with a plain fact."""
    best: dict[str, tuple[float, _Line, str]] = {}
    text = statement_of(text)
    for line in lines:
        if line.kind != "bullet" or line.is_failure != failures:
            continue
        verdict = compare(statement_of(line.text), text)
        if verdict.verdict not in best or verdict.similarity > best[verdict.verdict][0]:
            best[verdict.verdict] = (verdict.similarity, line, verdict.reason)
    return {name: (line, reason) for name, (_score, line, reason) in best.items()}


def _file(lines: list[_Line], candidate: Candidate, rank: int, eol: str, notes: list[str]) -> None:
    """Fold one candidate into ``lines`` in place and note what was decided."""
    text = bullet_text(candidate.text)
    if not re.search(r"\w", text):
        notes.append(f"skipped a candidate with nothing to say (#{candidate.id})")
        return
    if candidate.action == "forget":
        _forget(lines, text, notes)
        return
    if candidate.is_failure:
        text = bullet_text(avoid(text))
        _displace_advice(lines, text, notes)
    found = _best(lines, text, failures=candidate.is_failure)
    if "same" in found:
        line, reason = found["same"]
        # Said again, so it is still true: under the cap it now counts as new as the candidate.
        line.age = max(line.age, (1, rank, 0))
        line.value = max(line.value, _candidate_value(candidate, line.section))
        notes.append(f"already known: {text} (as “{line.text}”; {reason})")
        return
    for verdict in ("contradiction", "refinement"):
        if verdict in found:
            line, reason = found[verdict]
            notes.append(f"replaced “{line.text}” with “{text}” ({verdict}: {reason})")
            marker = line.raw[0]
            line.raw, line.text = f"{marker} {text}{eol}", text
            line.value, line.age = _candidate_value(candidate, line.section), (1, rank, 0)
            return
    section = FAILURES_HEADING if candidate.is_failure else section_for(text)
    new = _Line(f"- {text}{eol}", "bullet", section, text, VALUE_NORMAL, (1, rank, 0))
    if candidate.is_failure:
        new.section = _insert_failure(lines, new, eol, notes)
    else:
        new.section = _insert(lines, new, section, eol, notes)
    new.value = _candidate_value(candidate, new.section)
    notes.append(f"added under {new.section}: {text}")


def _forget(lines: list[_Line], text: str, notes: list[str]) -> None:
    """Remove every bullet that says what ``text`` says (the same fact, or a fuller version of
    it), "Avoid: …" lines included. A bullet that merely mentions the same things is left
    alone."""
    text = statement_of(text)
    doomed = [
        line
        for line in lines
        if line.kind == "bullet"
        and compare(text, statement_of(line.text)).verdict in FORGET_VERDICTS
    ]
    for line in doomed:
        lines.remove(line)
        notes.append(f"forgot: {line.text}")
    if not doomed:
        notes.append(f"nothing in the document says “{text}”; nothing to forget")


def _displace_advice(lines: list[_Line], failure: str, notes: list[str]) -> None:
    """Take out the plain bullets that state ``failure`` as advice: what went wrong is only
    ever filed as something to avoid."""
    said = statement_of(failure)
    for line in [line for line in lines if line.kind == "bullet" and not line.is_failure]:
        if says_the_same(statement_of(line.text), said):
            lines.remove(line)
            notes.append(f"moved to {FAILURES_HEADING}: {line.text}")


def _insert_failure(lines: list[_Line], new: _Line, eol: str, notes: list[str]) -> str:
    """Put ``new`` at the end of the failures section, creating it after everything else."""
    for index, line in enumerate(lines):
        if line.kind == "heading" and is_failures_heading(line.section):
            lines.insert(_block_end(lines, index), new)
            return line.section
    last = max((i for i, line in enumerate(lines) if line.raw.strip()), default=-1)
    heading = _Line(f"## {FAILURES_HEADING}{eol}", "heading", FAILURES_HEADING)
    blank = _Line(eol, "text", FAILURES_HEADING)
    lines[last + 1 : last + 1] = [blank, heading, new] if last >= 0 else [heading, new]
    notes.append(f"created section {FAILURES_HEADING}")
    return FAILURES_HEADING


def _block_end(lines: list[_Line], heading: int) -> int:
    """Index just after the last non-blank line of the section whose heading is at ``heading``."""
    end = heading + 1
    for index in range(heading + 1, len(lines)):
        if lines[index].kind in ("heading", "title"):
            break
        if lines[index].raw.strip():
            end = index + 1
    return end


def _insert(lines: list[_Line], new: _Line, section: str, eol: str, notes: list[str]) -> str:
    """Put ``new`` at the end of ``section`` (creating it if missing); return the heading name
    it went under, as the document spells it."""
    headings: dict[str, int] = {}
    for index, line in enumerate(lines):
        if line.kind == "heading" and _canonical(line.section):
            headings.setdefault(_canonical(line.section), index)
    if section in headings:
        index = headings[section]
        lines.insert(_block_end(lines, index), new)
        return lines[index].section
    heading = _Line(f"## {section}{eol}", "heading", section)
    blank = _Line(eol, "text", section)
    order = list(SECTIONS)
    before = [headings[s] for s in order[: order.index(section)] if s in headings]
    after = [headings[s] for s in order[order.index(section) + 1 :] if s in headings]
    if before:
        # After the nearest canonical section that comes earlier in the canonical order.
        at = _block_end(lines, max(before))
        lines[at:at] = [blank, heading, new]
    elif after:
        at = min(after)
        lines[at:at] = [heading, new, _Line(eol, "text", section)]
    else:
        last = max((i for i, line in enumerate(lines) if line.raw.strip()), default=-1)
        lines[last + 1 : last + 1] = [blank, heading, new] if last >= 0 else [heading, new]
    notes.append(f"created section {section}")
    return section


# --- The size cap -----------------------------------------------------------------------------


def _enforce_cap(lines: list[_Line], target: int, notes: list[str]) -> None:
    """Drop bullets, lowest value then oldest first, until the document is at most ``target``
    UTF-8 bytes. Headings, the title and the user's other text are never dropped."""
    total = sum(len(line.raw.encode()) for line in lines)
    count = len(lines)
    droppable = sorted((line for line in lines if line.kind == "bullet"), key=_drop_key)
    for line in droppable:
        if total + max(count - 1, 0) <= target:
            return
        lines.remove(line)
        total, count = total - len(line.raw.encode()), count - 1
        notes.append(f"dropped to fit memory_max_kb: {line.text}")
    if total + max(count - 1, 0) > target:
        notes.append("still over memory_max_kb: what is left is headings and hand-written text")


def _drop_key(line: _Line) -> tuple[int, tuple[int, int, int]]:
    return (line.value, line.age)


# --- The voice distillate ---------------------------------------------------------------------


def _voice_rank(section: str, text: str) -> int:
    """Rules, then Preferences, then nicknames, then People, then the rest. A line's section is
    the canonical heading it sits under, else the one ``knowledge.kinds`` files it under."""
    statement = classify(text)
    section = _canonical(section) or statement.section
    if section == "Rules":
        return 0
    if section == "Preferences":
        return 1
    if statement.kind == Fact.Kind.NICKNAME:
        return 2
    return 3 if section == "People" else 4


def distil_voice(document: str) -> str:
    """The voice distillate of ``document``: its bullets as "- " lines, most useful first,
    each whole or not at all, packed within VOICE_MAX_BYTES. A line that does not fit the room
    left is passed over for the next that does; a line longer than VOICE_LINE_MAX_BYTES (one
    fact should not crowd out the rest) comes only after every shorter one. A line is never
    cut: a voice assistant told half a sentence ("…as written in the family diary by…") is
    told something no one said.

    Failures are left out. The distillate is what a voice assistant is told on every spoken
    request (names, rules, preferences); a failure is a lesson for acting, recalled with its
    "Avoid:" by ``knowledge.retrieval.context`` when a task is about it. And a short voice line
    is the kind a small model rephrases or a trim shortens: "Avoid:" lost on the way would turn
    what went wrong into advice, the one thing a failure must never become.
    """
    bullets = [line for line in _parse(document) if line.kind == "bullet" and not line.is_failure]
    entries = [" ".join(line.text.split()) for line in bullets]

    def rank(position: int) -> tuple[bool, int, int]:
        line, entry = bullets[position], entries[position]
        too_long = len(f"- {entry}\n".encode()) > VOICE_LINE_MAX_BYTES
        return (too_long, _voice_rank(line.section, line.text), position)

    out: list[str] = []
    used = 0
    for position in sorted(range(len(bullets)), key=rank):
        entry = f"- {entries[position]}\n"
        size = len(entry.encode())
        if entries[position] and used + size <= VOICE_MAX_BYTES:
            out.append(entry)
            used += size
    return "".join(out)


# --- The composer -----------------------------------------------------------------------------


class OfflineComposer:
    """Files candidates by rule, with no model and no network. See the module docstring."""

    name = "offline"

    def compose(self, request: Request, *, timeout: float | None = None) -> Composition:
        """Return the new document and voice distillate; see ``Composer.compose``.

        With no candidates the document comes back unchanged. ``feedback`` (the retry after an
        over-cap answer) makes the cap stricter: RETRY_TARGET of ``max_bytes``. ``timeout`` is
        not consulted: a pass is one comparison per candidate and bullet, about a second for a
        full 64 KB document and fifty candidates.
        """
        document = request.document
        if not request.candidates:
            unchanged = ["nothing waiting to be filed; the document is unchanged"]
            return Composition(document=document, voice=distil_voice(document), notes=unchanged)
        notes: list[str] = []
        if not document.strip():
            document = f"{DEFAULT_TITLE}\n"
        eol = "\r" if "\r\n" in document else ""
        lines = _parse(document)
        ordered = sorted(request.candidates, key=lambda c: (c.created_at, c.id))
        for rank, candidate in enumerate(ordered):
            _file(lines, candidate, rank, eol, notes)
        target = int(request.max_bytes * RETRY_TARGET) if request.feedback else request.max_bytes
        _enforce_cap(lines, target, notes)
        text = _render(lines)
        return Composition(document=text, voice=distil_voice(text), notes=notes)
