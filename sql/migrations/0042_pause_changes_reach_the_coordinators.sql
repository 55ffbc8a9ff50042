-- 0042: a pause called off, or whose dates change, reaches the coordinators too.
--
-- Before, only a pause saved (`pause_started`) and one whose end was moved to now or earlier (`pause_lifted`)
-- appended an event. A pause deleted before it started (called off) or while it ran, and one whose end moved
-- and stayed ahead (extended, shortened, made open-ended) told nobody: a coordinator went on believing the
-- mentor away (and dispatched to nobody) or back on a date that no longer held (and dispatched to a mentor
-- still away).
--
-- * `pause_changed`: a pause's start or end changed and it still holds now or later (a change that ends it is
--   `pause_lifted`, as before).
-- * `pause_withdrawn`: a pause deleted while it held or before it started. Its row is gone, so the event
--   carries what the notice needs (`payload`: starts_at, ends_at, reason).
-- * A push still waiting to announce the pause's start is cancelled by either: what it says no longer holds
--   (the change's own notice says what does).
-- * The notices' texts (`changed`, `withdrawn` in the default templates); an organization's own template that
--   names neither is not used for them (availability-change falls back to the default).

-- NOT VALID: every row there is met the narrower check this one replaces, so no scan of the table is needed
-- (the migration holds the table's lock till it commits, and every trigger that appends an event waits).
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('pause_started', 'pause_lifted', 'pause_changed', 'pause_withdrawn', 'assignment_dispatched', 'activities_logged')) NOT VALID;

-- A pause's events, for the notice that decides whether a later one or its own start supersedes it.
CREATE INDEX events_pause_idx ON events (subject_id, id) WHERE kind LIKE 'pause%';

CREATE OR REPLACE FUNCTION pauses_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id)
        SELECT CASE WHEN n.ends_at IS NOT NULL AND n.ends_at <= now() THEN 'pause_lifted' ELSE 'pause_changed' END,
               n.mentor_id, n.id::text
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE (n.ends_at IS NOT NULL AND n.ends_at <= now() AND (o.ends_at IS NULL OR o.ends_at > now()))
            OR ((n.ends_at IS NULL OR n.ends_at > now())
                AND (n.ends_at IS DISTINCT FROM o.ends_at OR n.starts_at IS DISTINCT FROM o.starts_at))
         ORDER BY n.id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION pauses_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id, payload)
        SELECT 'pause_withdrawn', o.mentor_id, o.id::text,
               jsonb_build_object('starts_at', o.starts_at, 'ends_at', o.ends_at, 'reason', o.reason)
          FROM old_rows o
         WHERE o.ends_at IS NULL OR o.ends_at > now()
         ORDER BY o.id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    PERFORM cancel_pushes_about(array_agg('pause:' || o.id), 'the pause was called off before the push went out')
       FROM old_rows o
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_delete_event AFTER DELETE ON availability_pauses
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_after_delete();

CREATE FUNCTION pauses_cancel_changed_start_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('pause:' || n.id), 'the pause''s dates changed before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE (n.ends_at IS NULL OR n.ends_at > now())
        AND (n.ends_at IS DISTINCT FROM o.ends_at OR n.starts_at IS DISTINCT FROM o.starts_at)
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_update_cancel_changed AFTER UPDATE ON availability_pauses
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_cancel_changed_start_push();

INSERT INTO message_template_variables (scenario, name, kind, description) VALUES
    ('availability_change', 'changed',   'flag', 'the pause''s dates changed (from, until: its dates now)'),
    ('availability_change', 'withdrawn', 'flag', 'a pause that had not started was called off (from: when it was to start)');

UPDATE message_templates SET
    title = $t${{#lifted}}{{mentor}} er tilgjengelig igjen{{/lifted}}{{^lifted}}{{#withdrawn}}{{mentor}} tar likevel ikke pause{{/withdrawn}}{{^withdrawn}}{{#changed}}{{mentor}} har endret pausen{{/changed}}{{^changed}}{{mentor}} har pause{{/changed}}{{/withdrawn}}{{/lifted}}$t$,
    body = $t${{#lifted}}{{mentor}} har avsluttet pausen som startet {{started}}{{#reason}} («{{reason}}»){{/reason}}.{{/lifted}}{{^lifted}}{{#withdrawn}}{{mentor}} har avlyst pausen som skulle starte {{from}}{{#reason}} («{{reason}}»){{/reason}}.{{/withdrawn}}{{^withdrawn}}{{#changed}}{{mentor}} har endret pausen: nå{{#from}} fra {{from}}{{/from}}{{#until}} til {{until}}{{/until}}{{^until}} inntil videre{{/until}}{{#reason}} («{{reason}}»){{/reason}}.{{/changed}}{{^changed}}{{mentor}} har satt seg på pause{{#from}} fra {{from}}{{/from}}{{#until}} til {{until}}{{/until}}{{^until}} inntil videre{{/until}}{{#reason}}: «{{reason}}»{{/reason}}.{{/changed}}{{/withdrawn}}{{/lifted}}$t$
 WHERE scenario = 'availability_change' AND language = 'nb' AND organization_id IS NULL;
UPDATE message_templates SET
    title = $t${{#lifted}}{{mentor}} is available again{{/lifted}}{{^lifted}}{{#withdrawn}}{{mentor}} is not taking a break after all{{/withdrawn}}{{^withdrawn}}{{#changed}}{{mentor}} changed their break{{/changed}}{{^changed}}{{mentor}} is on a break{{/changed}}{{/withdrawn}}{{/lifted}}$t$,
    body = $t${{#lifted}}{{mentor}} has ended the break that started {{started}}{{#reason}} (“{{reason}}”){{/reason}}.{{/lifted}}{{^lifted}}{{#withdrawn}}{{mentor}} has called off the break that was to start {{from}}{{#reason}} (“{{reason}}”){{/reason}}.{{/withdrawn}}{{^withdrawn}}{{#changed}}{{mentor}} changed their break: now{{#from}} from {{from}}{{/from}}{{#until}} until {{until}}{{/until}}{{^until}} until further notice{{/until}}{{#reason}} (“{{reason}}”){{/reason}}.{{/changed}}{{^changed}}{{mentor}} is taking a break{{#from}} from {{from}}{{/from}}{{#until}} until {{until}}{{/until}}{{^until}} until further notice{{/until}}{{#reason}}: “{{reason}}”{{/reason}}.{{/changed}}{{/withdrawn}}{{/lifted}}$t$
 WHERE scenario = 'availability_change' AND language = 'en' AND organization_id IS NULL;
