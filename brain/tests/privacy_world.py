"""A world in which some people may not read some things, built as an administrator and its
people would build it, with a canary word in every text of each label: the leak sweeps
(``test_leak_sweep.py``) walk every surface as each person and look for the canaries they
may not read.

- ``team``: labels Sales and HR, roles of the same names and no default label, so a line
  taught in ``team`` is read by its administrators only. A document whose passages are Sales
  and HR, compiled into pages; an HR note; a Sales note saying what another Sales note said,
  later relabelled HR; a Sales fact an HR statement contradicts; lines taught by the HR person
  and a conversation of theirs (read by administrators only), waiting to be filed; an agent's
  episode.
- ``home``: the household (Household for everyone), a Private label only Sarah's role grants;
  her health note, compiled; a study of her page whose conclusion (with a model) draws on it.
- ``other``: administered by ``otheradmin``, with a note only its administrators read.

Canaries are words no other text contains, one per kind of reader. ``ALLOWED`` says which each
person may read; everyone may read the memories' ordinary texts, which carry none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from knowledge import passages, visibility
from knowledge.models import (
    Label,
    Membership,
    Memory,
    Passage,
    Permission,
    Role,
    Source,
    Subject,
)
from knowledge.sources import add_source
from memory import compiling
from memory.actions import learn
from memory.conversations import record_conversation
from memory.models import Origin
from memory.taught import Statement

SALES, HR, HEALTH, OTHER = "saleskite", "hrkestrel", "healthheron", "otterother"
CANARIES = (SALES, HR, HEALTH, OTHER)

# What each person may read of the canaries (superusers and each memory's administrators read
# everything of theirs; nobody here administers team or home).
ALLOWED = {
    "sales": {SALES},
    "hr": {HR},
    "norole": set(),
    "otheradmin": {OTHER},
    "staffsales": {SALES},
    "salescurator": {SALES},
    "sarah": {HEALTH},
    "tom": set(),
}

Q3_NOTES = (
    f"Rossi Srl signed the {SALES} order for EUR 50,000, with delivery in June.\n\n"
    f"Luca Bianchi follows the Rossi account from March for the {SALES} team.\n\n"
    f"Luca Bianchi earns EUR 80,000 a year in the {HR} pay band."
)
HR_NOTE = f"Marta Verdi passed her {HR} probation review with an excellent rating."
DEMO_KIT = "The demo kit is kept in the blue cupboard by the lift."
CONTRACT_OWNER = f"The {SALES} framework contract with Rossi Srl is owned by Luca Bianchi."
CONTRACT_MOVED = (
    f"The {HR} framework contract with Rossi Srl is now owned by Marta Verdi, not Luca Bianchi."
)
HEALTH_NOTE = f"Sarah takes {HEALTH} tablets every morning for her heart condition."
OTHER_NOTE = f"The {OTHER} server room door code changes every month."
# A question whose words are those of every canary's text, and no canary.
QUESTION = (
    "Luca Bianchi Marta Verdi Rossi order salary pay band probation review exit interview "
    "demo kit contract owner Sarah tablets heart server room door code"
)


@dataclass
class World:
    team: Memory
    home: Memory
    other: Memory
    people: dict[str, object]
    superuser: object
    sources: dict[str, Source] = field(default_factory=dict)

    def forbidden(self, person: str) -> set[str]:
        return set(CANARIES) - ALLOWED[person]


def _person(name: str, **extra):
    return get_user_model().objects.create_user(username=name, password="pw", **extra)


def _role(memory: Memory, name: str, labels, members) -> Role:
    role = Role.objects.create(memory=memory, name=name)
    role.labels.add(*labels)
    role.members.add(*members)
    return role


def _grant(memory: Memory, person, permission: Permission) -> None:
    Membership.objects.create(memory=memory, user=person, permission=permission)


def _note(memory: Memory, by, title: str, text: str, labels) -> Source:
    """A note added on the Sources tab with ``labels`` chosen, compiled as the worker would."""
    added = add_source(memory=memory, by=by, title=title, text=text, labels=labels)
    compiling.compile_now(added.source, by=by)
    return added.source


def build() -> World:
    people = {
        name: _person(name, is_staff=(name == "staffsales"))
        for name in ("sales", "hr", "norole", "otheradmin", "staffsales", "salescurator")
    }
    people |= {"sarah": _person("sarah"), "tom": _person("tom")}
    superuser = get_user_model().objects.create_superuser(username="root", password="pw")

    home = Memory.objects.default()
    team = Memory.objects.create(slug="team", name="Team")
    other = Memory.objects.create(slug="other", name="Other")
    world = World(team=team, home=home, other=other, people=people, superuser=superuser)

    sales = Label.objects.create(memory=team, name="Sales", meaning="Customers and orders.")
    hr = Label.objects.create(memory=team, name="HR", meaning="Pay, contracts and reviews.")
    sales_people = [people[n] for n in ("sales", "staffsales", "salescurator")]
    _role(team, "Sales", [sales], sales_people)
    _role(team, "HR", [hr], [people["hr"]])
    for name in ("sales", "hr", "norole", "otheradmin", "staffsales"):
        _grant(team, people[name], Permission.READ)
    _grant(team, people["salescurator"], Permission.CURATE)
    _grant(other, people["otheradmin"], Permission.ADMINISTER)

    # Pages the team keeps, so compiled facts land on them (and pages carry canaries).
    for kind, name in (
        ("person", "Luca Bianchi"),
        ("person", "Marta Verdi"),
        ("company", "Rossi Srl"),
    ):
        Subject.objects.create(memory=team, kind=kind, name=name)

    # The document: two Sales passages and one HR passage.
    notes = add_source(
        memory=team, by=people["sales"], title="q3-notes.txt", text=Q3_NOTES, labels=[sales]
    ).source
    passages.set_labels([notes.passages.as_system("the world's own setup").get(ordinal=2)], [hr])
    compiling.compile_now(notes, by=people["sales"])
    world.sources["q3"] = notes
    world.sources["hr-note"] = _note(team, people["hr"], "Probation reviews", HR_NOTE, [hr])
    # The same sentence in two Sales notes; the second one's passage becomes HR.
    world.sources["kit-1"] = _note(team, people["sales"], "Office kit", DEMO_KIT, [sales])
    second = _note(team, people["sales"], f"Office kit ({HR} copy)", DEMO_KIT, [sales])
    world.sources["kit-2"] = second
    passages.set_labels(list(Passage.objects.as_system("setup").filter(source=second)), [hr])
    # A Sales fact, then an HR statement that changes its owner.
    world.sources["owner"] = _note(team, people["sales"], "Contracts", CONTRACT_OWNER, [sales])
    world.sources["moved"] = _note(team, people["hr"], "Contracts, HR", CONTRACT_MOVED, [hr])
    # Lines the HR person taught and said (no default label: administrators only), waiting.
    learn(
        Statement.typed(
            memory=team,
            text=f"Marta Verdi's {HR} salary review is booked for May.",
            origin=Origin.TYPED,
            by=people["hr"],
        )
    )
    record_conversation(
        memory=team,
        channel="chat",
        person=people["hr"],
        messages=[
            {
                "role": "user",
                "text": f"Remember that Luca Bianchi's {HR} exit interview is on Friday.",
            },
            {"role": "assistant", "text": "Noted."},
        ],
    )

    # The household: Household for everyone, Private for Sarah.
    visibility.default_labels(home)  # Household, and the Everyone role granting it
    private = Label.objects.create(memory=home, name="Private", meaning="Sarah's health.")
    _role(home, "Sarah", [private], [people["sarah"]])
    for name in ("sarah", "tom"):
        _grant(home, people[name], Permission.TEACH)
    learn(
        Statement.typed(
            memory=home,
            text="The bins go out on Thursday night.",
            origin=Origin.TYPED,
            by=people["tom"],
        )
    )
    world.sources["health"] = _note(home, people["sarah"], "Sarah's health", HEALTH_NOTE, [private])

    # The other memory: a note only its administrators read.
    secret = Label.objects.create(memory=other, name="Secret", meaning="Administrators only.")
    world.sources["other"] = _note(other, people["otheradmin"], "Server room", OTHER_NOTE, [secret])
    return world
