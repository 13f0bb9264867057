"""One path from a failure to the API's answer: whatever the app, a refusal of the input is a 400,
a conflict with the state of things a 409, a lost lock race a 503 and a missing permission a
403, each with the same body, ``{"detail": ...}`` (a conflict adds what it carries)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import OperationalError
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.test import APIRequestFactory

from brain.db import retry
from brain.errors import StateConflict
from knowledge.access import NotPermitted
from knowledge.models import Memory, Permission
from memory import actions, consolidator, document, revisions
from review import findings, guesses


def _answer(error: Exception):
    """What the API answers when a view raises ``error``."""

    @api_view(["POST"])
    @permission_classes([AllowAny])
    def view(request):
        raise error

    return view(APIRequestFactory().post("/api/anything", {}, format="json"))


def test_every_conflict_an_action_raises_shares_the_one_base():
    conflicts = [
        revisions.DocumentChanged,
        revisions.CannotUndo,
        actions.CannotRestore,
        actions.AlreadySettled,
        consolidator.LearningOff,
        findings.Refused,
        guesses.Refused,
    ]

    assert [c.__name__ for c in conflicts if not issubclass(c, StateConflict)] == []


def test_a_conflict_is_a_409_with_its_message_and_what_it_carries():
    response = _answer(StateConflict("A pass is already running.", run={"id": 7}))

    assert response.status_code == 409
    assert response.data == {"detail": "A pass is already running.", "run": {"id": 7}}


def test_an_action_refusing_its_input_is_a_400_naming_every_problem():
    response = _answer(ValidationError(["The fact is empty.", "Say it in a sentence."]))

    assert response.status_code == 400
    assert response.data == {"detail": "The fact is empty. Say it in a sentence."}


def test_a_serializer_refusing_a_field_still_names_the_field():
    response = _answer(serializers.ValidationError({"text": ["This field is required."]}))

    assert response.status_code == 400
    assert response.data == {"text": ["This field is required."]}


class _Deadlock(Exception):
    sqlstate = retry.DEADLOCK_DETECTED


def test_a_write_that_lost_every_lock_race_is_a_503_saying_send_it_again():
    lost = OperationalError("deadlock detected")
    lost.__cause__ = _Deadlock()

    response = _answer(lost)

    assert response.status_code == 503
    assert response.data == {"detail": retry.BUSY_MESSAGE}
    assert response["Retry-After"] == str(retry.BUSY_RETRY_AFTER_S)


def test_a_missing_permission_is_a_403_naming_what_is_needed(db):
    home = Memory.objects.default()

    response = _answer(NotPermitted(home, Permission.CURATE, Permission.TEACH))

    assert response.status_code == 403
    assert response.data["detail"].startswith("This needs permission to curate")


def test_something_unexpected_is_not_dressed_up_as_an_answer():
    with pytest.raises(KeyError):
        _answer(KeyError("no such thing"))


# The same body from every app's API ------------------------------------------------------------


@pytest.fixture
def api(client, admin_user):
    client.force_login(admin_user)
    return client


def test_a_stale_edit_is_a_409_carrying_the_document_as_it_is_now(api, db):
    home = Memory.objects.default()
    edited = document.TEMPLATE + "- The boiler is in the cellar.\n"
    revisions.save_user_edit(memory=home, text=edited, base_generation=0)

    response = api.put(
        "/api/memory/",
        {"text": document.TEMPLATE + "- The loft is warm.\n", "base_generation": 0},
        content_type="application/json",
    )

    assert response.status_code == 409
    body = response.json()
    assert set(body) == {"detail", "current"}
    assert body["current"] == {
        "text": edited,
        "voice": revisions.current_revision(home).voice,
        "generation": 1,
        "size_bytes": document.size_bytes(edited),
        "max_bytes": home.max_bytes,
    }


def test_conflicts_in_memory_and_in_review_answer_the_same_body(api, admin_user, db):
    home = Memory.objects.default()
    revisions.save_user_edit(memory=home, text=document.TEMPLATE + "- A.\n", base_generation=0)
    api.post("/api/memory/changes/1/undo", {}, content_type="application/json")
    guess = guesses.propose_guess(memory=home, text="Does the cat sleep upstairs?").guess
    guesses.answer_guess(guess=guess, answer="no", by=admin_user)

    undone_twice = api.post("/api/memory/changes/1/undo", {}, content_type="application/json")
    answered_twice = api.post(
        f"/api/guesses/{guess.pk}/answer", {"answer": "yes"}, content_type="application/json"
    )

    assert (undone_twice.status_code, undone_twice.json()) == (
        409,
        {"detail": "Change #1 was already undone by change #2."},
    )
    assert (answered_twice.status_code, answered_twice.json()) == (
        409,
        {"detail": "That guess was already rejected by ada."},
    )
