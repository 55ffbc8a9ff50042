-- 0026: a push-only notification whose push reaches no device is listed in the inbox.
--
-- A category an organization sends as push only (organization_category_channels) stores its notification
-- out of the inbox (in_inbox false): the push is how the user hears of it. When none of its pushes can go
-- (every delivery failed: the token was retired, malformed or unregistered; or dead: the message was
-- refused, or the attempts ran out; or cancelled because its device token moved to another user), the user
-- never heard of it at all. It now joins the inbox, as the jobs list a push-only row that cannot be pushed
-- in the first place (no device) or that gives up its daily slot. A delivery cancelled for the user's own
-- doing (pushes switched off, the notification read, an activity logged, ...) or expired does not do this:
-- there the notification has been answered, or is past saying.
--
-- The notification's row is taken with SKIP LOCKED: the outcome writes lock queue rows before it, the
-- app's changes to a notification (read, deleted) lock it before its queue rows (0024's cancel), and
-- waiting here could close that circle. A notification someone is changing at that moment is one the user
-- is acting on, and is left as it is.

-- Lists each of `p_notifications` that is out of the inbox and has no push sent or still to go.
CREATE FUNCTION list_unpushed(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    free uuid[];
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    SELECT array_agg(n.id) INTO free FROM (
        SELECT n.id FROM notifications n WHERE n.id = ANY(p_notifications) AND NOT n.in_inbox
         ORDER BY n.id FOR NO KEY UPDATE SKIP LOCKED) n;
    IF free IS NULL THEN RETURN; END IF;
    UPDATE notifications n SET in_inbox = true
     WHERE n.id = ANY(free)
       AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.notification_id = n.id AND o.state IN ('pending', 'retrying', 'sent'));
END $$;

CREATE FUNCTION deliveries_list_unpushed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM list_unpushed(ARRAY[NEW.notification_id]);
    RETURN NULL;
END $$;

CREATE TRIGGER deliveries_list_unpushed AFTER UPDATE OF state ON deliveries
    FOR EACH ROW WHEN (NEW.state IN ('failed', 'dead') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION deliveries_list_unpushed();

-- 0025's cancel when a device token moves to another user: the first user's notifications whose only push
-- was that one are listed.
CREATE OR REPLACE FUNCTION device_tokens_owner_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    moved bigint[];
BEGIN
    moved := array(SELECT q.delivery_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
                    WHERE d.device_token_id = NEW.id);
    PERFORM cancel_deliveries(moved, 'the device token moved to another user');
    PERFORM list_unpushed(array(SELECT DISTINCT d.notification_id FROM deliveries d WHERE d.id = ANY(moved)));
    RETURN NULL;
END $$;
