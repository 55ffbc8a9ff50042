-- 0036: only time zones that mean the same to PostgreSQL and to the jobs.
--
-- 0016 took every name of pg_timezone_names. Two kinds meant something else to the jobs (Foundation):
-- * posix/…, right/…, localtime and posixrules are unknown to them: a user's zone among them was reported
--   on every run (exit 65, the organization's zone used) while push-deliver's quiet hours read it as UTC.
-- * CET, EET, MET and WET are abbreviations to PostgreSQL (a fixed offset all year: `AT TIME ZONE 'CET'` is
--   UTC+1 in July) and zones with summer time to the jobs: a reminder counted 14 days by the candidate
--   query said 13 in its text, a day early.
-- Rows naming one now name the same zone by its own name (posix/Europe/Oslo is Europe/Oslo; CET and MET
-- are Europe/Brussels, EET Europe/Athens, WET Europe/Lisbon, as tzdata 2024b links them); a user's
-- localtime or posixrules (the server's own setting, not the user's) becomes none (the organization's), an
-- organization's UTC. Then the names go. A test keeps every name left meaning the same on both sides.

CREATE FUNCTION pg_temp.same_zone(p_name text, p_fallback text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE
        WHEN z IN ('CET', 'MET') THEN 'Europe/Brussels'
        WHEN z = 'EET' THEN 'Europe/Athens'
        WHEN z = 'WET' THEN 'Europe/Lisbon'
        WHEN z IN ('localtime', 'posixrules') THEN p_fallback
        ELSE z
    END
      FROM (SELECT regexp_replace(p_name, '^(posix|right)/', '') AS z) named
$$;

CREATE TEMPORARY TABLE leaving ON COMMIT DROP AS
    SELECT name FROM time_zone_names
     WHERE name LIKE 'posix/%' OR name LIKE 'right/%' OR name IN ('localtime', 'posixrules', 'CET', 'EET', 'MET', 'WET');

UPDATE users SET time_zone = pg_temp.same_zone(time_zone, NULL) WHERE time_zone IN (SELECT name FROM leaving);
UPDATE organizations SET time_zone = pg_temp.same_zone(time_zone, 'UTC') WHERE time_zone IN (SELECT name FROM leaving);
DELETE FROM time_zone_names WHERE name IN (SELECT name FROM leaving);
