-- 0052: a postponed push's daily slot moves to the day it goes, and back when it is cancelled unsent.
--
-- push-deliver postpones a retry or a late push to the end of its recipient's quiet hours. When that is on a
-- later local day, the push's daily slot moves there (push-deliver's outcome write): kept on the day it was
-- decided, it let the next day's whole cap go out beside it (suspects review, stop 31). `moved_from` keeps the
-- day it was taken on.
--
-- cancel_deliveries keeps the slot of a push that was attempted (it may have reached the phone). An attempt made
-- before the postponement was made on the day the slot came from: such a slot goes back there, or the day it
-- was moved to counted a push that never went out on it (review of the move, stop 32). The function is 0050's
-- with that one step (`restored`) added.

ALTER TABLE daily_push_slots ADD COLUMN moved_from date;
COMMENT ON COLUMN daily_push_slots.moved_from IS
    'The local day the slot was taken on, when push-deliver moved it to the later day its postponed push goes on';

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
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = s.notification_id AND (d.state = 'sent' OR d.sent_at IS NOT NULL))
           AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id
                            WHERE d.notification_id = s.notification_id AND q.delivery_id NOT IN (SELECT delivery_id FROM dequeued))
           AND NOT EXISTS (SELECT 1 FROM dequeued x JOIN cancelled c ON c.id = x.delivery_id
                            WHERE c.notification_id = s.notification_id AND (x.lease_until IS NOT NULL OR c.attempts > 0))
        RETURNING 1
    ), restored AS (
        -- Kept only for an attempt made before its push was postponed to a later day (0052): that attempt may have
        -- reached the phone on the day the slot was moved from, and nothing went out on the day it was moved to.
        UPDATE daily_push_slots s SET local_day = s.moved_from, moved_from = NULL
         WHERE s.notification_id IN (SELECT notification_id FROM cancelled) AND s.moved_from IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = s.notification_id AND (d.state = 'sent' OR d.sent_at IS NOT NULL))
           AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id
                            WHERE d.notification_id = s.notification_id AND q.delivery_id NOT IN (SELECT delivery_id FROM dequeued))
           AND NOT EXISTS (SELECT 1 FROM dequeued x JOIN cancelled c ON c.id = x.delivery_id
                            WHERE c.notification_id = s.notification_id AND x.lease_until IS NOT NULL)
        RETURNING 1
    )
    SELECT array_agg(delivery_id ORDER BY delivery_id) INTO claimed FROM dequeued WHERE lease_until IS NOT NULL;
    FOR i IN 1 .. coalesce(cardinality(claimed), 0) BY 500 LOOP
        PERFORM pg_notify('mentor_push_cancelled', array_to_string(claimed[i : i + 499], ','));
    END LOOP;
END $$;
