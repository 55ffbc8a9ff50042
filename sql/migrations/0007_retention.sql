-- 0007: retention, the one sanctioned way to delete from delivery_events, and the indexes pruning needs.
--
-- delivery_events stays append-only for everyone but `prune`:
-- * UPDATE is refused, always.
-- * DELETE is refused unless the transaction has said it is retention (`SET LOCAL mentor_push.retention =
--   'on'`, which only prune does), and even then a row younger than 7 days is refused: a bug or a hand-typed
--   DELETE cannot erase what an operator needs to answer "why" for last week's pushes.
--   `prune --events-days` cannot be set below 7 for the same reason.
-- TRUNCATE was never covered by the old trigger and is left as it was (a superuser's tool).
--
-- Deleting a notification or a job_runs row makes PostgreSQL look up what references it: decisions by
-- notification_id and notifications by job_run_id had no index, so each deleted row would scan a whole
-- table. Building them takes a write lock on those two tables for as long as the build runs (seconds on
-- millions of rows), once, at upgrade.

DROP TRIGGER delivery_events_no_change ON delivery_events;

-- Statement level: an UPDATE, or a DELETE outside retention, is refused even when it would match no row.
CREATE OR REPLACE FUNCTION delivery_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(current_setting('mentor_push.retention', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'delivery_events is append-only'
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'rows are deleted only by prune (retention), in a transaction that sets mentor_push.retention';
END $$;
CREATE TRIGGER delivery_events_no_change BEFORE UPDATE OR DELETE ON delivery_events
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_events_append_only();

-- Row level, for retention's deletes: never a row younger than the floor.
CREATE FUNCTION delivery_events_retention_floor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.at > now() - interval '7 days' THEN
        RAISE EXCEPTION 'delivery_events: retention deletes only events older than 7 days (event % is from %)', OLD.id, OLD.at
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER delivery_events_retention_floor BEFORE DELETE ON delivery_events
    FOR EACH ROW EXECUTE FUNCTION delivery_events_retention_floor();

CREATE INDEX decisions_notification_idx ON decisions (notification_id) WHERE notification_id IS NOT NULL;
CREATE INDEX notifications_job_run_idx ON notifications (job_run_id);
