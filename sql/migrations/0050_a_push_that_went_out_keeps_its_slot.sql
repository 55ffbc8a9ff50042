-- 0050: a push that went out keeps its daily slot, also when its delivery was cancelled on the way.
--
-- A push the app cancels while it is on the wire still reaches the phone; its delivery stays `cancelled` with
-- sent_at set (the outcome write records that it went out). cancel_deliveries freed a notification's daily
-- slot when none of its deliveries was `sent`, so cancelling its other, still queued delivery (the
-- notification read on another device) freed the slot of the push that had gone out, and a second push that
-- day went out under a cap of 1 (concurrency review, stop 31). A delivery with sent_at set counts as sent.
-- The function is 0038's with that one test changed.

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
    )
    SELECT array_agg(delivery_id ORDER BY delivery_id) INTO claimed FROM dequeued WHERE lease_until IS NOT NULL;
    FOR i IN 1 .. coalesce(cardinality(claimed), 0) BY 500 LOOP
        PERFORM pg_notify('mentor_push_cancelled', array_to_string(claimed[i : i + 499], ','));
    END LOOP;
END $$;
