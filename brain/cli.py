"""What every group of brain's terminal commands shares (`bin/brain` runs manage.py).

- ``--memory SLUG`` and ``--as NAME`` go anywhere on the line: ``brain memory list --memory
  garden``, ``brain --memory garden memory list`` and ``brain memory --memory garden list`` are
  one command. A group's parser and each of its verbs' take them (a verb's with no default of
  its own, so one typed before the verb stands), so every verb's ``--help`` lists them too;
  ``command_first`` moves those typed before the group's name behind it, for manage.py.
- A group runs no system checks: they import every URL and view to check them, which a command
  that reads one row does not need (``make run`` and ``manage.py check`` still run them).
- What a command prints is its answer: log lines under a warning (a model chosen, a pass's
  progress) are for servers' logs, and show at the terminal with ``-v 2``.
- ``brain --help`` lists every group in one line each (``overview``).

This module imports no app: a group resolves its memory by the model's name.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from brain.errors import StateConflict, in_words

ANYWHERE = ("--memory", "--as")
MEMORY_HELP = "which memory (default: the default one, usually 'home')"
PERSON_HELP = (
    "act as this person, with what they may do (default: the operator at this terminal, who "
    "administers every memory)"
)


def _takes(word: str) -> str | None:
    """The option ``word`` is (``--memory`` for ``--memory`` or ``--memory=x``), if one that goes
    anywhere."""
    name = word.partition("=")[0]
    return name if name in ANYWHERE else None


def command_first(argv: list[str]) -> list[str]:
    """``brain --memory garden memory list`` → ``brain memory --memory garden list``: the options
    typed before the group's name moved behind it (Django takes the first word as the group)."""
    leading: list[str] = []
    position = 1
    while position < len(argv) and _takes(argv[position]):
        step = 1 if "=" in argv[position] else 2
        leading += argv[position : position + step]
        position += step
    if not leading or position >= len(argv):
        return argv
    return [argv[0], argv[position], *leading, *argv[position + 1 :]]


class GroupCommand(BaseCommand):
    """A group of verbs (``brain memory …``) or one command (``brain reembed``) that takes
    ``--memory`` and ``--as`` anywhere on its line; ``handle`` gets them as ``memory`` and
    ``person``. A group whose ``--memory`` or ``--as`` means something of its own says so in
    ``memory_help`` / ``person_help``.

    A refusal a verb raises (``refusals``: bad input, no permission, the state things are in;
    a group adds its own) ends the command with its words in one line (``errors.in_words``)
    and a non-zero exit, never a traceback."""

    requires_system_checks: list[str] = []
    memory_help = MEMORY_HELP
    person_help = PERSON_HELP
    refusals: tuple[type[Exception], ...] = (ValidationError, PermissionDenied, StateConflict)

    def memory_default(self) -> str:
        return ""

    def execute(self, *args: Any, **options: Any) -> Any:
        if options.get("verbosity", 1) < 2:
            logging.getLogger().setLevel(logging.WARNING)
        try:
            return super().execute(*args, **options)
        except self.refusals as refusal:
            raise CommandError(in_words(refusal)) from None

    def add_anywhere(self, parser: CommandParser, **default: Any) -> None:
        """The options the group and each verb take; ``default`` is empty for a verb (argparse's
        SUPPRESS: a value typed before the verb is not overwritten). A group adds its own."""
        memory_default = default.get("default", self.memory_default())
        parser.add_argument(
            "--memory", metavar="SLUG", default=memory_default, help=self.memory_help
        )
        parser.add_argument(
            "--as",
            dest="person",
            metavar="NAME",
            default=default.get("default", ""),
            help=self.person_help,
        )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        self.add_anywhere(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb in action.choices.values():
                    self.add_anywhere(verb, default=argparse.SUPPRESS)
        return parser

    def chosen_memory(self, slug: str):
        """The memory ``--memory`` names (the default one when empty), or a one-line refusal."""
        from django.apps import apps

        memory_model = apps.get_model("knowledge", "Memory")
        try:
            return memory_model.objects.by_slug(slug)
        except memory_model.DoesNotExist:
            raise CommandError(f"There is no memory called {slug!r}.") from None

    def chosen_person(self, username: str):
        """The person ``--as`` names, None for the operator, or a one-line refusal."""
        from django.contrib.auth import get_user_model

        if not username:
            return None
        try:
            return get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"There is no user called {username!r}.") from None


# brain --help -------------------------------------------------------------------------------

OUR_APPS = ("knowledge", "memory", "review", "agent", "surfaces", "bench", "brain")
WORKER_SUMMARY = "The worker program: serve a memory's model calls from a machine of your own."


def overview() -> str:
    """Every command brain's apps add, one line each, for ``brain --help``."""
    from django.apps import apps
    from django.core.management import find_commands, load_command_class

    lines = []
    for label in OUR_APPS:
        config = apps.get_app_config(label)
        for name in sorted(find_commands(f"{config.path}/management")):
            command = load_command_class(config.name, name)
            summary = " ".join(str(command.help).split()) or "(no description)"
            lines.append(f"  {name:<13} {summary}")
    # bin/brain runs the worker program itself: it needs no Django (brain/worker/).
    lines.append(f"  {'worker':<13} {WORKER_SUMMARY}")
    lines.sort()
    return "\n".join(
        [
            "usage: brain COMMAND [VERB] [--memory SLUG] [--as NAME] [options]",
            "",
            "brain's commands (brain COMMAND --help for each one's verbs and options):",
            *lines,
            "",
            "--memory SLUG (which memory) and --as NAME (act as that person, with what they may",
            "do) go anywhere on the line. Django's own commands (migrate, shell, …): brain help",
            "--commands.",
        ]
    )
