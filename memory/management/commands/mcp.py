"""`brain mcp`: serve one memory to an agent as MCP tools on stdin/stdout.

An MCP client starts it, e.g. in .mcp.json: {"command": "/path/to/bin/brain", "args": ["mcp"]}.
stdout is the protocol: this command never writes to it, and logs go to stderr.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from knowledge.models import Memory
from memory.mcp_server import build_server


class Command(BaseCommand):
    help = "Serve a memory to an agent over MCP (stdio): search, context, write, outcome, explain."
    # System checks may print, and stdout belongs to the protocol.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--memory",
            metavar="SLUG",
            default="",
            help="which memory (default: the default one, usually 'home')",
        )
        parser.add_argument(
            "--user",
            metavar="USERNAME",
            default="",
            help="act as this person: writes are taught by them, and the agent may read and "
            "teach only what they may (default: no person; the agent administers the memory)",
        )

    def handle(self, *args, memory: str, user: str, **options) -> None:
        try:
            chosen = Memory.objects.by_slug(memory)
        except Memory.DoesNotExist:
            raise CommandError(f"There is no memory called {memory!r}.") from None
        person = None
        if user:
            try:
                person = get_user_model().objects.get_by_natural_key(user)
            except get_user_model().DoesNotExist:
                raise CommandError(f"There is no user called {user!r}.") from None
        # The tools use their own thread and connection; this one would only sit idle.
        connection.close()
        build_server(chosen, person).run("stdio")
