-- 0015: the outbox's queue gets a table of its own: delivery_queue holds one row per delivery still open
-- (pending or retrying): when it is next due, which provider it goes to, and the lease of the engine that
-- claimed it. deliveries keeps the record (state, attempts, answers).
--
-- Why: each push used to update its deliveries row twice, and neither update could be a HOT update. The
-- claim's lease moved the indexed next_attempt_at; the outcome moved the row out of the due index's open
-- states. So every push added entries to the indexes of deliveries twice (4, then 3). Now:
-- * The claim writes lease_until, which is in no index. Its update is a HOT update on a narrow row.
-- * The outcome deletes the queue row, or moves next_attempt_at for a retry. Its update of deliveries
--   changes no indexed column, so that is a HOT update too when the page has room.
-- * provider is the token's, copied when the delivery is queued, so a claim reads this table alone to
--   find what is due for the providers it has. A token's provider never changes (the trigger below).
--
-- Invariant, kept by every statement that opens or closes a delivery: a delivery has a queue row exactly
-- while its state is 'pending' or 'retrying'.
--
-- The fillfactors keep room on each new page for those HOT versions (40 % filled for the queue, 35 % for
-- deliveries, whose row grows by its send time and the provider's message id when it is sent). A claim or
-- a flush takes rows in the order they were written, so it updates all of a page's rows in one
-- transaction, and each of them needs room: with these, every update in `make bench-outbox` is HOT (at 50
-- a quarter of the outcomes' were not). Pages filled before this migration keep no room; their updates
-- are ordinary ones until the rows are pruned.
--
-- Upgrade with every delivering job stopped: an engine from before this migration does not know the queue.
CREATE TABLE delivery_queue (
    delivery_id      bigint PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    provider         text NOT NULL CHECK (provider IN ('apns', 'fcm', 'webpush', 'expo')),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_until      timestamptz
) WITH (fillfactor = 40);
CREATE INDEX delivery_queue_due_idx ON delivery_queue (next_attempt_at);

INSERT INTO delivery_queue (delivery_id, provider, next_attempt_at)
SELECT d.id, t.provider, d.next_attempt_at
  FROM deliveries d JOIN device_tokens t ON t.id = d.device_token_id
 WHERE d.state IN ('pending', 'retrying');

DROP INDEX deliveries_due_idx;
ALTER TABLE deliveries DROP COLUMN next_attempt_at;
ALTER TABLE deliveries SET (fillfactor = 35);

CREATE FUNCTION device_tokens_provider_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'device_tokens.provider cannot change (token %): register the token again as a new row', OLD.id
        USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER device_tokens_provider_fixed BEFORE UPDATE OF provider ON device_tokens
    FOR EACH ROW WHEN (NEW.provider IS DISTINCT FROM OLD.provider) EXECUTE FUNCTION device_tokens_provider_fixed();

-- Cancelling pushes about a subject (an assignment withdrawn or acknowledged, a pause lifted) takes them
-- out of the queue too. A push already claimed is cancelled all the same: if it goes out, its outcome finds
-- no queue row and is not written, as before.
CREATE OR REPLACE FUNCTION cancel_pushes_about(subjects text[], why text) RETURNS void LANGUAGE sql AS $$
    WITH dequeued AS (
        DELETE FROM delivery_queue q USING deliveries d, notifications n
         WHERE n.subject = ANY(subjects) AND d.notification_id = n.id AND q.delivery_id = d.id
        RETURNING q.delivery_id
    ), cancelled AS (
        UPDATE deliveries d SET state = 'cancelled', last_error = why, updated_at = now()
         WHERE d.id IN (SELECT delivery_id FROM dequeued)
        RETURNING d.id, d.attempts
    )
    INSERT INTO delivery_events (delivery_id, event, attempt, detail)
    SELECT id, 'cancelled', attempts, why FROM cancelled
$$;
