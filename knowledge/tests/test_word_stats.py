"""How common a word is among the facts, from PostgreSQL's statistics of their words."""

from django.db import connection

from knowledge import statements, word_stats
from knowledge.models import Fact


def _fact(memory, text):
    Fact.objects.create(
        memory=memory, text=text, normalized=statements.normalise(text), channel="typed"
    )


def test_a_word_most_facts_hold_has_a_large_share_a_rare_one_little_and_a_stop_word_none(
    home,
):
    for n in range(300):
        _fact(home, f"The hall light turns on at {n % 24}:00 on weekdays ({n}).")
    _fact(home, "A zebra-striped umbrella hangs by the door.")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_fact")
    word_stats.forget()

    words = ["hall", "lights", "weekdays", "zebra", "giraffe", "between"]
    rows, shares = word_stats.shares(words)

    assert rows >= 301
    assert shares["hall"] > 0.9
    assert shares["lights"] == shares["hall"]  # the same stem, "light", as the column holds
    assert shares["zebra"] < 0.01  # one fact of 301
    assert shares["giraffe"] == 0.0  # in no fact, so among no statistics
    assert shares["between"] is None  # a stop word: a query leaves it out


def test_the_statistics_are_read_again_only_after_a_while(home, django_assert_num_queries):
    word_stats.forget()
    with django_assert_num_queries(2):  # the statistics, and the kettle's lexeme
        word_stats.shares(["kettle"])
    with django_assert_num_queries(0):  # both kept: the statistics, and the kettle's lexeme
        word_stats.shares(["kettle"])
    with django_assert_num_queries(1):  # only the new word's lexeme
        word_stats.shares(["kettle", "descaling"])
