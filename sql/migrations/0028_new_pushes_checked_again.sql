-- 0028: a job's new pushes are checked again, as their batch is recorded, against what 0024's cancels watch.
--
-- A scenario job decides from one snapshot, read while it streams its candidates (minutes, for a large
-- organization), and records its batches later. A change the app committed in between (a pause of the
-- mentor started, the user deactivated, pushes or the category switched off) ran 0024's cancel when nothing
-- of the job's was queued yet, so the job's push went out all the same: a paused mentor reminded, a user who
-- had switched pushes off pushed. The recorder now calls this function, in its own statement (a fresh
-- snapshot: it sees what the app committed until then) right after the batch's, with the batch's new
-- notifications; it cancels their waiting pushes for the reasons 0024's and 0004's triggers give. What the app commits
-- while the batch's transaction is still open (milliseconds) its own trigger still misses; push-deliver's
-- claim does not look at pauses or switches.

-- Cancels the waiting pushes of `p_notifications` (new this transaction) that 0024's triggers would have
-- cancelled had the push been queued before the change: the user deactivated; pushes switched off (every
-- push), or the category switched off (critical ones excepted); a pause of the mentor in force now (an
-- inactivity reminder or an assignment follow-up); an activity logged since the run's instant (an inactivity
-- reminder); the assignment withdrawn, completed or acknowledged (a push about it).
CREATE FUNCTION cancel_unwanted_new_pushes(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    off record;
    gone record;
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n JOIN users u ON u.id = n.user_id
         WHERE n.id = ANY(p_notifications) AND u.deactivated_at IS NOT NULL),
        'the user was deactivated before the push went out');
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
    -- A push about an assignment withdrawn, completed or acknowledged since (0004's cancels).
    FOR gone IN
        SELECT CASE WHEN a.state <> 'active' THEN a.state ELSE 'acknowledged' END AS what, array_agg(n.id) AS ids
          FROM notifications n JOIN assignments a ON n.subject = 'assignment:' || a.id
         WHERE n.id = ANY(p_notifications)
           AND (a.state <> 'active' OR EXISTS (SELECT 1 FROM assignment_read_receipts r WHERE r.assignment_id = a.id))
         GROUP BY 1 ORDER BY 1
    LOOP
        PERFORM cancel_pushes_of(gone.ids, 'the assignment was ' || gone.what || ' before the push went out');
    END LOOP;
END $$;
