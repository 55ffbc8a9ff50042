-- 0032: a push-only notification whose pushes fail in two transactions at once is listed all the same.
--
-- 0026's check (list_unpushed) takes the notification's row with SKIP LOCKED. Two push-deliver workers that
-- fail its two pushes (two phones) at the same moment each saw the other's push still waiting, or found the
-- row taken by the other and skipped it: nobody listed it, and the user never heard of it. A check skipped
-- for a row somebody holds is now written down here, and push-deliver makes it again at the end of each run
-- (sweep_unpushed_checks), once the holder is done. A notification the user read or deleted meanwhile, or
-- whose other push was cancelled for the user's own doing or expired, is left as it is (as 0026 leaves it).
-- No key and no foreign key: writing a check never waits for anybody (a wait here, inside an outcome write
-- that holds queue rows, could close a circle with the app's changes to the notification).

CREATE TABLE unpushed_checks (
    notification_id  uuid NOT NULL,
    noted_at         timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION list_unpushed(p_notifications uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    free uuid[];
BEGIN
    IF coalesce(cardinality(p_notifications), 0) = 0 THEN RETURN; END IF;
    SELECT array_agg(n.id) INTO free FROM (
        SELECT n.id FROM notifications n WHERE n.id = ANY(p_notifications) AND NOT n.in_inbox
         ORDER BY n.id FOR NO KEY UPDATE SKIP LOCKED) n;
    -- Those somebody holds: checked again when push-deliver next sweeps.
    INSERT INTO unpushed_checks (notification_id)
    SELECT n.id FROM notifications n
     WHERE n.id = ANY(p_notifications) AND NOT n.in_inbox AND n.id <> ALL(coalesce(free, '{}'));
    IF free IS NULL THEN RETURN; END IF;
    UPDATE notifications n SET in_inbox = true
     WHERE n.id = ANY(free)
       AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.notification_id = n.id AND o.state IN ('pending', 'retrying', 'sent'));
END $$;

-- Makes the checks written down, up to `p_limit` of them, in a transaction of its own (the caller's):
-- those still held are written down again. Returns how many notifications were listed.
CREATE FUNCTION sweep_unpushed_checks(p_limit integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    due uuid[];
BEGIN
    WITH taken AS (
        DELETE FROM unpushed_checks c
         WHERE c.ctid IN (SELECT ctid FROM unpushed_checks ORDER BY noted_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
        RETURNING c.notification_id
    )
    SELECT array_agg(DISTINCT t.notification_id) INTO due FROM taken t;
    IF due IS NULL THEN RETURN 0; END IF;
    -- As 0026 lists: only when each push failed, died, or went with its phone to another user; not when one was
    -- cancelled for the user's own doing (pushes switched off since) or expired, or the user read or deleted it.
    due := array(SELECT n.id FROM notifications n
                  WHERE n.id = ANY(due) AND NOT n.in_inbox AND n.read_at IS NULL AND n.deleted_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries d
                                     WHERE d.notification_id = n.id
                                       AND (d.state = 'expired' OR (d.state = 'cancelled' AND d.last_error IS DISTINCT FROM 'the device token moved to another user'))));
    PERFORM list_unpushed(due);
    RETURN (SELECT count(*) FROM notifications n WHERE n.id = ANY(due) AND n.in_inbox);
END $$;
