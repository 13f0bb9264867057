"""A passage's label set is worked out once per passage, whatever plan the database picks.

``knowledge_passages_follow_labels`` (0016) joined the passages to a subquery that interns each
new label set (``knowledge_label_set_of``). A plan that puts that subquery on the inner side of
a nested loop runs it again for every passage. A bulk add of 5,000 statements ran into the
30 s statement limit in that function once on this machine's development database (and on a
second try, with its statistics caught up, took seconds; it did not happen again on a fresh
database). The sets are now worked out in a materialised step, each once, then written by the
passages' primary key, so no plan can multiply the work.
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION knowledge_passages_follow_labels() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    moved bigint[] := ARRAY(SELECT DISTINCT passage_id FROM changed);
BEGIN
    PERFORM 1 FROM knowledge_passage WHERE id = ANY(moved) ORDER BY id FOR NO KEY UPDATE;
    WITH grouped AS MATERIALIZED (
        SELECT one.id,
               COALESCE(
                   array_agg(own.label_id ORDER BY own.label_id)
                       FILTER (WHERE own.label_id IS NOT NULL),
                   '{}'
               )::bigint[] AS labels
        FROM unnest(moved) AS one(id)
        LEFT JOIN knowledge_passagelabel own ON own.passage_id = one.id
        GROUP BY one.id
    ), wanted AS MATERIALIZED (
        SELECT grouped.id, knowledge_label_set_of(grouped.labels) AS label_set FROM grouped
    )
    UPDATE knowledge_passage AS passage SET label_set_id = wanted.label_set
    FROM wanted
    WHERE passage.id = wanted.id AND passage.label_set_id IS DISTINCT FROM wanted.label_set;
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0016_read_rule_triggers_in_sets")]

    operations = [migrations.RunSQL(FORWARD, migrations.RunSQL.noop)]
