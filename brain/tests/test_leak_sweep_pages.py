"""No page, partial or API answer shows a person a canary they may not read: every URL the
resolver knows, as each person of ``privacy_world`` (``leak_sweep.walk``)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.test import Client

from brain.tests import privacy_world
from brain.tests.leak_sweep import described, walk

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    return privacy_world.build()


# Every path with every id as the people whose rights differ in what they read; every path that
# names no row as everyone else (the same views, asked for the same rows, as people whose rights
# differ in what they do: the Sales staff member and curator, the administrator of another memory).
WALKED_WITH_IDS = ("sales", "hr", "norole", "tom", "sarah")


@pytest.mark.parametrize("person", sorted(privacy_world.ALLOWED))
def test_no_page_or_api_answer_shows_a_person_a_canary_they_may_not_read(world, person):
    client = Client()
    client.force_login(world.people[person])
    found: dict = defaultdict(list)
    requests = walk(world, person, client, found, with_ids=person in WALKED_WITH_IDS)
    assert requests > 100
    assert not found, described(found)
