-- 0038: an engine holding the claim on a push the app cancels hears of it before it sends it.
--
-- A cancel (0024–0025, 0037: pushes switched off, the notification read, the device token moved to another
-- user, the recipient moved …) takes the delivery out of the queue; an engine that had already claimed it
-- still sent it, any time until its claim's start-by (about a second behind a busy window, minutes in the
-- one-at-a-time pace after an outage): the push after the user switched pushes off, or on the phone of the
-- person the token had moved to, while the delivery said "cancelled before the push went out". Now the
-- cancel of a claimed delivery (its lease set) sends NOTIFY mentor_push_cancelled with the ids, comma-separated,
-- 500 to a notification (a payload holds 8,000 bytes). push-deliver, and a job or event-notify while it
-- delivers, listens on a connection of its own (a thread asleep in poll(2) until a cancel comes), and its
-- engines start none of them. What is already on the wire may still arrive, as before.

CREATE OR REPLACE FUNCTION cancel_deliveries(p_deliveries bigint[], why text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    claimed bigint[];
BEGIN
    IF coalesce(cardinality(p_deliveries), 0) = 0 THEN RETURN; END IF;
    WITH waiting AS (
        SELECT q.delivery_id FROM delivery_queue q
         WHERE q.delivery_id = ANY(p_deliveries)
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
    ), freed AS (
        -- One snapshot for the whole statement: the rows taken out of the queue above still show in it.
        DELETE FROM daily_push_slots s
         WHERE s.notification_id IN (SELECT notification_id FROM cancelled)
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = s.notification_id AND d.state = 'sent')
           AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id
                            WHERE d.notification_id = s.notification_id AND q.delivery_id NOT IN (SELECT delivery_id FROM dequeued))
           AND NOT EXISTS (SELECT 1 FROM dequeued x JOIN cancelled c ON c.id = x.delivery_id
                            WHERE c.notification_id = s.notification_id AND (x.lease_until IS NOT NULL OR c.attempts > 0))
        RETURNING 1
    )
    SELECT array_agg(delivery_id ORDER BY delivery_id) INTO claimed FROM dequeued WHERE lease_until IS NOT NULL;
    FOR i IN 1 .. coalesce(cardinality(claimed), 0) BY 500 LOOP
        PERFORM pg_notify('mentor_push_cancelled', array_to_string(claimed[i : i + 499], ','));
    END LOOP;
END $$;
