-- 0016: time zones must be ones PostgreSQL (and the jobs) know.
--
-- users.time_zone and organizations.time_zone were free text: a typo ('Europe/Olso') made every candidate
-- query that computes a local day fail (PostgreSQL: 22023 time zone not recognized), so a scheduled job
-- stopped at that user and event-notify took the same batch again and again. Now:
-- * time_zone_names holds the zone names this server knows (pg_timezone_names, read once here: the view reads
--   the zone files on every use). A new tzdata zone is added by inserting its name.
-- * New and changed rows must name one of them (a foreign key). It is NOT VALID: rows written before are not
--   refused by this upgrade; the jobs report them (a user's: exit 65, its organization's zone used; an
--   organization's: its candidates are skipped, exit 78), and a query falls back instead of failing.

CREATE TABLE time_zone_names (name text PRIMARY KEY);
INSERT INTO time_zone_names (name) SELECT DISTINCT name FROM pg_timezone_names;

ALTER TABLE users ADD CONSTRAINT users_time_zone_known
    FOREIGN KEY (time_zone) REFERENCES time_zone_names (name) NOT VALID;
ALTER TABLE organizations ADD CONSTRAINT organizations_time_zone_known
    FOREIGN KEY (time_zone) REFERENCES time_zone_names (name) NOT VALID;
