"""The memory document over HTTP at /api/memory/: answers, refusals (4xx naming the problem)
and never a 500."""

import json
import re

import pytest

from knowledge.models import Memory
from memory import actions, consolidator, document, revisions
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin

API = "/api/memory/"
EDITED = document.TEMPLATE + "- The boiler is in the cellar.\n"


@pytest.fixture
def api(client, admin_user, home):
    client.force_login(admin_user)
    return client


def _post(api, path: str, data: dict | None = None):
    return api.post(API + path, data or {}, content_type="application/json")


def _put_document(api, text: str, base_generation: int, query: str = ""):
    return api.put(
        API + query,
        {"text": text, "base_generation": base_generation},
        content_type="application/json",
    )


def test_the_api_refuses_someone_not_signed_in(client, home):
    assert client.get(API).status_code in (401, 403)
    response = client.post(API + "inbox", {"text": "The loft is warm"})

    assert response.status_code in (401, 403)
    assert not InboxItem.objects.exists()


def test_the_document_comes_with_its_size_waiting_count_and_last_run(api, home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)
    actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.TYPED)

    body = api.get(API).json()

    assert body["memory"] == "home"
    assert body["document"]["text"] == EDITED
    assert body["document"]["generation"] == 1
    assert body["document"]["size_bytes"] == len(EDITED.encode())
    assert body["document"]["max_bytes"] == 32 * 1024
    assert body["waiting"] == 1
    assert body["last_run"] is None

    run = consolidator.request_consolidation(memory=home, trigger="api", send=False).run

    assert api.get(API).json()["last_run"]["id"] == run.pk


def test_queueing_a_fact_answers_201_with_the_item_labelled(api, home):
    response = _post(api, "inbox", {"text": "  The loft   is warm ", "confidence": "high"})

    assert response.status_code == 201
    body = response.json()
    assert body["text"] == "The loft is warm"
    assert (body["origin"], body["label"], body["confidence"]) == ("api", "from the API", "high")
    assert (body["taught_by_name"], body["state"]) == ("ada", "pending")
    assert InboxItem.objects.get().pk == body["id"]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"text": ""}, "text", "This field may not be blank."),
        ({"text": "   "}, "text", "This field may not be blank."),
        ({"text": "x" * 1001}, "text", "Ensure this field has no more than 1000 characters."),
        ({"text": "Fine", "confidence": "sure"}, "confidence", '"sure" is not a valid choice.'),
    ],
    ids=["empty", "blank", "over-long", "bad confidence"],
)
def test_a_bad_fact_is_a_400_naming_the_problem_and_queues_nothing(api, home, data, field, message):
    response = _post(api, "inbox", data)

    assert response.status_code == 400
    assert response.json() == {field: [message]}
    assert not InboxItem.objects.exists()


def test_the_inbox_lists_what_waits_in_filing_order(api, home):
    first = actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.VOICE)
    second = actions.add_to_inbox(memory=home, text="The shed is cold", origin=Origin.CHAT)
    dropped = actions.add_to_inbox(memory=home, text="Forget this", origin=Origin.CHAT)
    actions.drop_inbox_item(item=dropped)

    body = api.get(API + "inbox").json()

    assert [(i["id"], i["label"]) for i in body] == [
        (first.pk, "from a voice conversation"),
        (second.pk, "from the chat"),
    ]


def test_dropping_a_queued_item_is_204_then_409_and_an_unknown_one_404(api, home):
    item = actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.TYPED)

    assert api.delete(API + f"inbox/{item.pk}").status_code == 204
    assert InboxItem.objects.get().state == "dropped"

    again = api.delete(API + f"inbox/{item.pk}")
    assert again.status_code == 409
    assert again.json()["detail"] == f"Item #{item.pk} is no longer waiting (it is dropped)."

    assert api.delete(API + f"inbox/{item.pk + 1000}").status_code == 404


def test_an_item_of_another_memory_is_not_found_in_this_one(api, home):
    other = Memory.objects.create(slug="other", name="Other")
    item = actions.add_to_inbox(memory=other, text="The loft is warm", origin=Origin.TYPED)

    assert api.delete(API + f"inbox/{item.pk}").status_code == 404
    assert api.delete(API + f"inbox/{item.pk}?memory=other").status_code == 204


def test_consolidate_starts_one_pass_and_a_second_request_is_409(
    api, home, django_capture_on_commit_callbacks
):
    actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.TYPED)

    with django_capture_on_commit_callbacks() as sent:
        started = _post(api, "consolidate")

    assert started.status_code == 202
    run = started.json()
    assert (run["state"], run["trigger"], run["outcome"]) == ("running", "api", "Filing…")
    assert len(sent) == 1  # the worker's start message, sent once the request commits

    with django_capture_on_commit_callbacks() as sent_again:
        again = _post(api, "consolidate")

    assert again.status_code == 409
    assert again.json()["detail"] == "A pass is already running; it was not started twice."
    assert again.json()["run"]["id"] == run["id"]
    assert sent_again == []
    assert ConsolidationRun.objects.count() == 1


