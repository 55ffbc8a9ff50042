-- 0029: a quiet window of the whole day (00:00–24:00) is refused, as an empty one (22:00–22:00) already is.
--
-- PostgreSQL's `time` takes 24:00, the end of the day, which as a value differs from 00:00: 0010's check
-- (start <> end) let 00:00–24:00 through. Its start and end are the same instant, midnight, so the jobs and
-- push-deliver read it as no window at all, and a user or organization that asked for silence all day got
-- pushes all day, without a word. A window is compared here by its clock times modulo the day. To stop
-- pushes altogether there is the switch (push_notification_configs.enabled, or the organization's rule).
--
-- A row that holds such a window already is set to no window, which is what every job read it as: left
-- in place under a NOT VALID check, it made every later update of its row fail (a user switching pushes
-- off, the advice above, got 23514).

UPDATE organization_delivery_policies SET quiet_hours_start = NULL, quiet_hours_end = NULL
 WHERE quiet_hours_start IS NOT NULL
   AND extract(epoch FROM quiet_hours_start)::int % 86400 = extract(epoch FROM quiet_hours_end)::int % 86400;

UPDATE push_notification_configs SET quiet_hours_start = NULL, quiet_hours_end = NULL
 WHERE quiet_hours_start IS NOT NULL
   AND extract(epoch FROM quiet_hours_start)::int % 86400 = extract(epoch FROM quiet_hours_end)::int % 86400;

ALTER TABLE organization_delivery_policies ADD CONSTRAINT organization_delivery_policies_quiet_hours_not_whole_day
    CHECK (quiet_hours_start IS NULL
           OR extract(epoch FROM quiet_hours_start)::int % 86400 <> extract(epoch FROM quiet_hours_end)::int % 86400);

ALTER TABLE push_notification_configs ADD CONSTRAINT push_notification_configs_quiet_hours_not_whole_day
    CHECK (quiet_hours_start IS NULL
           OR extract(epoch FROM quiet_hours_start)::int % 86400 <> extract(epoch FROM quiet_hours_end)::int % 86400);
