"""What the first `make run` shows while pip installs the requirements (a few minutes on a fresh
machine, which `pip install --quiet` spent in silence): one line per package as pip takes it,
then one for the install and one when it is done. Everything pip said is kept in the log file
named as the argument, and its errors are shown as they come.

    pip install -r requirements.txt 2>&1 | python -m brain.install_progress .venv/pip.log

Standard library only: it runs in the new venv before anything is installed into it, so no
progress library could be used here; pip's own progress bar counts the bytes of one download,
not which package of the many it is on.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable
from typing import TextIO

_COLLECTING = re.compile(r"^Collecting (\S+)")
_INSTALLING = re.compile(r"^Installing collected packages: (.*)")
_INSTALLED = re.compile(r"^Successfully installed (.*)")
_ERROR = re.compile(r"^(ERROR|error)\b")


def progress(lines: Iterable[str], out: TextIO, log: TextIO | None = None) -> None:
    started = time.monotonic()
    collected = 0
    for line in lines:
        if log is not None:
            log.write(line)
        text = line.rstrip("\n")
        if found := _COLLECTING.match(text):
            collected += 1
            _say(out, f"  {collected:>3}  {found.group(1)}")
        elif found := _INSTALLING.match(text):
            count = len(found.group(1).split(", "))
            _say(out, f"installing {count} packages…")
        elif found := _INSTALLED.match(text):
            count = len(found.group(1).split())
            _say(out, f"installed {count} packages in {time.monotonic() - started:.0f} s.")
        elif _ERROR.match(text):
            out.write(text + "\n")
            out.flush()


def _say(out: TextIO, words: str) -> None:
    out.write(f"brain: {words}\n")
    out.flush()


def main() -> None:
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as log:
            progress(sys.stdin, sys.stdout, log)
    else:
        progress(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
