"""`brain mcp`: serve one memory to an agent as MCP tools on stdin/stdout.

An MCP client starts it, e.g. in .mcp.json: {"command": "/path/to/bin/brain", "args": ["mcp"]}.
stdout is the protocol: this command never writes to it, and logs go to stderr.
"""

from __future__ import annotations

from django.core.management.base import CommandParser
from django.db import connection

from brain.cli import GroupCommand
from surfaces.mcp_server import build_server


class Command(GroupCommand):
    help = "Serve a memory to agents as MCP tools on stdio: search, context, write, outcome…"
    # (System checks, which may print, never run: stdout belongs to the protocol.)
    person_help = (
        "act as this person: writes are taught by them, and the agent may read and teach only "
        "what they may (default: no person; the agent administers the memory)"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--user", dest="person", metavar="NAME", default="", help="the same as --as"
        )

    def handle(self, *args, memory: str, person: str, **options) -> None:
        chosen = self.chosen_memory(memory)
        reader = self.chosen_person(person)
        # The tools use their own thread and connection; this one would only sit idle.
        connection.close()
        build_server(chosen, reader).run("stdio")
