#!/usr/bin/env python
"""Django's command-line utility, and `bin/brain`'s entry point.

``--memory`` and ``--as`` typed before the command's name are moved behind it
(``brain.cli``), and ``brain --help`` lists brain's commands, one line each.

Every word from the terminal is checked here, once, before any command sees it: a word that is
not valid UTF-8 reaches Python as unpaired surrogates (PEP 383), which nothing downstream can
store or embed, so it is refused in one line naming the word. (A NUL cannot be in an argument.)
"""

import os
import sys


def _undecodable(argv: list[str]) -> str | None:
    for position, word in enumerate(argv[1:], start=1):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = word.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            return (
                f"brain: argument {position} (“{shown}”) is not valid UTF-8 text; "
                "check the terminal's encoding and type it again."
            )
    return None


def main() -> None:
    if problem := _undecodable(sys.argv):
        print(problem, file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
    from django.core.management import execute_from_command_line

    from brain import cli

    if sys.argv[1:] in ([], ["-h"], ["--help"], ["help"]):
        import django

        django.setup()
        print(cli.overview())
        return
    execute_from_command_line(cli.command_first(sys.argv))


if __name__ == "__main__":
    main()
