"""The triggers that keep passages' label sets and facts' ``label_sets`` (migration 0012) work
in sets, whatever the planner knows about the tables.

As 0012 wrote them, each fact's sets were worked out by a subquery per fact, and the rows to
lock were found with ``IN (SELECT … FROM changed)``. Where the planner has no statistics yet
— rows written in the same transaction, as an import, a bulk load or 0012's own data migration
do — it may take those tables for empty and scan the whole of one for every row of the other:
300k labels written in batches of 10,000 ran past the 30 s statement limit. Here every step is
one join from the ids that changed (``unnest``), grouped once, and the rows to lock are found by
``id = ANY(ids)``: at worst one pass over a table a statement, at best an index lookup a row.
What the triggers do, and their locks, are unchanged.

And the sets a reader may not read (``knowledge_other_sets_of_labels``, see
``knowledge.read_rule``) are only those some passage carries: a set no passage carries any more
(its memory deleted, its passages relabelled) is on no fact either, and comparing each row with
it costs time for nothing.
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION knowledge_fact_label_sets(fact_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM knowledge_fact WHERE id = ANY(fact_ids) ORDER BY id FOR NO KEY UPDATE;
    UPDATE knowledge_fact AS fact SET label_sets = wanted.label_sets
    FROM (
        SELECT cited.id,
               COALESCE(
                   array_agg(DISTINCT COALESCE(passage.label_set_id, 0)
                             ORDER BY COALESCE(passage.label_set_id, 0))
                       FILTER (WHERE citation.passage_id IS NOT NULL),
                   '{}'
               )::bigint[] AS label_sets
        FROM unnest(fact_ids) AS cited(id)
        LEFT JOIN knowledge_citation citation ON citation.fact_id = cited.id
        LEFT JOIN knowledge_passage passage ON passage.id = citation.passage_id
        GROUP BY cited.id
    ) AS wanted
    WHERE fact.id = wanted.id AND fact.label_sets IS DISTINCT FROM wanted.label_sets;
END $$;

CREATE OR REPLACE FUNCTION knowledge_passages_follow_labels() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    moved bigint[] := ARRAY(SELECT DISTINCT passage_id FROM changed);
BEGIN
    PERFORM 1 FROM knowledge_passage WHERE id = ANY(moved) ORDER BY id FOR NO KEY UPDATE;
    UPDATE knowledge_passage AS passage SET label_set_id = wanted.label_set
    FROM (
        SELECT grouped.id, knowledge_label_set_of(grouped.labels) AS label_set
        FROM (
            SELECT one.id,
                   COALESCE(
                       array_agg(own.label_id ORDER BY own.label_id)
                           FILTER (WHERE own.label_id IS NOT NULL),
                       '{}'
                   )::bigint[] AS labels
            FROM unnest(moved) AS one(id)
            LEFT JOIN knowledge_passagelabel own ON own.passage_id = one.id
            GROUP BY one.id
        ) AS grouped
    ) AS wanted
    WHERE passage.id = wanted.id AND passage.label_set_id IS DISTINCT FROM wanted.label_set;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION knowledge_facts_follow_passages() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    moved bigint[] := ARRAY(
        SELECT new_rows.id FROM new_rows JOIN old_rows ON old_rows.id = new_rows.id
        WHERE new_rows.label_set_id IS DISTINCT FROM old_rows.label_set_id
    );
BEGIN
    IF cardinality(moved) > 0 THEN
        PERFORM knowledge_fact_label_sets(ARRAY(
            SELECT DISTINCT fact_id FROM knowledge_citation WHERE passage_id = ANY(moved)
        )::bigint[]);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION knowledge_other_sets_of_labels(granted bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(
        SELECT 0 UNION ALL
        SELECT set_.id FROM knowledge_labelset set_
        WHERE NOT set_.labels && granted
          AND EXISTS (SELECT 1 FROM knowledge_passage WHERE label_set_id = set_.id)
        ORDER BY 1
    );
END $$;

CREATE OR REPLACE FUNCTION knowledge_facts_follow_citations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF EXISTS (
            SELECT 1 FROM changed
            JOIN knowledge_fact fact ON fact.id = changed.fact_id
            JOIN knowledge_passage passage ON passage.id = changed.passage_id
            WHERE fact.memory_id <> passage.memory_id
        ) THEN
            RAISE EXCEPTION 'A fact may cite only passages of its own memory.'
                USING ERRCODE = 'check_violation';
        END IF;
        PERFORM 1 FROM knowledge_passage
        WHERE id = ANY(ARRAY(SELECT passage_id FROM changed)) ORDER BY id FOR SHARE;
    END IF;
    PERFORM knowledge_fact_label_sets(ARRAY(SELECT DISTINCT fact_id FROM changed)::bigint[]);
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0015_counts_from_indexes")]

    # Going back keeps these bodies: they do what 0012's did.
    operations = [migrations.RunSQL(FORWARD, migrations.RunSQL.noop)]
