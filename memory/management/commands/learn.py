"""`brain learn [TOPIC]`: a study session on one subject, or on whatever has gone stalest.

Runs here and prints the report (``--background`` hands it to the worker instead). Every
refusal is one line on stderr and a non-zero exit: learning off, a study already running,
nothing to study yet, a topic over the limit, or not allowed to teach this memory.
"""

from __future__ import annotations

import logging

from django.core.management.base import CommandError, CommandParser

from brain.cli import GroupCommand
from knowledge import access
from knowledge.models import Permission
from memory import study
from memory.models import StudySession


class Command(GroupCommand):
    help = "Study a topic now (brain learn energy), or whatever has gone stalest."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("topic", nargs="*", help="what to study (default: the stalest subject)")
        parser.add_argument(
            "--background",
            action="store_true",
            help="hand the session to the worker instead of running it here",
        )

    def handle(
        self, *args, topic: list[str], memory: str, person: str, background: bool, **options
    ) -> None:
        chosen = self.chosen_memory(memory)
        by = self.chosen_person(person)
        access.require(by, chosen, Permission.TEACH)
        started = study.start(memory=chosen, topic=" ".join(topic), by=by, send=background)
        if not started.started:
            raise CommandError(started.message)
        session = started.session
        if background:
            self.stdout.write(
                f"Study session #{session.pk} on {session.topic} handed to the worker."
            )
            return
        self.stdout.write(f"Studying {session.topic}…")
        if options.get("verbosity", 1) < 2:
            logging.disable(logging.CRITICAL)  # the report below says what happened
        try:
            study.execute(session.pk)
        finally:
            logging.disable(logging.NOTSET)
        session.refresh_from_db()
        for line in session.lines:
            self.stdout.write(f"  {line}")
        if session.state != StudySession.State.DONE:
            raise CommandError(session.outcome)
        self.stdout.write(session.report)
