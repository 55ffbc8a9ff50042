-- 0017: a push cancelled before it went out (its assignment acknowledged or withdrawn, its pause lifted)
-- gives its daily slot back. The slot stayed taken: with a cap of 1, an acknowledged follow-up still made
-- the day's inactivity reminder `capped`, although nothing had been pushed that day.
-- A notification's slot is freed once none of its deliveries has been sent or is still queued, and none
-- of those cancelled may have gone out: one claimed by push-deliver (a lease, even one run out) or tried
-- before may be on the phone already, and keeps its slot, as the daily cap counts it.

CREATE OR REPLACE FUNCTION cancel_pushes_about(subjects text[], why text) RETURNS void LANGUAGE sql AS $$
    WITH dequeued AS (
        DELETE FROM delivery_queue q USING deliveries d, notifications n
         WHERE n.subject = ANY(subjects) AND d.notification_id = n.id AND q.delivery_id = d.id
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
                        WHERE c.notification_id = s.notification_id AND (x.lease_until IS NOT NULL OR c.attempts > 0))
$$;