def test_consolidate_when_learning_is_off_is_409_saying_so(api, home):
    home.learning = False
    home.save(update_fields=["learning"])

    response = _post(api, "consolidate")

    assert response.status_code == 409
    assert response.json()["detail"].startswith("Learning is switched off for Home")
    assert not ConsolidationRun.objects.exists()


def test_a_run_can_be_read_back_and_an_unknown_one_is_404(api, home):
    run = consolidator.request_consolidation(memory=home, trigger="api", send=False).run

    body = api.get(API + f"runs/{run.pk}").json()

    assert (body["id"], body["state"], body["items_read"]) == (run.pk, "running", 0)
    assert api.get(API + f"runs/{run.pk + 1000}").status_code == 404


def test_putting_the_document_saves_your_edit(api, home, admin_user):
    response = _put_document(api, EDITED, base_generation=0)

    assert response.status_code == 200
    assert response.json()["document"]["text"] == EDITED
    revision = DocumentRevision.objects.current(home)
    assert (revision.text, revision.kind, revision.author) == (EDITED, "edit", admin_user)
    change = Change.objects.get()
    assert change.summary == "You edited the document: added “The boiler is in the cellar.”"


def test_a_document_over_the_cap_is_a_400_naming_memory_max_kb_and_nothing_is_saved(api, home):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    text = document.TEMPLATE + "- The boiler is in the cellar.\n" * 40

    response = _put_document(api, text, base_generation=0)

    assert response.status_code == 400
    assert "over its limit of 1 KB (1,024 bytes). Nothing was saved" in response.json()["detail"]
    assert not DocumentRevision.objects.exists()
    assert not Change.objects.exists()


def test_a_stale_edit_is_a_409_carrying_the_current_document(api, home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)

    response = _put_document(api, document.TEMPLATE + "- The loft is warm.\n", base_generation=0)

    assert response.status_code == 409
    body = response.json()
    assert "changed since you opened it (it is now at revision 1)" in body["detail"]
    assert (body["current"]["text"], body["current"]["generation"]) == (EDITED, 1)
    assert DocumentRevision.objects.current(home).text == EDITED


def test_an_edit_without_a_base_generation_is_a_400(api, home):
    response = api.put(API, {"text": EDITED}, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"base_generation": ["This field is required."]}


def test_the_change_log_lists_newest_first(api, home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)
    revisions.clear_memory(memory=home)

    body = api.get(API + "changes").json()

    assert [(c["number"], c["source"], c["undone"]) for c in body] == [
        (2, "clear", False),
        (1, "edit", False),
    ]
    assert [c["number"] for c in api.get(API + "changes?limit=1").json()] == [2]
    bad_limit = api.get(API + "changes?limit=lots")
    assert bad_limit.status_code == 400
    assert "limit must be a whole number" in bad_limit.json()["detail"]


def test_undoing_a_change_reverts_it_and_an_unknown_one_is_409(api, home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)

    response = _post(api, "changes/1/undo")

    assert response.status_code == 200
    assert response.json()["number"] == 2
    assert response.json()["summary"].startswith("Undid change #1: You edited the document")
    assert DocumentRevision.objects.current(home).text == document.TEMPLATE

    again = _post(api, "changes/1/undo")
    assert again.status_code == 409
    assert again.json()["detail"] == "Change #1 was already undone by change #2."
    unknown = _post(api, "changes/99/undo")
    assert unknown.status_code == 409
    assert unknown.json()["detail"] == "There is no change #99 in the log of Home."


def test_export_is_a_json_attachment_with_document_voice_inbox_and_log(api, home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)
    actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.VOICE)

    response = api.get(API + "export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert re.fullmatch(
        r'attachment; filename="brain-home-\d{8}-\d{4}\.json"', response["Content-Disposition"]
    )
    data = json.loads(response.content)
    assert (data["format"], data["version"]) == ("brain-export", 1)
    assert data["document"]["text"] == EDITED
    assert data["document"]["voice"] == "- The boiler is in the cellar.\n"
    assert [(e["text"], e["origin"], e["state"]) for e in data["inbox"]] == [
        ("The loft is warm", "voice", "pending")
    ]
    assert [c["source"] for c in data["changes"]] == ["edit"]


def test_export_needs_a_signed_in_person(client, home):
    assert client.get(API + "export").status_code in (401, 403)


@pytest.mark.parametrize("path", ["", "inbox", "changes", "export"])
def test_an_unknown_memory_is_404(api, path):
    response = api.get(API + path + "?memory=nope")

    assert response.status_code == 404
    assert response.json() == {"detail": "There is no memory with that slug."}


def test_the_api_schema_is_served(api):
    response = api.get("/api/schema/")

    assert response.status_code == 200
    assert b"/api/memory/changes/{number}/undo" in response.content
