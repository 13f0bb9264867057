"""The memory document as lines: what counts as content, how two versions differ, and how one
change is applied or reverted by line without re-serialising anything else.

A change is a list of line operations. Each operation names the section it sits in and the
line before it, so it can be replayed (or reverted) on a document that has moved on since.
Two versions made from the same one merge by line (``merge``) unless they changed the same or
neighbouring lines: a person's edit of a document a pass filed into meanwhile.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass

TEMPLATE = (
    "# Memory\n\n## House\n\n## People\n\n## Rooms\n\n## Devices\n\n## Preferences\n\n## Routines\n"
)
QUOTE_CHARS = 80  # how much of a line a change's summary quotes


class CannotApply(Exception):
    """A change cannot be applied to the document as it is now; the message says why."""


def size_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def is_heading(line: str) -> bool:
    return line.lstrip().startswith("#")


def content_lines(text: str) -> list[str]:
    """The lines that say something: not blank, not a heading."""
    return [line.strip() for line in text.splitlines() if line.strip() and not is_heading(line)]


def is_effectively_empty(text: str) -> bool:
    return not content_lines(text)


def section_of(lines: list[str], index: int) -> str:
    """The heading text (without #) the line at ``index`` sits under; "" above the first."""
    for line in reversed(lines[: index + 1]):
        if line.startswith("## "):
            return line[3:].strip()
    return ""


def _previous_line(lines: list[str], index: int) -> str | None:
    for line in reversed(lines[:index]):
        if line.strip():
            return line
    return None


@dataclass(frozen=True)
class Operation:
    op: str  # "add" | "remove"
    line: str
    section: str = ""
    after: str | None = None  # the non-blank line just before it, for placing an add

    def inverse(self) -> Operation:
        return Operation(
            "remove" if self.op == "add" else "add", self.line, self.section, self.after
        )

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Operation:
        return cls(
            op=data["op"],
            line=data["line"],
            section=data.get("section", ""),
            after=data.get("after"),
        )


def diff(old: str, new: str) -> list[list[Operation]]:
    """The line changes from ``old`` to ``new``, grouped one group per change a person would
    name: a line added, a line removed, or a line replaced by another."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    groups: list[list[Operation]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed = [
            Operation(
                "remove", old_lines[i], section_of(old_lines, i), _previous_line(old_lines, i)
            )
            for i in range(i1, i2)
            if old_lines[i].strip()
        ]
        added = [
            Operation("add", new_lines[j], section_of(new_lines, j), _previous_line(new_lines, j))
            for j in range(j1, j2)
            if new_lines[j].strip()
        ]
        removed_lines = [op for op in removed if not is_heading(op.line)]
        added_lines = [op for op in added if not is_heading(op.line)]
        paired = min(len(removed_lines), len(added_lines))
        hunk = [[removed_lines[k], added_lines[k]] for k in range(paired)]
        hunk += [[op] for op in removed_lines[paired:]] + [[op] for op in added_lines[paired:]]
        # A heading travels with the first line change of its hunk: "Added under Rules: …"
        # creates the section too, and undoing it removes the section again.
        headings = [op for op in removed + added if is_heading(op.line)]
        if hunk:
            hunk[0] = headings + hunk[0]
        elif headings:
            hunk = [headings]
        groups.extend(hunk)
    return groups


def apply(text: str, operations: list[Operation]) -> str:
    """Apply ``operations`` in order; raise CannotApply naming the first that cannot be."""
    lines = text.splitlines()
    for operation in operations:
        if operation.op == "remove":
            _remove(lines, operation)
        else:
            _add(lines, operation)
    return "\n".join(lines) + ("\n" if lines else "")


def _remove(lines: list[str], operation: Operation) -> None:
    candidates = [i for i, line in enumerate(lines) if line == operation.line]
    if not candidates:
        raise CannotApply(f"“{quote(operation.line)}” is no longer in the document")
    in_section = [i for i in candidates if section_of(lines, i) == operation.section]
    index = (in_section or candidates)[0]
    del lines[index]
    # Keep the blank-line rhythm: do not leave two blank lines where one line stood.
    if 0 < index < len(lines) and not lines[index].strip() and not lines[index - 1].strip():
        del lines[index]


def _add(lines: list[str], operation: Operation) -> None:
    if operation.after is not None and operation.after in lines:
        lines.insert(lines.index(operation.after) + 1, operation.line)
        return
    heading = f"## {operation.section}"
    if operation.section and heading in lines:
        index = lines.index(heading) + 1
        while index < len(lines) and not lines[index].startswith("## "):
            index += 1
        while index > 0 and not lines[index - 1].strip():
            index -= 1
        lines.insert(index, operation.line)
        return
    if operation.section and not is_heading(operation.line):
        lines.extend(["", heading, ""] if lines else [heading, ""])
    lines.append(operation.line)


def merge(base: str, mine: str, theirs: str) -> str:
    """``mine`` and ``theirs``, two versions made from ``base``, as one document: both sets of
    line changes, each where it was made. Raise CannotApply when they changed the same lines or
    lines next to each other (which one should win is for a person to say, not for a diff).
    The same change made on both sides is taken once."""
    base_lines = base.splitlines()
    mine_hunks = _hunks(base_lines, mine.splitlines())
    their_hunks = _hunks(base_lines, theirs.splitlines())
    for start, end, lines in mine_hunks:
        for other_start, other_end, other_lines in their_hunks:
            if (start, end, lines) == (other_start, other_end, other_lines):
                continue
            if start <= other_end and other_start <= end:
                changed = base_lines[start:end] or base_lines[max(start - 1, 0) : start + 1]
                near = next((line for line in changed if line.strip()), "the same place")
                raise CannotApply(f"both versions changed the lines at “{quote(near)}”")
    merged: list[str] = []
    at = 0
    for start, end, lines in sorted(set(mine_hunks) | set(their_hunks)):
        merged.extend(base_lines[at:start])
        merged.extend(lines)
        at = end
    merged.extend(base_lines[at:])
    return "\n".join(merged) + ("\n" if merged else "")


def _hunks(base: list[str], other: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
    """What ``other`` changed in ``base``: (start, end, the lines instead) per changed run."""
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [
        (i1, i2, tuple(other[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def quote(line: str) -> str:
    text = line.strip().removeprefix("- ").strip()
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def describe(operations: list[Operation], *, by_person: bool = False) -> str:
    """One plain-English sentence for a change: "Added under Devices: …" and so on."""
    removes = [op for op in operations if op.op == "remove" and not is_heading(op.line)]
    adds = [op for op in operations if op.op == "add" and not is_heading(op.line)]
    if by_person:
        parts = [f"added “{quote(op.line)}”" for op in adds[:2]]
        parts += [f"removed “{quote(op.line)}”" for op in removes[:2]]
        more = len(adds) + len(removes) - len(parts)
        return (
            "You edited the document: "
            + "; ".join(parts)
            + (f"; and {more} more line{'s' if more != 1 else ''}" if more > 0 else "")
        )
    if len(removes) == 1 and len(adds) == 1:
        return f"Replaced “{quote(removes[0].line)}” with “{quote(adds[0].line)}”"
    if len(adds) == 1 and not removes:
        where = f" under {adds[0].section}" if adds[0].section else ""
        return f"Added{where}: “{quote(adds[0].line)}”"
    if len(removes) == 1 and not adds:
        where = f" from {removes[0].section}" if removes[0].section else ""
        return f"Removed{where}: “{quote(removes[0].line)}”"
    if not adds and not removes:  # only headings: a section made or emptied away
        heading = operations[0]
        verb = "Added" if heading.op == "add" else "Removed"
        return f"{verb} the section “{heading.line.lstrip('#').strip()}”"
    return f"Changed {len(adds) + len(removes)} lines"
