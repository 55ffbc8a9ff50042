-- 0027: a push put off to the end of its recipient's quiet hours leaves a `postponed` event.
--
-- push-deliver gives a retry, or a push more than ten minutes late, back to the queue when it falls inside its
-- recipient's quiet hours, due when the window ends, with no attempt counted. Nothing in the delivery's
-- history said so: `why` showed a push due at 07:00 that had been due at 03:00, with no word of why. The event
-- log's check now allows the event. NOT VALID: no row already there needs checking (the list only grows), so
-- the table is not scanned under the lock this takes.
ALTER TABLE delivery_events DROP CONSTRAINT delivery_events_event_check;
ALTER TABLE delivery_events ADD CONSTRAINT delivery_events_event_check
    CHECK (event IN ('sent', 'retried', 'failed', 'dead', 'expired', 'retired', 'cancelled', 'postponed')) NOT VALID;
