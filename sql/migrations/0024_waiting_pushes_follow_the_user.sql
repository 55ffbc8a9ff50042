-- 0024: a push still waiting to go out (deferred to the end of quiet hours, waiting for a retry, or not
-- yet claimed) is cancelled when what it was decided on changes before it goes:
--   - the user switches push notifications off (every waiting push: the master switch is the user's one
--     word for "nothing from this app"), or switches its category off (critical ones excepted: they go
--     through the category switch);
--   - the user is deactivated (left the organization);
--   - the user reads or deletes the notification in the inbox (the push would tell them again);
--   - the mentor logs an activity (a waiting inactivity reminder is no longer true);
--   - a pause of the mentor starts (a waiting inactivity reminder or assignment follow-up: a paused mentor
--     is not reminded).
-- Before, push-deliver sent them anyway: a reminder deferred to 07:00 went out after the user had
-- switched pushes off at 05:00. The notification stays in the inbox; a cancelled push gives its daily
-- slot back as before (0017). The cancels of 0004 and 0006 (an assignment acknowledged or withdrawn, a
-- pause lifted) now go through the same function.

-- Cancels the waiting pushes of `p_notifications` with `why`: 0017's cancel_pushes_about, by notification.
-- One a running push-deliver has claimed is cancelled too, so that no retry of it follows (it may still go
-- out if it is on the wire, and keeps its daily slot). The queue rows are locked in id order first, as the
-- outcome writes lock them, so a cancel beside a write cannot deadlock. Nothing to cancel costs no
-- statement (activity logging calls this for every insert).
CREATE FUNCTION cancel_pushes_of(p_notifications uuid[], why text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    WITH waiting AS (
        SELECT q.delivery_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
         WHERE d.notification_id = ANY(p_notifications)
         ORDER BY q.delivery_id
           FOR UPDATE OF q
    ), dequeued AS (
        DELETE FROM delivery_queue q USING waiting w
         WHERE q.delivery_id = w.delivery_id
        RETURNING q.delivery_id, q.lease_until
    ), cancelled AS (
        UPDATE deliveries d SET state = 'cancelled', last_error = why, updated_at = now()
         WHERE d.id IN (SELECT delivery_id FROM dequeued)
        RETURNING d.id, d.attempts, d.notification_id
    ), logged AS (
        INSERT INTO delivery_events (delivery_id, event, attempt, detail)
        SELECT id, 'cancelled', attempts, why FROM cancelled
        RETURNING 1
    )
    -- One snapshot for the whole statement: the rows taken out of the queue above still show in it.
    DELETE FROM daily_push_slots s
     WHERE s.notification_id IN (SELECT notification_id FROM cancelled)
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = s.notification_id AND d.state = 'sent')
       AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id
                        WHERE d.notification_id = s.notification_id AND q.delivery_id NOT IN (SELECT delivery_id FROM dequeued))
       AND NOT EXISTS (SELECT 1 FROM dequeued x JOIN cancelled c ON c.id = x.delivery_id
                        WHERE c.notification_id = s.notification_id AND (x.lease_until IS NOT NULL OR c.attempts > 0));
END $$;

CREATE OR REPLACE FUNCTION cancel_pushes_about(subjects text[], why text) RETURNS void LANGUAGE sql AS $$
    SELECT cancel_pushes_of(array(SELECT n.id FROM notifications n WHERE n.subject = ANY(subjects)), why)
$$;

-- The notifications of `p_users` with a push still waiting, of `p_categories` (NULL: any), critical ones
-- only if `p_with_critical`.
CREATE FUNCTION waiting_notifications(p_users uuid[], p_categories text[], p_with_critical boolean) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(n.id), '{}') FROM notifications n
             WHERE n.user_id = ANY(p_users) AND (p_categories IS NULL OR n.category = ANY(p_categories))
               AND (p_with_critical OR NOT n.critical)
               AND EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.notification_id = n.id));
END $$;

