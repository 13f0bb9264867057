"""Progress on long commands, said one way by every command: counted steps, then a summary.

``brain memory import``, ``brain entities sync-ha``, ``make demo`` and re-embedding all report
through :class:`Progress`, so a person reads the same "312/1,000 facts" everywhere.

- On a terminal the count is one line rewritten in place (``\\r``), at most every
  ``TTY_EVERY_S`` seconds (a thousand redraws a second would cost more than the work), and
  always at the last step; the summary replaces it.
- Anywhere else (a pipe, a log file, a test) rewriting in place would leave a garbled line, so
  the count is a new line at the first step, at each tenth of the way and at the last: at most
  a dozen lines however long the work, enough to show it moving in a log.

The counts are of real units of work the caller names ("facts", "entities", "sections"), never
a percentage of time guessed in advance.

Why not tqdm: it redraws with ``\r`` on any stream, so a log or a pipe gets one long line of
overwritten counts rather than a dozen lines, and it writes to a file, not through a management
command's ``OutputWrapper`` (whose ``write`` ends every call with a newline unless told not to,
which breaks a redraw in place). Both would be code around it of about the size of this module,
and one more runtime dependency.
"""

from __future__ import annotations

import time
from typing import TextIO

from django.core.management.base import OutputWrapper

TTY_EVERY_S = 0.1
LOG_STEPS = 10  # lines a non-terminal gets between the first step and the last


class Progress:
    """``Progress(stream, total, "facts", label="Teaching")``; ``advance()`` after each unit of
    work, ``finish("summary")`` at the end. ``total`` may be raised while running (a count only
    known once the work is under way) with ``grow``."""

    def __init__(self, stream: TextIO | OutputWrapper, total: int, noun: str, *, label: str = ""):
        self.stream = stream
        self.total = max(0, total)
        self.noun = noun
        self.label = label
        self.done = 0
        self._tty = _isatty(stream)
        self._drawn_at = 0.0
        self._logged_tenth = -1
        self._width = 0

    def line(self) -> str:
        """What the count says now: "Teaching 312/1,000 facts"."""
        count = f"{self.done:,}/{self.total:,} {self.noun}"
        return f"{self.label} {count}" if self.label else count

    def grow(self, more: int) -> None:
        self.total += max(0, more)

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        self.total = max(self.total, self.done)
        if self._tty:
            now = time.monotonic()
            if now - self._drawn_at >= TTY_EVERY_S or self.done == self.total:
                self._drawn_at = now
                self._redraw(self.line())
            return
        tenth = (self.done * LOG_STEPS) // self.total
        if self.done == steps or self.done == self.total or tenth > self._logged_tenth:
            self._logged_tenth = tenth
            _write(self.stream, self.line() + "\n")

    def say(self, text: str) -> None:
        """A line of its own in the middle of the work (a warning, a phase), the count kept."""
        if self._tty:
            self._redraw("")
            _write(self.stream, text + "\n")
            self._redraw(self.line())
        else:
            _write(self.stream, text + "\n")

    def finish(self, summary: str = "") -> None:
        """Close the count with the summary (on a terminal it replaces the counting line)."""
        if self._tty:
            self._redraw("")
        if summary:
            _write(self.stream, summary + "\n")

    def _redraw(self, text: str) -> None:
        padding = " " * max(0, self._width - len(text))
        _write(self.stream, f"\r{text}{padding}" + ("\r" if not text else ""))
        self._width = len(text)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _write(stream, text: str) -> None:
    if isinstance(stream, OutputWrapper):
        stream.write(text, ending="")
        stream.flush()
    else:
        stream.write(text)
        stream.flush()
