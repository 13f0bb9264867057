"""Adding a note, a document or an email (knowledge/sources.py), cutting it into passages and
labelling them (knowledge/labeller.py, knowledge/labelling.py)."""

from __future__ import annotations

import io
from email.message import EmailMessage

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from brain.tests.stubs.messages import stub_json
from knowledge import labeller, labelling, passages, sources, visibility
from knowledge.models import (
    Fact,
    Label,
    Membership,
    Memory,
    Passage,
    Permission,
    ReviewItem,
    Role,
    Subject,
)
from knowledge.tests.examples import MEETING_NOTES

SALES_MEANING = "Customers, orders, accounts and deliveries."
HR_MEANING = "Pay, salaries, contracts and reviews of the people who work here."


@pytest.fixture
def team(db):
    memory = Memory.objects.create(slug="team", name="Team")
    sales = Label.objects.create(memory=memory, name="Sales", meaning=SALES_MEANING)
    hr = Label.objects.create(memory=memory, name="HR", meaning=HR_MEANING)
    return memory, sales, hr


def _labels(source):
    return [
        sorted(label.name for label in passage.labels.all())
        for passage in source.passages.order_by("ordinal")
    ]


def _pdf(text: str | None) -> bytes:
    """A one-page PDF whose text layer says ``text`` (None: a page with no text, a scan)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def _eml(body: str | None, attachment: bytes | None = None) -> bytes:
    message = EmailMessage()
    message["From"] = "Giulia <giulia@example.com>"
    message["Subject"] = "Rossi order"
    if body is not None:
        message.set_content(body)
    if attachment is not None:
        message.add_attachment(attachment, maintype="application", subtype="pdf", filename="o.pdf")
    return bytes(message)


# Adding ----------------------------------------------------------------------------------------


def test_a_pasted_note_is_kept_whole_and_cut_by_paragraph_with_the_default_label(home, alice):
    added = sources.add_source(
        memory=home, by=alice, text="The boiler is serviced in May.\n\nThe loft key is blue."
    )
    assert added.source.kind == "note" and added.source.added_by == alice
    assert [p.text for p in added.passages] == [
        "The boiler is serviced in May.",
        "The loft key is blue.",
    ]
    assert _labels(added.source) == [["Household"], ["Household"]]
    assert added.source.title.startswith("Note by alice, ")  # never its words: see _untitled
    assert added.message.endswith("”, cut into 2 passages, labelled Household.")


def test_the_seeds_meeting_notes_labelled_sales_and_hr_are_placed_passage_by_passage(team):
    memory, _, _ = team
    added = sources.add_source(
        memory=memory,
        upload=sources.Upload("meeting-notes.txt", MEETING_NOTES.encode()),
        labels=["Sales", "HR"],
    )
    assert _labels(added.source) == [["Sales"], ["Sales"], ["HR"]]
    assert not added.asked and not ReviewItem.objects.exists()


def test_a_paragraph_about_two_pages_is_cut_again_by_sentence(team):
    memory, _, _ = team
    Subject.objects.create(memory=memory, kind="company", name="Rossi Srl")
    Subject.objects.create(memory=memory, kind="person", name="Luca Bianchi")
    text = "Rossi Srl signed the order. Luca Bianchi moves to a salary of €45,000.\n\nThanks all."
    added = sources.add_source(memory=memory, text=text, labels=["Sales", "HR"])
    assert [p.text for p in added.passages] == [
        "Rossi Srl signed the order.",
        "Luca Bianchi moves to a salary of €45,000.",
        "Thanks all.",
    ]
    assert _labels(added.source)[:2] == [["Sales"], ["HR"]]


def test_a_markdown_a_pdf_and_an_email_are_read(home):
    md = sources.add_source(memory=home, upload=sources.Upload("n.md", b"# Boiler\n\nIt hums."))
    assert [p.text for p in md.passages] == ["# Boiler", "It hums."]
    pdf = sources.add_source(memory=home, upload=sources.Upload("o.pdf", _pdf("Order of 50")))
    assert pdf.source.kind == "document" and "Order of 50" in pdf.source.text
    mail = sources.add_source(memory=home, upload=sources.Upload("m.eml", _eml("Ship in June.")))
    assert mail.source.kind == "email"
    assert (
        mail.source.text
        == "From: Giulia <giulia@example.com>\nSubject: Rossi order\n\nShip in June."
    )


@pytest.mark.parametrize(
    ("upload", "problem"),
    [
        (sources.Upload("empty.txt", b""), "“empty.txt” is empty"),
        (sources.Upload("spaces.txt", b"  \n\n "), "the note is empty"),
        (sources.Upload("photo.txt", b"\x89PNG\r\n\x1a\n\x00\x00"), "is not text"),
        (sources.Upload("latin.txt", "café".encode("latin-1")), "is not UTF-8 text"),
        (sources.Upload("sheet.xlsx", b"PK\x03\x04"), "is not a kind of file brain reads"),
        (sources.Upload("scan.pdf", _pdf(None)), "has no text to read: it may be a scan"),
        (sources.Upload("broken.pdf", b"%PDF-1.4 nothing"), "could not be read as a PDF"),
        (
            sources.Upload("only.eml", _eml(None, attachment=b"%PDF")),
            "holds only attachments (“o.pdf”) and no text",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_problem_and_nothing_is_added(home, upload, problem):
    with pytest.raises(ValidationError) as refused:
        sources.add_source(memory=home, upload=upload)
    assert problem in " ".join(refused.value.messages)
    assert not Passage.objects.exists()


def test_a_file_over_50_mb_is_refused_naming_the_limit(home):
    big = sources.Upload("big.txt", b"a" * (sources.MAX_UPLOAD_BYTES + 1))
    with pytest.raises(ValidationError, match=r"is 50\.0 MB; the limit is 50 MB"):
        sources.add_source(memory=home, upload=big)


def test_a_label_the_memory_does_not_have_is_refused_naming_it(team):
    memory, _, _ = team
    with pytest.raises(ValidationError, match="Team has no label “Legal”: use one of HR, Sales"):
        sources.add_source(memory=memory, text="x", labels=["Legal"])


# Labelling -----------------------------------------------------------------------------------


def test_an_unplaceable_passage_is_read_by_administrators_only_and_one_review_item_asks(team):
    memory, _, _ = team
    added = sources.add_source(
        memory=memory,
        text="The order ships in June.\n\nLunch was good.\n\nParking is full.",
        labels=["Sales", "HR"],
    )
    assert _labels(added.source) == [["Sales"], [], []]
    assert [p.unsure for p in added.source.passages.order_by("ordinal")] == [False, True, True]
    item = ReviewItem.objects.get()
    assert item.source == added.source and item.passages.count() == 2
    assert item.question.startswith("2 passages of “Note, ")
    assert added.asked and added.message.endswith("Brain was unsure about some of it: see Review.")


def test_the_labeller_asks_when_a_label_seems_wrong_for_a_part_and_leaves_it_to_a_person(home):
    visibility.default_labels(home)  # Household, as every memory has it
    private = Label.objects.create(
        memory=home, name="Private", meaning="Health, medication and doctors."
    )
    added = sources.add_source(memory=home, text="Sarah's medication is taken at breakfast.")
    assert _labels(added.source) == [["Household"]]  # as the source says, until a person decides
    assert "may need Private" in ReviewItem.objects.get().question
    labelling.label_passages(added.passages, [private])
    assert _labels(added.source) == [["Private"]]


def test_a_new_version_keeps_the_labels_of_unchanged_passages_and_labels_only_new_text(team):
    memory, _, hr = team
    first = sources.add_source(memory=memory, text=MEETING_NOTES, labels=["Sales", "HR"])
    labelling.label_passages([first.passages[1]], [hr])  # a person's decision
    text = MEETING_NOTES + "\n\nRossi Srl wants the order by June."
    second = sources.add_source(
        memory=memory, text=text, labels=["Sales", "HR"], previous=first.source
    )
    assert second.kept == 3
    assert _labels(second.source) == [["Sales"], ["HR"], ["HR"], ["Sales"]]
    assert first.source.text == MEETING_NOTES  # a source is never edited


def test_a_changed_meaning_relabels_and_facts_follow_without_compiling_again(
    team, django_user_model
):
    memory, sales, _ = team
    added = sources.add_source(memory=memory, text="Lunch is at noon.", labels=["Sales", "HR"])
    fact = Fact.objects.create(
        memory=memory, text="Lunch is at noon.", normalized="x", channel="api"
    )
    passages.cite(fact, added.passages)
    reader = django_user_model.objects.create_user(username="giulia")
    role = Role.objects.create(memory=memory, name="Sales")
    role.labels.add(sales)
    role.members.add(reader)
    assert not Fact.objects.filter(pk=fact.pk).readable_by(reader).exists()  # unsure: admins

    sales.meaning = SALES_MEANING + " Lunch with customers."
    sales.save(update_fields=["meaning"])
    assert labeller.relabel(memory=memory) == 1

    assert Fact.objects.filter(pk=fact.pk).readable_by(reader).exists()
    assert Fact.objects.get(pk=fact.pk).text == "Lunch is at noon."  # the same row: not compiled


def test_deleting_a_label_still_in_use_is_refused_naming_where(team):
    memory, sales, hr = team
    sources.add_source(memory=memory, text="The order ships.", labels=["Sales"], title="Orders")
    with pytest.raises(labelling.LabelInUse, match="“Sales” is still in use, on “Orders”"):
        labelling.delete_label(sales)
    labelling.delete_label(hr)
    assert list(Label.objects.filter(memory=memory).values_list("name", flat=True)) == ["Sales"]


def test_with_a_model_the_labeller_places_passages_as_it_answers(team, llm_stub):
    memory, _, _ = team
    llm_stub.script(
        stub_json(
            {
                "passages": [
                    {"passage": 0, "labels": ["Sales"], "unsure": False},
                    {"passage": 1, "labels": ["HR"], "unsure": False},
                    {"passage": 2, "labels": [], "unsure": True},
                ]
            }
        )
    )
    added = sources.add_source(
        memory=memory, text="Ships Monday.\n\nBonus in May.\n\nHmm.", labels=["Sales", "HR"]
    )
    assert _labels(added.source) == [["Sales"], ["HR"], []]
    assert "ALLOWED: Sales, HR" in llm_stub.requests[0].prompt or "ALLOWED: HR, Sales" in (
        llm_stub.requests[0].prompt
    )


def test_with_a_model_that_fails_the_labeller_labels_offline(team, llm_stub):
    from brain.tests.stubs.messages import stub_overloaded

    memory, _, _ = team
    llm_stub.script(stub_overloaded())
    added = sources.add_source(memory=memory, text=MEETING_NOTES, labels=["Sales", "HR"])
    assert _labels(added.source) == [["Sales"], ["Sales"], ["HR"]]


# Surfaces ------------------------------------------------------------------------------------


def test_the_api_adds_a_file_or_a_note_and_answers_bad_input_with_a_400(client, home, alice):
    client.force_login(alice)
    url = reverse("knowledge-api:sources")
    made = client.post(url, {"file": SimpleUploadedFile("n.txt", b"One.\n\nTwo.")})
    assert made.status_code == 201, made.content
    body = made.json()
    assert [p["text"] for p in body["passages"]] == ["One.", "Two."]
    assert body["detail"].startswith("Added “n.txt”, cut into 2 passages")
    note = client.post(url, {"text": "The loft is warm."}, content_type="application/json")
    assert note.status_code == 201
    empty = client.post(url, {"file": SimpleUploadedFile("e.txt", b"")})
    assert empty.status_code == 400 and "is empty" in empty.json()["detail"]
    both = client.post(url, {"text": ""}, content_type="application/json")
    assert both.status_code == 400


def test_a_reader_may_not_add_a_source(client, home, alice):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    client.force_login(alice)
    refused = client.post(reverse("knowledge-api:sources"), {"text": "x"}, "application/json")
    assert refused.status_code == 403


def test_brain_sources_add_takes_a_file_and_labels(team, tmp_path):
    notes = tmp_path / "meeting-notes.md"
    notes.write_text(MEETING_NOTES)
    out = io.StringIO()
    call_command(
        "sources",
        "--memory",
        "team",
        "add",
        str(notes),
        "--label",
        "Sales",
        "--label",
        "HR",
        stdout=out,
    )
    assert "Added “meeting-notes.md”, cut into 3 passages, labelled HR, Sales." in out.getvalue()
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="is empty"):
        call_command("sources", "--memory", "team", "add", str(empty))


def test_the_sources_tab_form_adds_a_file_without_javascript_and_opens_it(client, home, alice):
    client.force_login(alice)
    page = client.get(reverse("knowledge:sources"))
    assert 'id="add-source"' in page.content.decode()
    made = client.post(
        reverse("knowledge:add-source"),
        {"file": SimpleUploadedFile("boiler.md", b"It hums.\n\nServiced in May."), "text": ""},
    )
    source = home.sources.get(title="boiler.md")
    assert made.status_code == 302 and made.url == reverse("knowledge:source", args=[source.pk])
    opened = client.get(made.url).content.decode()
    assert "Added “boiler.md”, cut into 2 passages" in opened
    assert 'id="passage-1"' in opened and "Household" in opened


def test_the_form_filled_in_wrong_comes_back_as_typed_with_the_problem(client, home, alice):
    client.force_login(alice)
    again = client.post(
        reverse("knowledge:add-source"),
        {"file": SimpleUploadedFile("photo.txt", b"\x00\x01"), "title": "My photo"},
    )
    assert again.status_code == 200
    body = again.content.decode()
    assert "“photo.txt” is not text" in body and 'value="My photo"' in body


def test_a_source_page_masks_the_passages_a_reader_may_not_read(client, team):
    memory, _, hr = team
    added = sources.add_source(memory=memory, text=MEETING_NOTES, labels=["Sales", "HR"])
    from django.contrib.auth import get_user_model

    reader = get_user_model().objects.create_user(username="marta")
    role = Role.objects.create(memory=memory, name="HR")
    role.labels.add(hr)
    role.members.add(reader)
    client.force_login(reader)
    page = client.get(reverse("knowledge:source", args=[added.source.pk]), {"memory": "team"})
    body = page.content.decode()
    assert page.status_code == 200
    assert "salary of €45,000" in body and "Rossi Srl signed" not in body
    assert "[…a passage you may not read…]" in body
    listed = client.get(reverse("knowledge:sources"), {"memory": "team"}).content.decode()
    assert added.source.title in listed and "Rossi Srl signed" not in listed


def test_an_administrator_sets_a_passages_labels_and_its_facts_follow(client, team, admin_user):
    memory, _, _ = team
    added = sources.add_source(memory=memory, text="Lunch is at noon.", labels=["Sales", "HR"])
    (passage,) = added.passages
    client.force_login(admin_user)
    done = client.post(reverse("knowledge:label-passage", args=[passage.pk]), {"labels": ["Sales"]})
    assert done.status_code == 302
    passage.refresh_from_db()
    assert [label.name for label in passage.labels.all()] == ["Sales"]
    assert (passage.unsure, passage.decided) == (False, True)


def test_changing_a_labels_meaning_in_the_admin_relabels_the_memory(client, team, admin_user):
    memory, sales, _ = team
    added = sources.add_source(memory=memory, text="Lunch is at noon.", labels=["Sales", "HR"])
    assert _labels(added.source) == [[]]  # unsure
    client.force_login(admin_user)
    saved = client.post(
        reverse("admin:knowledge_label_change", args=[sales.pk]),
        {"memory": memory.pk, "name": "Sales", "meaning": SALES_MEANING + " Lunch.", "default": ""},
        follow=True,
    )
    assert "Looked again at 1 passage" in saved.content.decode()
    assert _labels(added.source) == [["Sales"]]
