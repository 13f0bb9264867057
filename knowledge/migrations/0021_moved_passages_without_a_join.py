"""The passages a relabel moved, found without joining the trigger's two transition tables.

``knowledge_facts_follow_passages`` (migration 0016) found the passages whose label set changed
by joining ``new_rows`` with ``old_rows``. PL/pgSQL plans a statement without parameters once
per session, with the transition tables' sizes of that first call: after relabelling one
passage, a connection kept joining by nested loop, so relabelling 5,000 passages later in the
same connection took 3.4 s against 1.8 s in a new one, and 10,000 went past the statement
timeout. ``EXCEPT`` of the (id, set) pairs gives the same passages (a pair is new exactly when
its set changed) and is never a nested loop.
"""

from django.db import migrations

# The trigger as migration 0016 wrote it, but for how it finds the moved passages (MOVED).
TRIGGER = r"""
CREATE OR REPLACE FUNCTION knowledge_facts_follow_passages() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    moved bigint[] := ARRAY(MOVED);
BEGIN
    IF cardinality(moved) > 0 THEN
        PERFORM knowledge_fact_label_sets(ARRAY(
            SELECT DISTINCT fact_id FROM knowledge_citation WHERE passage_id = ANY(moved)
        )::bigint[]);
    END IF;
    RETURN NULL;
END $$;
"""

EXCEPT = """
        SELECT id FROM (
            SELECT id, label_set_id FROM new_rows
            EXCEPT
            SELECT id, label_set_id FROM old_rows
        ) AS changed
"""

JOIN = """
        SELECT new_rows.id FROM new_rows JOIN old_rows ON old_rows.id = new_rows.id
        WHERE new_rows.label_set_id IS DISTINCT FROM old_rows.label_set_id
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0020_fact_set_mask")]

    operations = [
        migrations.RunSQL(TRIGGER.replace("MOVED", EXCEPT), TRIGGER.replace("MOVED", JOIN))
    ]
