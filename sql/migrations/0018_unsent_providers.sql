-- 0018: only APNs and FCM tokens are pushed to.
--
-- device_tokens accepts 'webpush' and 'expo' rows (the app may register them for later), but no job sends
-- to them: a delivery queued for one stayed pending for ever (the backlog alert fired for good, prune kept
-- its notification). A device that may be pushed to is now an active APNs or FCM token: a user with only
-- others gets the notification in the inbox without a push (inbox_only_no_device), as with no device.
-- Deliveries already queued for other providers are settled as failed, with the reason, and logged.

CREATE OR REPLACE VIEW active_device_tokens AS
    SELECT * FROM device_tokens WHERE retired_at IS NULL AND provider IN ('apns', 'fcm');

WITH stuck AS (
    DELETE FROM delivery_queue WHERE provider NOT IN ('apns', 'fcm')
    RETURNING delivery_id
), settled AS (
    UPDATE deliveries SET state = 'failed', last_error = 'no sender for this device''s provider (only APNs and FCM are pushed to)',
           updated_at = now()
     WHERE id IN (SELECT delivery_id FROM stuck)
    RETURNING id, attempts, last_error
)
INSERT INTO delivery_events (delivery_id, event, attempt, detail)
SELECT id, 'failed', attempts, last_error FROM settled;
