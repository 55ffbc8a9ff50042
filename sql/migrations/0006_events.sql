-- 0006: events, a transactional outbox for the scenarios that cannot wait for a timer.
--
-- A domain change and the event that announces it commit together: the triggers below append to
-- `events` in the same transaction as the change (the row is the truth), and send one payload-less
-- NOTIFY on channel `mentor_push_events` (PostgreSQL folds identical notifications of a transaction into
-- one, so a bulk statement of 10,000 activities wakes the listener once). NOTIFY is only a hint:
-- event-notify also polls, and catches up from the table after any gap.
--
-- Kinds and what they carry:
--   pause_started          a pause was saved (subject_id: the pause id)
--   pause_lifted           a pause's end was moved to now or earlier (subject_id: the pause id)
--   assignment_dispatched  an assignment was created (subject_id: the assignment id)
--   activities_logged      one statement logged activities of a mentor (payload: the mentor's activity
--                          count before and after, and the latest occurred_at among the new rows)
--
-- Loading history: activities whose occurred_at is older than 14 days never announce a milestone (see
-- Milestone.swift), and `SET mentor_push.events = 'off'` in a session appends no events at all.

CREATE TABLE events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('pause_started', 'pause_lifted', 'assignment_dispatched', 'activities_logged')),
    mentor_id       uuid NOT NULL REFERENCES users (id),
    subject_id      text,
    payload         jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    processed_at    timestamptz,
    job_run_id      bigint
);
-- What is still to do, oldest first: the claim reads this index only.
CREATE INDEX events_pending_idx ON events (id) WHERE processed_at IS NULL;
CREATE INDEX events_processed_idx ON events (processed_at) WHERE processed_at IS NOT NULL;

-- How many activities a mentor has logged (the milestones count these).
ALTER TABLE users ADD COLUMN activity_count integer NOT NULL DEFAULT 0;
UPDATE users u SET activity_count = c.n FROM (SELECT mentor_id, count(*) AS n FROM activities GROUP BY mentor_id) c WHERE c.mentor_id = u.id;

-- Whether this session appends events (off for a bulk load of history).
CREATE FUNCTION events_enabled() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('mentor_push.events', true), '') <> 'off'
$$;

CREATE FUNCTION events_wake() RETURNS void LANGUAGE sql AS $$ SELECT pg_notify('mentor_push_events', '') $$;

CREATE FUNCTION pauses_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id) SELECT 'pause_started', mentor_id, id::text FROM new_rows ORDER BY id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_insert_event AFTER INSERT ON availability_pauses
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_after_insert();

CREATE FUNCTION pauses_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id)
        SELECT 'pause_lifted', n.mentor_id, n.id::text
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE n.ends_at IS NOT NULL AND n.ends_at <= now() AND (o.ends_at IS NULL OR o.ends_at > now())
         ORDER BY n.id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_update_event AFTER UPDATE ON availability_pauses
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_after_update();

CREATE FUNCTION assignments_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id)
        SELECT 'assignment_dispatched', mentor_id, id::text FROM new_rows WHERE state = 'active' ORDER BY dispatched_at, id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_insert_event AFTER INSERT ON assignments
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION assignments_after_insert();

-- Activities: keep users.activity_count (and last_activity_logged_at, as before) per statement, and
-- append one event per mentor of the statement.
CREATE OR REPLACE FUNCTION activities_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH added AS (
        SELECT mentor_id, count(*) AS n, max(logged_at) AS latest, max(occurred_at) AS latest_occurred
          FROM new_rows GROUP BY mentor_id
    ), counted AS (
        UPDATE users u SET activity_count = u.activity_count + a.n,
                           last_activity_logged_at = greatest(u.last_activity_logged_at, a.latest)
          FROM added a
         WHERE u.id = a.mentor_id
        RETURNING u.id, u.activity_count - a.n AS before, u.activity_count AS after, a.latest_occurred
    )
    INSERT INTO events (kind, mentor_id, payload)
    SELECT 'activities_logged', id, jsonb_build_object('before', before, 'after', after, 'latest_occurred_at', latest_occurred)
      FROM counted
     WHERE events_enabled()
     ORDER BY id;
    IF FOUND THEN PERFORM events_wake(); END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION activities_after_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users u SET last_activity_logged_at = (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id),
                       activity_count = (SELECT count(*) FROM activities a WHERE a.mentor_id = u.id)
     WHERE u.id IN (SELECT mentor_id FROM old_rows);
    IF TG_OP = 'UPDATE' THEN
        UPDATE users u SET last_activity_logged_at = (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id),
                           activity_count = (SELECT count(*) FROM activities a WHERE a.mentor_id = u.id)
         WHERE u.id IN (SELECT mentor_id FROM new_rows);
    END IF;
    RETURN NULL;
END $$;

-- A pause lifted before the push that announced it went out: that push is cancelled (the coordinator
-- still has both notifications in the inbox, and gets the lift pushed).
CREATE OR REPLACE FUNCTION pauses_cancel_started_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('pause:' || n.id), 'the pause was lifted before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.ends_at IS NOT NULL AND n.ends_at <= now() AND (o.ends_at IS NULL OR o.ends_at > now())
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_update_cancel AFTER UPDATE ON availability_pauses
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_cancel_started_push();

UPDATE scenario_defaults SET settings = '{"milestones": [25, 50, 100], "max_age_days": 14}' WHERE scenario = 'milestone';
