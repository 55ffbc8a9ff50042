-- 0028: a job's new pushes are checked again, as their batch is recorded, against what 0024's cancels watch.
--
-- A scenario job decides from one snapshot, read while it streams its candidates (minutes, for a large
-- organization), and records its batches later. A change the app committed in between (a pause of the
-- mentor started, the user deactivated, pushes or the category switched off) ran 0024's cancel when nothing
-- of the job's was queued yet, so the job's push went out all the same: a paused mentor reminded, a user who
-- had switched pushes off pushed. The recorder now calls this function, in its own statement (a fresh
-- snapshot: it sees what the app committed until then) right after the batch's, with the batch's new
-- notifications; it cancels their waiting pushes for the reasons 0024's triggers give. What the app commits
-- while the batch's transaction is still open (milliseconds) its own trigger still misses; push-deliver's
-- claim does not look at pauses or switches.

-- Cancels the waiting pushes of `p_notifications` (new this transaction) that 0024's triggers would have
-- cancelled had the push been queued before the change: the user deactivated; pushes switched off (every
-- push), or the category switched off (critical ones excepted); a pause of the mentor in force now (an
-- inactivity reminder or an assignment follow-up).
CREATE FUNCTION cancel_unwanted_new_pushes(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    off record;
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
    PERFORM cancel_pushes_of(array(
        SELECT n.id FROM notifications n
         WHERE n.id = ANY(p_notifications) AND n.category IN ('inactivity', 'assignment_follow_up')
           AND EXISTS (SELECT 1 FROM availability_pauses p
                        WHERE p.mentor_id = n.user_id AND p.starts_at <= now() AND (p.ends_at IS NULL OR p.ends_at > now()))),
        'a pause of the mentor started before the push went out');
END $$;
