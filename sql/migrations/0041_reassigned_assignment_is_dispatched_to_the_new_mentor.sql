-- 0041: an assignment given to another mentor is dispatched to that mentor.
--
-- Before, the new mentor was never told (the `assignment_dispatched` event came on INSERT only), the follow-up
-- and the coordinators' digest counted the days from the first dispatch (a follow-up saying "24 days ago"
-- four days after the hand-over, a digest listing the case as overdue minutes after it), and the previous
-- mentor's read receipt counted as the new mentor's (never followed up, never in a digest). The dedupe keys
-- named the assignment alone, so the new mentor's follow-up was "already notified" by the first mentor's.
--
-- * `assignments.mentor_assigned_at`: when the assignment was given to its mentor, if not at its dispatch
--   (NULL: the mentor has had it since `dispatched_at`). Set by the database when `mentor_id` changes.
-- * A change of mentor of an active assignment appends an `assignment_dispatched` event for the new mentor
--   (the new-assignment push, and the honorarium count), as an insert does.
-- * The jobs count from `greatest(dispatched_at, mentor_assigned_at)` and take a read receipt acknowledged
--   before that for the previous mentor's; the keys of a handed-over assignment's notifications name the
--   mentor too (`new_assignment:<id>:<mentor>`, `assignment_follow_up:<id>:<mentor>`).
-- * The receipt table keeps one row per assignment, so the new mentor's acknowledgement moves
--   `acknowledged_at` (an upsert): that cancels the waiting pushes about the assignment as an insert does.
-- * The recheck of a batch's new pushes takes the previous mentor's receipt for what it is, too.

ALTER TABLE assignments ADD COLUMN mentor_assigned_at timestamptz;
COMMENT ON COLUMN assignments.mentor_assigned_at IS
    'When the assignment was given to its mentor, if after its dispatch (set by the database when mentor_id changes)';

CREATE FUNCTION assignments_before_mentor_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.mentor_id IS DISTINCT FROM OLD.mentor_id THEN
        NEW.mentor_assigned_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER assignments_mentor_assigned_at BEFORE UPDATE OF mentor_id ON assignments
    FOR EACH ROW EXECUTE FUNCTION assignments_before_mentor_change();

CREATE FUNCTION assignments_after_mentor_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF events_enabled() THEN
        INSERT INTO events (kind, mentor_id, subject_id, payload)
        SELECT 'assignment_dispatched', n.mentor_id, n.id::text, jsonb_build_object('from_mentor_id', o.mentor_id)
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE n.mentor_id IS DISTINCT FROM o.mentor_id AND n.state = 'active'
         ORDER BY n.id;
        IF FOUND THEN PERFORM events_wake(); END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_mentor_change_event AFTER UPDATE ON assignments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION assignments_after_mentor_change();

CREATE FUNCTION read_receipts_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('assignment:' || n.assignment_id), 'the assignment was acknowledged before the push went out')
       FROM new_rows n JOIN old_rows o ON o.assignment_id = n.assignment_id
      WHERE n.acknowledged_at IS DISTINCT FROM o.acknowledged_at
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER read_receipts_update AFTER UPDATE ON assignment_read_receipts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION read_receipts_after_update();

CREATE OR REPLACE FUNCTION cancel_unwanted_new_pushes(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    off record;
    gone record;
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n JOIN users u ON u.id = n.user_id
         WHERE n.id = ANY(p_notifications) AND u.deactivated_at IS NOT NULL),
        'the user was deactivated before the push went out');
    -- The organization switched the scenario off (0039's cancel, for what it committed while the job decided).
    FOR off IN
        SELECT n.category, array_agg(n.id) AS ids FROM notifications n JOIN users u ON u.id = n.user_id
          JOIN scenario_defaults d ON d.scenario = n.category
          LEFT JOIN organization_scenario_rules r ON r.organization_id = u.organization_id AND r.scenario = n.category
         WHERE n.id = ANY(p_notifications) AND NOT coalesce(r.enabled, d.enabled)
         GROUP BY n.category ORDER BY n.category
    LOOP
        PERFORM cancel_pushes_of(off.ids, 'the organization switched ' || off.category || ' off before the push went out');
    END LOOP;
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n JOIN push_notification_configs c ON c.user_id = n.user_id
         WHERE n.id = ANY(p_notifications) AND NOT c.enabled),
        'the user switched push notifications off before the push went out');
    FOR off IN
        SELECT n.category, array_agg(n.id) AS ids FROM notifications n JOIN push_notification_configs c ON c.user_id = n.user_id
         WHERE n.id = ANY(p_notifications) AND c.enabled AND NOT n.critical AND (to_jsonb(c) ->> n.category) = 'false'
         GROUP BY n.category ORDER BY n.category
    LOOP
        PERFORM cancel_pushes_of(off.ids, 'the user switched ' || off.category || ' off before the push went out');
    END LOOP;
    -- The clock, not now(): the batch's transaction may have started a while ago (it waits for the daily slots'
    -- locks), and a pause the app began at its own now() since then is in force.
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n
         WHERE n.id = ANY(p_notifications) AND n.category IN ('inactivity', 'assignment_follow_up')
           AND EXISTS (SELECT 1 FROM availability_pauses p
                        WHERE p.mentor_id = n.user_id AND p.starts_at <= clock_timestamp()
                          AND (p.ends_at IS NULL OR p.ends_at > clock_timestamp()))),
        'a pause of the mentor started before the push went out');
    -- An activity logged since the run's instant (the notification's created_at): the reminder is no longer true.
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n
         WHERE n.id = ANY(p_notifications) AND n.category = 'inactivity'
           AND EXISTS (SELECT 1 FROM activities a WHERE a.mentor_id = n.user_id AND a.logged_at >= n.created_at)),
        'the mentor logged an activity before the push went out');
    -- A push about an assignment withdrawn, completed or acknowledged since (0004's cancels). The assignment is
    -- found by its key: a join on `'assignment:' || a.id` read the whole table. A receipt from before the
    -- assignment was given to its mentor is the previous mentor's (0041).
    FOR gone IN
        SELECT CASE WHEN a.mentor_id <> n.user_id THEN 'given to another mentor' WHEN a.state <> 'active' THEN a.state
                    ELSE 'acknowledged' END AS what, array_agg(n.id) AS ids
          FROM notifications n
          JOIN assignments a ON a.id = CASE WHEN n.subject ~ '^assignment:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                            THEN substr(n.subject, 12)::uuid END
         WHERE n.id = ANY(p_notifications)
           AND (a.state <> 'active' OR a.mentor_id <> n.user_id
                OR EXISTS (SELECT 1 FROM assignment_read_receipts r
                            WHERE r.assignment_id = a.id AND r.acknowledged_at >= coalesce(a.mentor_assigned_at, '-infinity')))
         GROUP BY 1 ORDER BY 1
    LOOP
        PERFORM cancel_pushes_of(gone.ids, 'the assignment was ' || gone.what || ' before the push went out');
    END LOOP;
END $$;