-- A user's switches went from `p_before` (NULL: the defaults, all on) to `p_after`.
CREATE FUNCTION cancel_switched_off_pushes(p_before push_notification_configs, p_after push_notification_configs) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    off text[];
BEGIN
    IF coalesce(p_before.enabled, true) AND NOT p_after.enabled THEN
        PERFORM cancel_pushes_of(waiting_notifications(ARRAY[p_after.user_id], NULL, true),
                                 'the user switched push notifications off before the push went out');
        RETURN;
    END IF;
    SELECT array_agg(c.category ORDER BY c.category) INTO off FROM (VALUES
        ('inactivity', coalesce(p_before.inactivity, true) AND NOT p_after.inactivity),
        ('assignment_follow_up', coalesce(p_before.assignment_follow_up, true) AND NOT p_after.assignment_follow_up),
        ('overdue_digest', coalesce(p_before.overdue_digest, true) AND NOT p_after.overdue_digest),
        ('milestone', coalesce(p_before.milestone, true) AND NOT p_after.milestone),
        ('honorarium', coalesce(p_before.honorarium, true) AND NOT p_after.honorarium),
        ('impact_summary', coalesce(p_before.impact_summary, true) AND NOT p_after.impact_summary),
        ('availability_change', coalesce(p_before.availability_change, true) AND NOT p_after.availability_change),
        ('new_assignment', coalesce(p_before.new_assignment, true) AND NOT p_after.new_assignment),
        ('activity_reminder', coalesce(p_before.activity_reminder, true) AND NOT p_after.activity_reminder)
    ) AS c(category, switched_off) WHERE c.switched_off;
    IF off IS NOT NULL THEN
        PERFORM cancel_pushes_of(waiting_notifications(ARRAY[p_after.user_id], off, false),
                                 'the user switched ' || array_to_string(off, ', ') || ' off before the push went out');
    END IF;
END $$;

CREATE FUNCTION push_configs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_switched_off_pushes(NULL, n) FROM new_rows n;
    RETURN NULL;
END $$;
CREATE TRIGGER push_configs_insert_cancel AFTER INSERT ON push_notification_configs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION push_configs_after_insert();

CREATE FUNCTION push_configs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_switched_off_pushes(o, n) FROM new_rows n JOIN old_rows o ON o.user_id = n.user_id;
    RETURN NULL;
END $$;
CREATE TRIGGER push_configs_update_cancel AFTER UPDATE ON push_notification_configs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION push_configs_after_update();

CREATE FUNCTION users_cancel_pushes_when_deactivated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_of(waiting_notifications(array_agg(n.id), NULL, true), 'the user was deactivated before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE o.deactivated_at IS NULL AND n.deactivated_at IS NOT NULL
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER users_deactivated_cancel AFTER UPDATE ON users
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_cancel_pushes_when_deactivated();

CREATE FUNCTION notifications_cancel_pushes_when_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_of(array_agg(n.id), 'the notification was read or deleted in the inbox before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE (o.read_at IS NULL AND n.read_at IS NOT NULL) OR (o.deleted_at IS NULL AND n.deleted_at IS NOT NULL)
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER notifications_seen_cancel AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION notifications_cancel_pushes_when_seen();

CREATE FUNCTION activities_cancel_inactivity_pushes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_of(waiting_notifications(array_agg(DISTINCT a.mentor_id), '{inactivity}', true),
                             'the mentor logged an activity before the push went out')
       FROM new_rows a
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER activities_insert_cancel AFTER INSERT ON activities
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION activities_cancel_inactivity_pushes();

CREATE FUNCTION pauses_cancel_reminders() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_of(waiting_notifications(array_agg(DISTINCT p.mentor_id), '{inactivity,assignment_follow_up}', true),
                             'a pause of the mentor started before the push went out')
       FROM new_rows p
      WHERE p.starts_at <= now() AND (p.ends_at IS NULL OR p.ends_at > now())
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER pauses_insert_cancel AFTER INSERT ON availability_pauses
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pauses_cancel_reminders();
