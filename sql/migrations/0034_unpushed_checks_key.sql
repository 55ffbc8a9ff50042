-- 0034: unpushed_checks gets a primary key, as every other table has.
--
-- A logical-replication publication FOR ALL TABLES (a replica, an upgrade by replication) refuses the UPDATE
-- and DELETE of a table without a key or replica identity: push-deliver's sweep of the checks (a DELETE)
-- would fail on every run. The key is a number from a sequence, so writing a check still waits for nobody
-- (0032: no key on the notification, and no foreign key). The table is small: its rows live from a failed
-- push until push-deliver's next run.

ALTER TABLE unpushed_checks ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;
