"""`brain memories list|create`: the memories from the terminal."""

import io

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Memory


def brain(*args: str) -> str:
    out = io.StringIO()
    call_command("memories", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_create_makes_an_empty_memory_and_list_shows_it_beside_the_default():
    Memory.objects.default()

    created = brain("create", "office", "--name", "The office")
    listed = brain("list")

    assert created == "Created The office (office): open it with ?memory=office\n"
    assert listed.splitlines() == ["home  Home  0 facts  (default)", "office  The office  0 facts"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("slug", "message"),
    [("home", "already exists"), ("not a slug!", "slug"), ("", "slug")],
)
def test_create_refuses_a_taken_or_malformed_slug_in_one_line(slug, message):
    Memory.objects.default()

    with pytest.raises(CommandError, match=message):
        brain("create", slug)

    assert Memory.objects.count() == 1
