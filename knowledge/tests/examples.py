"""The two memories the read-rule tests are about, built through the same actions as every
surface: the seed's team memory (the meeting notes with the Rossi Srl order, Luca Bianchi's
account and his salary; Sales and HR) and a household where Sarah keeps a private health note.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from knowledge import actions, passages
from knowledge.models import Fact, Label, Membership, Memory, Passage, Permission, Role, Source
from knowledge.models import Subject as Page

MEETING_NOTES = (
    "Rossi Srl signed the order for €50,000, with delivery in June.\n\n"
    "Luca Bianchi follows the Rossi account from March.\n\n"
    "Luca Bianchi moves to a salary of €45,000."
)


@dataclass
class Team:
    memory: Memory
    sales: Label
    hr: Label
    source: Source
    passages: list[Passage]
    rossi: Page
    luca: Page
    order: Fact  # Rossi Srl: cites passage 1
    followed: Fact  # Rossi Srl: cites passage 2, links to Luca Bianchi
    follows: Fact  # Luca Bianchi: cites passage 2, links to Rossi Srl
    salary: Fact  # Luca Bianchi: cites passage 3
    sales_reader: object
    hr_reader: object
    admin: object


def _person(username: str):
    return get_user_model().objects.create_user(username=username, password="x")


def _fact(memory, page, text, cites) -> Fact:
    return actions.file_fact(
        memory=memory,
        text=text,
        channel=Fact.Channel.API,
        kind=Fact.Kind.NOTE,
        subjects=[page],
        cites=cites,
    )


def team() -> Team:
    """The seed's picture, exactly: three passages of meeting-notes.pdf (1 and 2 Sales, 3 HR),
    two pages, four facts, two links; a Sales reader, an HR reader and an administrator."""
    memory = Memory.objects.create(slug="team", name="Team")
    sales = Label.objects.create(memory=memory, name="Sales", meaning="Customers and orders.")
    hr = Label.objects.create(memory=memory, name="HR", meaning="Pay, contracts and reviews.")
    sales_role = Role.objects.create(memory=memory, name="Sales")
    sales_role.labels.add(sales)
    hr_role = Role.objects.create(memory=memory, name="HR")
    hr_role.labels.add(hr)
    sales_reader, hr_reader, admin = _person("giulia"), _person("marta"), _person("paolo")
    sales_role.members.add(sales_reader)
    hr_role.members.add(hr_reader)
    Membership.objects.create(memory=memory, user=admin, permission=Permission.ADMINISTER)
    source = Source.objects.create(
        memory=memory, kind=Source.Kind.DOCUMENT, title="meeting-notes.pdf", text=MEETING_NOTES
    )
    source.labels.add(sales, hr)
    one, two, three = passages.add(source, passages.cut(MEETING_NOTES), labels=[sales])
    passages.set_labels([three], [hr])
    rossi = Page.objects.create(memory=memory, kind="company", name="Rossi Srl")
    luca = Page.objects.create(memory=memory, kind="person", name="Luca Bianchi")
    return Team(
        memory=memory,
        sales=sales,
        hr=hr,
        source=source,
        passages=[one, two, three],
        rossi=rossi,
        luca=luca,
        order=_fact(memory, rossi, "Order of €50,000 confirmed, delivery in June.", [one]),
        followed=_fact(
            memory, rossi, "The account is followed by Luca Bianchi since March.", [two]
        ),
        follows=_fact(memory, luca, "Follows the Rossi Srl account.", [two]),
        salary=_fact(memory, luca, "Salary: €45,000.", [three]),
        sales_reader=sales_reader,
        hr_reader=hr_reader,
        admin=admin,
    )
