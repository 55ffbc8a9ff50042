-- 0040: the recheck of a batch's new pushes (0028, 0033) follows 0037's and 0039's changes too.
--
-- A change the app commits while a job decides (after it read its candidates, before it recorded them) finds
-- nothing of the job's queued to cancel; the batch's new pushes are checked again once recorded. That check
-- now also cancels a push whose organization switched its scenario off (0039), and one about an assignment
-- given to another mentor (0037): "the assignment was given to another mentor before the push went out".

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
    -- found by its key: a join on `'assignment:' || a.id` read the whole table.
    FOR gone IN
        SELECT CASE WHEN a.mentor_id <> n.user_id THEN 'given to another mentor' WHEN a.state <> 'active' THEN a.state
                    ELSE 'acknowledged' END AS what, array_agg(n.id) AS ids
          FROM notifications n
          JOIN assignments a ON a.id = CASE WHEN n.subject ~ '^assignment:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                            THEN substr(n.subject, 12)::uuid END
         WHERE n.id = ANY(p_notifications)
           AND (a.state <> 'active' OR a.mentor_id <> n.user_id
                OR EXISTS (SELECT 1 FROM assignment_read_receipts r WHERE r.assignment_id = a.id))
         GROUP BY 1 ORDER BY 1
    LOOP
        PERFORM cancel_pushes_of(gone.ids, 'the assignment was ' || gone.what || ' before the push went out');
    END LOOP;
END $$;
