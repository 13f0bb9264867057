"""`brain agent …`: an agent's memory from the terminal, and its Claude Code hooks.

    brain agent encode "Chunking the CSV to 20MB completed validation" --outcome ok
    brain agent retrieve "validate the CSV" -k 3
    brain agent context "run the validation batch" --budget 600
    brain agent outcome 12 ok
    brain agent explain 12
    brain agent procedure "validate the CSV" --step "split it in 20MB parts" --step "validate"
    brain agent stats
    brain agent consolidate          # the sleep pass: distil, then decay and prune
    brain agent install [--project DIR]
    brain agent uninstall [--project DIR]

Against the local database by default; against a running server with ``--server URL --token
T`` (or the environment: BRAIN_URL, BRAIN_TOKEN, and BRAIN_MEMORY for ``--memory``), through the
same API every other client uses. Both ways print the same thing.

Every refusal is one line on stderr and a non-zero exit, never a traceback. The outcome
vocabulary is closed: ok, fail (and unknown for an episode); "success" and "failure" are
refused, not read as the nearest word.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError, CommandParser

from agent import actions as agent_actions
from agent import hooks, install
from brain import run
from brain.cli import GroupCommand
from knowledge import access, provenance, retrieval
from knowledge.models import Fact, Memory, Permission, name_of
from knowledge.read_layer import reader_for

# What each verb needs in the memory (knowledge/access.py), when run locally.
NEEDS = {
    "encode": Permission.TEACH,
    "retrieve": Permission.READ,
    "context": Permission.READ,
    "outcome": Permission.TEACH,
    "explain": Permission.READ,
    "stats": Permission.READ,
    "consolidate": Permission.TEACH,
    "procedure": Permission.TEACH,
}
_AVOID = re.compile(r"^\s*avoid\b\s*:?\s*", re.IGNORECASE)  # a failure taught as "Avoid: …"
OUTCOMES = ("ok", "fail")  # what acting on a fact did; an episode may also be "unknown"


class Command(GroupCommand):
    help = "An agent's memory (episodes, recall, outcomes, sleep) and its Claude Code hooks."
    memory_help = (
        "which memory (default: $BRAIN_MEMORY, else the default one); install: the memory the "
        "hooks and the MCP server use"
    )
    person_help = "locally, act as this person with what they may do (default: the operator)"

    def memory_default(self) -> str:
        return os.environ.get(hooks.MEMORY_VARIABLE, "")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        _one_line_errors(parser)
        return parser

    def add_anywhere(self, parser: CommandParser, **default) -> None:
        super().add_anywhere(parser, **default)
        parser.add_argument(
            "--server",
            metavar="URL",
            default=default.get("default", os.environ.get(hooks.URL_VARIABLE, "")),
            help="work against this running brain (default: $BRAIN_URL; unset: the local "
            "database). install: the brain the hooks ask (default: $BRAIN_URL, else "
            "$BRAIN_PORT on 127.0.0.1, else the running make run, else http://127.0.0.1:8000)",
        )
        parser.add_argument(
            "--token",
            metavar="TOKEN",
            default=default.get("default", os.environ.get(hooks.TOKEN_VARIABLE, "")),
            help="API token for --server (default: $BRAIN_TOKEN; make one under Admin → Tokens). "
            "install: the token the hooks use (default: one made or reused for --user)",
        )

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        _one_line_errors(verbs)
        encode = verbs.add_parser("encode", help="record what happened, with its outcome")
        encode.add_argument("text")
        encode.add_argument("--outcome", default="unknown", help="ok, fail or unknown")
        retrieve = verbs.add_parser("retrieve", help="the k facts that best answer a question")
        retrieve.add_argument("query")
        retrieve.add_argument("-k", type=int, default=3)
        context = verbs.add_parser("context", help="the memory block for a goal")
        context.add_argument("goal")
        context.add_argument("--budget", type=int, default=hooks.DEFAULT_BUDGET)
        outcome = verbs.add_parser("outcome", help="did acting on fact ID work? ok or fail")
        outcome.add_argument("ref", metavar="ID")
        outcome.add_argument("outcome", metavar="ok|fail")
        explain = verbs.add_parser("explain", help="why brain believes fact ID")
        explain.add_argument("fact_id", metavar="ID", type=int)
        procedure = verbs.add_parser("procedure", help="record a run of a way of doing a task")
        procedure.add_argument("task")
        procedure.add_argument(
            "--step", dest="steps", action="append", default=[], help="one step, in order"
        )
        procedure.add_argument("--outcome", default="unknown", help="ok, fail or unknown")
        verbs.add_parser("stats", help="how much is known, pending and retired")
        verbs.add_parser("consolidate", help="the sleep pass: distil, decay, prune")
        installing = verbs.add_parser(
            "install",
            help="wire brain into Claude Code",
            description="Wire brain into Claude Code: a SessionStart hook (the memory block "
            "before the first turn), a SessionEnd hook (the sleep pass), the brain MCP server, "
            "and Claude Code's own auto memory off. Every change is printed; uninstall takes "
            "out exactly what install made. docs/AGENT.md has the files it writes.",
        )
        installing.add_argument(
            "--project",
            metavar="DIR",
            default="",
            help="one project only: its folder's .claude/settings.json and .mcp.json "
            "(default: your Claude Code settings, for every project)",
        )
        installing.add_argument(
            "--user",
            metavar="USERNAME",
            default="",
            help="whose token the hooks use and whom the MCP server acts as "
            f"(default: {settings.BRAIN_ADMIN_USERNAME})",
        )
        uninstalling = verbs.add_parser(
            "uninstall",
            help="take out what install added",
            description="Take out exactly what brain agent install added, and put Claude "
            "Code's auto memory back as it was.",
        )
        uninstalling.add_argument(
            "--project",
            metavar="DIR",
            default="",
            help="the project install was run for (default: your Claude Code settings)",
        )

    def handle(self, *args, verb: str, memory: str, server: str, token: str, person: str, **opts):
        try:
            if verb == "install":
                self.stdout.write(_install(memory, server, token, **opts))
            elif verb == "uninstall":
                self.stdout.write(_uninstall(**opts))
            elif server:
                connection = hooks.Connection(url=server, token=token, memory=memory)
                self.stdout.write(getattr(Remote(connection), verb)(**opts))
            else:
                local = Local(memory, person)
                access.require(local.person, local.memory, NEEDS[verb])
                self.stdout.write(getattr(local, verb)(**opts))
        except (
            hooks.ServerError,
            install.CannotInstall,
            PermissionDenied,
            retrieval.BadBudget,
        ) as error:
            raise CommandError(str(error)) from None


def _one_line_errors(parser) -> None:
    """A mistyped command is one line naming the problem, as every other refusal is."""

    def error(message: str):
        if not getattr(parser, "called_from_command_line", False):
            raise CommandError(f"Error: {message}")  # call_command, as Django's parser does
        parser.exit(2, f"{parser.prog}: {message} (see --help)\n")

    if isinstance(parser, CommandParser):
        parser.error = error  # type: ignore[method-assign]  # this parser's refusals only
    else:  # the subparsers' action: give each verb's parser the same
        make = parser.add_parser

        def add_parser(*args, **kwargs):
            made = make(*args, **kwargs)
            _one_line_errors(made)
            return made

        parser.add_parser = add_parser


def _outcome(value: str) -> str:
    """ok or fail, for what acting on a fact did."""
    if value not in OUTCOMES:
        raise CommandError(f"The outcome is ok or fail, not {value!r}; nothing was recorded.")
    return value


# The verbs, against the local database -------------------------------------------------------


class Local:
    def __init__(self, memory: str, person: str):
        try:
            self.memory = Memory.objects.by_slug(memory)
        except Memory.DoesNotExist:
            raise CommandError(f"There is no memory called {memory!r}.") from None
        self.person = _person(person) if person else None
        self.reader = reader_for(self.person)

    def encode(self, *, text: str, outcome: str, **_) -> str:
        outcome = agent_actions.parse_outcome(outcome)
        return agent_actions.encode(
            memory=self.memory, text=text, outcome=outcome, by=self.person
        ).message

    def retrieve(self, *, query: str, k: int, **_) -> str:
        _check_k(k)
        facts = retrieval.retrieve(memory=self.memory, question=query, reader=self.reader, k=k)
        return _found([_fact_json(fact) for fact in facts])

    def context(self, *, goal: str, budget: int, **_) -> str:
        block = retrieval.context(
            memory=self.memory, question=goal, reader=self.reader, token_budget=budget
        )
        return block.text or _nothing_fits(goal)

    def outcome(self, *, ref: str, outcome: str, **_) -> str:
        return agent_actions.record_outcome(
            memory=self.memory, ref=ref, outcome=_outcome(outcome), reader=self.reader
        ).message

    def explain(self, *, fact_id: int, **_) -> str:
        fact = Fact.objects.for_memory(self.memory).readable_by(self.reader).filter(pk=fact_id)
        if not fact.exists():
            raise CommandError(access.not_found_words("fact", fact_id))
        explained = provenance.explain(fact.get(), reader=self.reader)
        return json.dumps(explained, indent=2, ensure_ascii=False)

    def procedure(self, *, task: str, steps: list[str], outcome: str, **_) -> str:
        return agent_actions.record_procedure(
            memory=self.memory, task=task, steps=steps, outcome=outcome, by=self.person
        ).message

    def stats(self, **_) -> str:
        return agent_actions.stats(memory=self.memory, reader=self.reader).message

    def consolidate(self, **_) -> str:
        return agent_actions.sleep(memory=self.memory, by=self.person).message


def _person(username: str):
    try:
        return get_user_model().objects.get_by_natural_key(username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"There is no user called {username!r}.") from None


def _check_k(k: int) -> None:
    if not 1 <= k <= 50:
        raise CommandError(f"-k must be between 1 and 50; got {k}.")


def _fact_json(fact: Fact) -> dict:
    return {
        "id": fact.pk,
        "text": fact.text,
        "valence": fact.valence,
        "confidence": fact.confidence,
        "support": fact.support,
    }


def _found(facts: list[dict]) -> str:
    if not facts:
        return "Nothing known answers that."
    lines = []
    for fact in facts:
        avoid = "Avoid: " if fact["valence"] == Fact.Valence.FAILURE else ""
        text = _AVOID.sub("", fact["text"]) if avoid else fact["text"]
        lines.append(
            f"[{fact['id']}] {avoid}{text}  (conf {fact['confidence']:.2f}, n={fact['support']})"
        )
    return "\n".join(lines)


def _nothing_fits(goal: str) -> str:
    return f"Nothing known fits “{goal}”." if goal.strip() else "Nothing to say without a goal."


# The verbs, against a running server ----------------------------------------------------------


class Remote:
    """The same verbs over the HTTP API, with a token (agent/hooks.py's client)."""

    def __init__(self, connection: hooks.Connection):
        if not connection.token:
            raise CommandError(
                f"--server {connection.url} needs a token: --token T or BRAIN_TOKEN (make one "
                "under Admin → Tokens)."
            )
        self.client = hooks.Client(connection)

    def encode(self, *, text: str, outcome: str, **_) -> str:
        outcome = agent_actions.parse_outcome(outcome)
        answer = self.client.call("POST", "/api/episodes/", {"text": text, "outcome": outcome})
        return answer["message"]

    def retrieve(self, *, query: str, k: int, **_) -> str:
        _check_k(k)
        answer = self.client.call("POST", "/api/agent/retrieve", {"query": query, "k": k})
        return _found(answer["facts"])

    def context(self, *, goal: str, budget: int, **_) -> str:
        answer = self.client.call(
            "POST", hooks.CONTEXT_PATH, {"question": goal, "token_budget": budget}
        )
        return answer.get("text") or _nothing_fits(goal)

    def outcome(self, *, ref: str, outcome: str, **_) -> str:
        answer = self.client.call(
            "POST", "/api/agent/outcome", {"ref": ref, "outcome": _outcome(outcome)}
        )
        return answer["message"]

    def explain(self, *, fact_id: int, **_) -> str:
        answer = self.client.call("GET", f"/api/facts/{fact_id}/")
        return json.dumps(answer, indent=2, ensure_ascii=False)

    def procedure(self, *, task: str, steps: list[str], outcome: str, **_) -> str:
        body = {"task": task, "steps": steps, "outcome": agent_actions.parse_outcome(outcome)}
        return self.client.call("POST", "/api/procedures/", body)["message"]

    def stats(self, **_) -> str:
        return self.client.call("GET", "/api/agent/stats")["message"]

    def consolidate(self, **_) -> str:
        return self.client.call("POST", hooks.SLEEP_PATH, {"wait": True})["message"]


# install and uninstall ------------------------------------------------------------------------


def _target(project: str) -> install.Target:
    return install.project_target(project) if project else install.user_target()


def _server_url(server: str) -> tuple[str, str]:
    """The brain the hooks ask, and where that came from: --server (or $BRAIN_URL, its
    default), $BRAIN_PORT, the running `make run` (var/serving.json), or make run's default."""
    if server:
        named = "$BRAIN_URL" if server == os.environ.get(hooks.URL_VARIABLE) else "--server"
        return server, named
    port = os.environ.get("BRAIN_PORT", "")
    if port:
        if not port.isdigit():
            raise CommandError(f"BRAIN_PORT={port!r} is not a port number (1-65535).")
        return f"http://{run.HOST}:{port}", "$BRAIN_PORT"
    serving = run.serving()
    if serving:
        return serving, "the running make run"
    return hooks.DEFAULT_URL, "make run's default; set BRAIN_PORT or --server if it runs elsewhere"


def _install(memory: str, server: str, token: str, *, project: str, user: str, **_) -> str:
    """Wire brain into Claude Code. The hooks ask ``server`` with ``token``; without a token,
    one is made (or reused) for ``user``, the admin account unless named."""
    url, where = _server_url(server)
    target = _target(project)  # refuse a missing folder before touching the database
    try:
        chosen = Memory.objects.by_slug(memory)
    except Memory.DoesNotExist:
        raise CommandError(f"There is no memory called {memory!r}.") from None
    person = _person(user or settings.BRAIN_ADMIN_USERNAME) if (user or not token) else None
    if person is not None and not access.may(person, chosen, Permission.READ):
        raise CommandError(
            f"{person} may not read {chosen.name}: the hooks would get nothing. Grant read "
            "(Admin → Memberships), or name another --user."
        )
    if not token:
        from rest_framework.authtoken.models import Token

        token = Token.objects.get_or_create(user=person)[0].key
    wiring = install.Wiring(
        python=os.path.abspath(sys.executable),
        hooks_script=str(Path(hooks.__file__).resolve()),
        brain=str(Path(settings.BASE_DIR).resolve() / "bin" / "brain"),
        url=url,
        token=token,
        memory=memory,
        user=name_of(person),
    )
    done = install.install(target=target, wiring=wiring)
    return f"{done.message}\nThe hooks ask {url} ({where}).\n{_reachable(wiring)}"


def _reachable(wiring: install.Wiring) -> str:
    """Whether the hooks will find the server now (they stay silent until they do)."""
    connection = hooks.Connection(url=wiring.url, token=wiring.token, memory=wiring.memory)
    try:
        hooks.Client(connection).call(
            "POST", hooks.CONTEXT_PATH, {"question": "", "token_budget": 50}
        )
    except hooks.ServerError as problem:
        if problem.status:
            return f"brain at {wiring.url} refused the hooks' request: {problem}"
        return (
            f"Not answering yet: {problem} Until it does, the hooks stay silent and sessions "
            "start as usual."
        )
    return (
        f"brain at {wiring.url} answers: the next Claude Code session starts with the memory "
        "block, and its end runs the sleep pass."
    )


def _uninstall(*, project: str, **_) -> str:
    return install.uninstall(target=_target(project)).message
