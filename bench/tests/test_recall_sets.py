"""The recall benchmark's labelled questions (bench/recall_sets/) say what they mean: every
answer names exactly one fact of its set, and the set is as large and as varied as its section
says."""

from __future__ import annotations

from bench import recall


def test_every_answer_names_exactly_one_fact_of_its_set():
    unclear = []
    for labelled in recall.read_sets():
        texts = [fact.text for fact in labelled.facts]
        assert len(texts) == len(set(texts)), labelled.name
        for question in labelled.questions:
            for piece in question.answers:
                if sum(piece in text for text in texts) != 1:
                    unclear.append((labelled.name, question.text, piece))

    assert unclear == []


def test_there_are_at_least_four_hundred_questions_of_every_kind_with_answers_and_without():
    sets = recall.read_sets()
    questions = [question for labelled in sets for question in labelled.questions]

    assert len(questions) >= 400
    assert {labelled.kind for labelled in sets} == {"household", "team", "coding", "conversation"}
    for labelled in sets:
        assert any(not question.answers for question in labelled.questions), labelled.name
        assert any(question.held_out for question in labelled.questions), labelled.name


def test_every_turn_of_a_conversation_is_a_fact_naming_its_speaker_and_its_day():
    for labelled in recall.read_sets():
        if labelled.kind != "conversation":
            continue
        speakers = {subject["name"] for subject in labelled.subjects}
        for fact in labelled.facts:
            speaker, _, rest = fact.text.partition(" (")
            assert speaker in speakers and rest[:10].count("-") == 2, fact.text


def test_the_section_replaces_its_own_in_the_benchmarks_file(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(
        "# Benchmarks\n\n## One\n\nfirst\n\n## Recall quality: old\n\nold\n\n## Two\n\nx\n"
    )

    recall.replace_section(path, "## Recall quality: new\n\nnew\n")

    text = path.read_text()
    assert "old" not in text and "## Recall quality: new\n\nnew\n" in text
    assert text.index("## One") < text.index("## Recall quality") < text.index("## Two")
