-- 0043: a coordinator's digest still waiting to go out is cancelled once every case it lists is settled.
--
-- A digest deferred for the coordinator's quiet hours (or waiting for a retry) went out as it was written:
-- "2 assignments are not acknowledged … Kari Nordmann and Sigrid Haugen", though both had been acknowledged
-- since. The follow-ups are cancelled by 0004's triggers (their subject names the assignment); a digest's
-- subject is its day, so nothing found it.
--
-- * `notifications.about_assignments`: the assignments a notification lists (the digest writes all of its
--   cases; other notifications leave it NULL). The app may read it too: the cases behind "and 5 more".
-- * When a receipt is written or moved, or an assignment leaves `active` or is given to another mentor, the
--   waiting digests that list it are cancelled if none of their cases is still open: active, with the mentor it
--   had when the digest was written, and unacknowledged by them. A digest with a case still open goes out.
-- * The recheck of a batch's new pushes does the same for what was settled while the digest job decided.

ALTER TABLE notifications ADD COLUMN about_assignments uuid[];
COMMENT ON COLUMN notifications.about_assignments IS 'The assignments the notification lists (an overdue digest''s cases)';
CREATE INDEX notifications_about_assignments_idx ON notifications USING gin (about_assignments) WHERE about_assignments IS NOT NULL;

-- Where an assignment a notification written at `p_listed_at` lists stands now: 'open' (active, with the
-- mentor it had then, unacknowledged by them), 'acknowledged', 'given to another mentor', or its state when no
-- longer active. The digests' cancel and `why` read it alike.
CREATE FUNCTION listed_assignment_status(a assignments, p_listed_at timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.state <> 'active' THEN a.state
                WHEN a.mentor_assigned_at > p_listed_at THEN 'given to another mentor'
                WHEN EXISTS (SELECT 1 FROM assignment_read_receipts r
                              WHERE r.assignment_id = a.id AND r.acknowledged_at >= coalesce(a.mentor_assigned_at, '-infinity'))
                THEN 'acknowledged' ELSE 'open' END
$$;

-- Of the notifications `p_notifications`, the waiting ones whose every listed assignment is settled.
CREATE FUNCTION settled_waiting_digests(p_notifications uuid[]) RETURNS uuid[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(n.id ORDER BY n.id), '{}') FROM notifications n
     WHERE n.id = ANY(p_notifications) AND n.about_assignments IS NOT NULL
       AND EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.notification_id = n.id)
       AND NOT EXISTS (
           SELECT 1 FROM unnest(n.about_assignments) AS c(id) JOIN assignments a ON a.id = c.id
            WHERE listed_assignment_status(a, n.created_at) = 'open')
$$;

CREATE FUNCTION cancel_settled_digests(p_assignments uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(p_assignments), 0) = 0 THEN RETURN; END IF;
    PERFORM cancel_pushes_of(settled_waiting_digests(array(
        SELECT n.id FROM notifications n WHERE n.about_assignments && p_assignments AND n.about_assignments IS NOT NULL)),
        'every assignment it listed was acknowledged, closed or given to another mentor before the push went out');
END $$;

CREATE FUNCTION read_receipts_settle_digests() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_settled_digests(array(SELECT DISTINCT assignment_id FROM new_rows));
    RETURN NULL;
END $$;
CREATE TRIGGER read_receipts_insert_digests AFTER INSERT ON assignment_read_receipts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION read_receipts_settle_digests();
CREATE TRIGGER read_receipts_update_digests AFTER UPDATE ON assignment_read_receipts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION read_receipts_settle_digests();

CREATE FUNCTION assignments_settle_digests() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_settled_digests(array(
        SELECT n.id FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE o.state = 'active' AND (n.state <> 'active' OR n.mentor_id IS DISTINCT FROM o.mentor_id)));
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_settle_digests AFTER UPDATE ON assignments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION assignments_settle_digests();

-- The recheck of a batch's new pushes (0028 … 0041), then the digests among them settled meanwhile. The
-- checks so far keep their function, under the name of the migration that last wrote them.
ALTER FUNCTION cancel_unwanted_new_pushes(uuid[]) RENAME TO cancel_unwanted_new_pushes_0041;
CREATE FUNCTION cancel_unwanted_new_pushes(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_unwanted_new_pushes_0041(p_notifications);
    PERFORM cancel_pushes_of(settled_waiting_digests(p_notifications),
        'every assignment it listed was acknowledged, closed or given to another mentor before the push went out');
END $$;
