"""Plain words written once (brain.words): a line quoted once, a sentence ended once, and how
sure brain is in words."""

import pytest

from brain import words


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("The loft is warm.", "“The loft is warm.”"),
        ("“The office” means the back bedroom.", "“‘The office’ means the back bedroom.”"),
        ("“Already a quotation.”", "“Already a quotation.”"),
        ("  spaced  ", "“spaced”"),
    ],
)
def test_a_line_is_quoted_once_with_quotes_inside_made_single(text, said):
    assert words.quoted(text) == said


def test_a_quotation_inside_a_quotation_reads_in_single_quotes():
    summary = "Added under Rooms: ““The office” means the back bedroom.”"
    assert words.unnested(summary) == "Added under Rooms: “‘The office’ means the back bedroom.”"
    assert words.unnested("Two: “a” and “b”.") == "Two: “a” and “b”."


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("The last: added “The loft is warm.”", "The last: added “The loft is warm.”"),
        ("It finished in minutes.”", "It finished in minutes.”"),
        ("It was cut s…”", "It was cut s…”"),
        ("Is it warm?", "Is it warm?"),
        ("The loft is warm", "The loft is warm."),
        ("The last: “Guests use the loft”", "The last: “Guests use the loft”."),
    ],
)
def test_a_sentence_ends_once(text, said):
    assert words.sentence(text) == said


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (0.95, "sure"),
        (0.8, "sure"),
        ("0.6", "probably"),
        (0.55, "probably"),
        (0.4, "not sure"),
        ("high", "sure"),
        ("medium", "probably"),
        ("low", "not sure"),
        (None, ""),
    ],
)
def test_confidence_is_said_in_words(value, said):
    assert words.confidence(value) == said
