-- 0044: an `activities_logged` event says how many mentors its statement logged activities for.
--
-- A milestone is announced for a few activities logged by hand however long ago they happened (the 25th may be
-- the one the mentor forgot three weeks ago), but history loaded in bulk must flood nobody. "A few" was at most
-- 10 for the mentor in the statement, so a load in chunks of 10 a mentor, many mentors a statement, announced
-- milestones for years-old history. A mentor logs their own activities: a statement for several mentors is a
-- load. `payload.mentors` says how many the statement had (events from before this migration have none, and
-- count as a load).

CREATE OR REPLACE FUNCTION activities_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH added AS (
        SELECT mentor_id, count(*) AS n, max(logged_at) AS latest, max(occurred_at) AS latest_occurred,
               count(*) OVER () AS mentors
          FROM new_rows GROUP BY mentor_id
    ), counted AS (
        UPDATE users u SET activity_count = u.activity_count + a.n,
                           last_activity_logged_at = greatest(u.last_activity_logged_at, a.latest)
          FROM added a
         WHERE u.id = a.mentor_id
        RETURNING u.id, u.activity_count - a.n AS before, u.activity_count AS after, a.latest_occurred, a.mentors
    )
    INSERT INTO events (kind, mentor_id, payload)
    SELECT 'activities_logged', id,
           jsonb_build_object('before', before, 'after', after, 'latest_occurred_at', latest_occurred, 'mentors', mentors)
      FROM counted
     WHERE events_enabled()
     ORDER BY id;
    IF FOUND THEN PERFORM events_wake(); END IF;
    RETURN NULL;
END $$;
