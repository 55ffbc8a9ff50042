-- 0004: what the generic scenario engine records, and what keeps a push from outliving its subject.
--
-- * decisions and notifications say which subject they were about (`assignment:<uuid>`, `year:2025`,
--   `day:2026-11-24`, `stretch:<epoch>`), so "why" can answer per assignment or per year.
-- * A run whose process or connection died stays 'running' no more: each run holds a session advisory
--   lock on (1836021362, its id) while it lives; the next run of any job closes rows whose lock is free
--   as 'abandoned'.
-- * "Active device" is defined once, as a view.
-- * A push about an assignment that was withdrawn, completed or acknowledged before it went out is
--   cancelled in the same transaction as that change (state 'cancelled', event 'cancelled').
-- * Defaults for the settings of the scenarios that gained a job.

ALTER TABLE decisions ADD COLUMN subject text;
ALTER TABLE notifications ADD COLUMN subject text;
CREATE INDEX notifications_subject_idx ON notifications (subject) WHERE subject IS NOT NULL;

ALTER TABLE job_runs DROP CONSTRAINT job_runs_outcome_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_outcome_check
    CHECK (outcome IN ('running', 'ok', 'partial', 'failed', 'skipped', 'stopped', 'abandoned'));
CREATE INDEX job_runs_running_idx ON job_runs (id) WHERE outcome = 'running';

-- The one definition of a device that may be pushed to.
CREATE VIEW active_device_tokens AS
    SELECT * FROM device_tokens WHERE retired_at IS NULL;

ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state IN ('pending', 'sent', 'retrying', 'failed', 'dead', 'expired', 'cancelled'));
ALTER TABLE delivery_events DROP CONSTRAINT delivery_events_event_check;
ALTER TABLE delivery_events ADD CONSTRAINT delivery_events_event_check
    CHECK (event IN ('sent', 'retried', 'failed', 'dead', 'expired', 'retired', 'cancelled'));

-- Cancels the pushes still waiting to go out for notifications about any of `subjects`, with `why`.
CREATE FUNCTION cancel_pushes_about(subjects text[], why text) RETURNS void LANGUAGE sql AS $$
    WITH cancelled AS (
        UPDATE deliveries d SET state = 'cancelled', last_error = why, updated_at = now()
          FROM notifications n
         WHERE n.subject = ANY(subjects) AND d.notification_id = n.id AND d.state IN ('pending', 'retrying')
        RETURNING d.id, d.attempts
    )
    INSERT INTO delivery_events (delivery_id, event, attempt, detail)
    SELECT id, 'cancelled', attempts, why FROM cancelled
$$;

CREATE FUNCTION assignments_after_state_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('assignment:' || n.id), 'the assignment was ' || min(n.state) || ' before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE o.state = 'active' AND n.state <> 'active'
     GROUP BY n.state;
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_state_change AFTER UPDATE ON assignments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION assignments_after_state_change();

CREATE FUNCTION read_receipts_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('assignment:' || r.assignment_id), 'the assignment was acknowledged before the push went out')
       FROM new_rows r
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER read_receipts_insert AFTER INSERT ON assignment_read_receipts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION read_receipts_after_insert();

-- Drives assignment-follow-up and overdue-digest: active assignments by mentor, oldest first.
CREATE INDEX assignments_active_mentor_idx ON assignments (mentor_id, dispatched_at) WHERE state = 'active';

UPDATE scenario_defaults SET settings = '{"overdue_days": 10, "send_hour": 8}' WHERE scenario = 'overdue_digest';
UPDATE scenario_defaults SET settings = '{"max_age_days": 30}' WHERE scenario = 'impact_summary';
