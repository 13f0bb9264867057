"""`brain memory hypotheses | confirm N | reject N [--reason …]`: guesses from the terminal.

They answer exactly as the Findings tab's buttons do (``guesses.answer_guess``): confirm files
the guess as known, reject closes it for good in any wording and keeps the reason as a
correction; answering twice is refused, saying who answered first. The `brain memory` command
(``surfaces``) adds these verbs beside its own (``VERBS``, ``add_parsers``, ``run``).
"""

from __future__ import annotations

from django.core.management.base import CommandError
from django.utils import timezone

from knowledge.models import Permission
from review.models import MAX_REASON, Guess

# What each verb needs (knowledge/access.py): answering a guess is teaching, as on the page.
VERBS = {
    "hypotheses": Permission.READ,
    "confirm": Permission.TEACH,
    "reject": Permission.TEACH,
}
# The order they are listed in: what waits on you first, then what you answered.
LISTED = (
    Guess.State.OPEN,
    Guess.State.SLEEPING,
    Guess.State.WAITING,
    Guess.State.CONFIRMED,
    Guess.State.REJECTED,
)
HEADINGS = {
    Guess.State.OPEN: "Open, waiting on a yes or a no",
    Guess.State.SLEEPING: "Sleeping (dismissed for now; back later with a fresh fortnight)",
    Guess.State.WAITING: "Worked out, waiting for a free slot",
    Guess.State.CONFIRMED: "Confirmed",
    Guess.State.REJECTED: "Rejected (never asked again, in any wording)",
}


def add_parsers(verbs) -> None:
    verbs.add_parser("hypotheses", help="guesses: open, sleeping, confirmed and rejected")
    confirm = verbs.add_parser("confirm", help="answer guess N yes: it is filed as known")
    confirm.add_argument("number", type=int)
    reject = verbs.add_parser("reject", help="answer guess N no: it is never asked again")
    reject.add_argument("number", type=int)
    reject.add_argument("--reason", default="", help="what brain misread (kept as a correction)")


def run(command, verb: str, **options) -> None:
    """Run ``verb`` for the memory command ``command`` (its memory, person and stdout)."""
    if verb == "hypotheses":
        _list(command)
    else:
        _answer(command, options["number"], "yes" if verb == "confirm" else "no", options)


def _list(command) -> None:
    rows = (
        Guess.objects.for_memory(command.memory)
        .filter(state__in=LISTED)
        .select_related("answered_by")
        .order_by("created_at", "pk")
    )
    by_state: dict[str, list[Guess]] = {}
    for guess in rows:
        by_state.setdefault(guess.state, []).append(guess)
    if not by_state:
        command.stdout.write("No guesses yet: brain has not proposed any.")
        return
    for state in LISTED:
        listed = by_state.get(state, [])
        if not listed:
            continue
        command.stdout.write(f"{HEADINGS[state]}:")
        for guess in listed:
            command.stdout.write(f"  #{guess.pk}  {guess.question}{_about(guess)}")
    waiting = len(by_state.get(Guess.State.OPEN, []))
    command.stdout.write(
        f"{waiting} waiting on you: brain memory confirm N, or reject N --reason …"
        if waiting
        else "Nothing waits on you."
    )


def _about(guess: Guess) -> str:
    if guess.state == Guess.State.OPEN and guess.expires_at:
        return f"  (until {timezone.localtime(guess.expires_at):%-d %b})"
    if guess.answered_at:
        who = f" by {guess.answered_by.get_username()}" if guess.answered_by else ""
        why = f": {guess.reason}" if guess.reason else ""
        return f"  ({timezone.localtime(guess.answered_at):%-d %b}{who}{why})"
    return ""


def _answer(command, number: int, answer: str, options: dict) -> None:
    guess = Guess.objects.for_memory(command.memory).filter(pk=number).first()
    if guess is None:
        raise CommandError(f"There is no guess #{number} in {command.memory.name}.")
    reason = " ".join((options.get("reason") or "").split())
    if len(reason) > MAX_REASON:
        raise CommandError(f"The reason is {len(reason):,} characters; the limit is {MAX_REASON}.")
    from review import guesses  # with what it imports, most of a second: only when answering

    answered = guesses.answer_guess(guess=guess, answer=answer, by=command.person, reason=reason)
    command.stdout.write(f"“{guess.text}”: {answered.message}")
