-- 0026: a push-only notification whose push reaches no device is listed in the inbox.
--
-- A category an organization sends as push only (organization_category_channels) stores its notification
-- out of the inbox (in_inbox false): the push is how the user hears of it. When none of its pushes can go
-- (every delivery failed: the token was retired, malformed or unregistered; or dead: the message was
-- refused, or the attempts ran out), the user never heard of it at all. It now joins the inbox, as the
-- jobs list a push-only row that cannot be pushed in the first place (no device) or that gives up its daily
-- slot. A delivery cancelled (the user switched pushes off, read it, logged an activity, ...) or expired
-- does not do this: there the notification has been answered, or is past saying.
CREATE FUNCTION list_unpushed_notification() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE notifications n SET in_inbox = true
     WHERE n.id = NEW.notification_id AND NOT n.in_inbox
       AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.notification_id = n.id AND o.state IN ('pending', 'retrying', 'sent'));
    RETURN NULL;
END $$;

CREATE TRIGGER deliveries_list_unpushed AFTER UPDATE OF state ON deliveries
    FOR EACH ROW WHEN (NEW.state IN ('failed', 'dead') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION list_unpushed_notification();
