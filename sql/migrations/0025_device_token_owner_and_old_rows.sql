-- 0025: two things about device tokens.
--
-- 1. A malformed token written before 0005 can be retired. 0005's check is NOT VALID, which spares the rows
--    already there only when it is added: PostgreSQL checks every later version of them, so push-deliver's
--    `UPDATE device_tokens SET retired_at = now()` on such a row failed (23514). That failed the whole batch
--    of outcomes it was written with: the pushes of the batch were sent again when their claim ran out, and
--    the row came due again, every lease. A retired token is never sent to, so the format is required of the
--    tokens in use only. Still NOT VALID: no scan, and the lock is held for the moment of the swap.
--
-- 2. A device token that moves to another user takes none of the first user's pushes with it. UNIQUE
--    (provider, token) leaves the app one way when somebody else signs in on the same phone: it moves the row
--    (user_id). A push of the first user still waiting (deferred to the end of quiet hours, a retry) then went
--    to the new user's phone: another person's name and assignment, maybe in another organization. The
--    waiting pushes to the token are cancelled when it moves; the notifications stay in the first user's inbox.

ALTER TABLE device_tokens DROP CONSTRAINT device_tokens_token_format;
ALTER TABLE device_tokens ADD CONSTRAINT device_tokens_token_format CHECK (
    retired_at IS NOT NULL OR CASE provider
        WHEN 'apns' THEN token ~ '^[0-9A-Fa-f]+$' AND length(token) BETWEEN 64 AND 200 AND length(token) % 2 = 0
        WHEN 'fcm' THEN token ~ '^[A-Za-z0-9_:-]+$' AND length(token) BETWEEN 20 AND 4096
        ELSE true
    END) NOT VALID;

-- Cancels the waiting deliveries `p_deliveries` with `why` (0024's cancel_pushes_of, by delivery; that one now
-- cancels the deliveries of its notifications through this). A notification's daily slot is given back when
-- none of its pushes went out or may still go.
CREATE FUNCTION cancel_deliveries(p_deliveries bigint[], why text) RETURNS void LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION cancel_pushes_of(p_notifications uuid[], why text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    PERFORM cancel_deliveries(array(
        SELECT q.delivery_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
         WHERE d.notification_id = ANY(p_notifications)), why);
END $$;

CREATE FUNCTION device_tokens_owner_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_deliveries(array(
        SELECT q.delivery_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
         WHERE d.device_token_id = NEW.id), 'the device token moved to another user');
    RETURN NULL;
END $$;

CREATE TRIGGER device_tokens_owner_changed AFTER UPDATE OF user_id ON device_tokens
    FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION device_tokens_owner_changed();
