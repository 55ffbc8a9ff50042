-- Generator for large benchmark databases, into a freshly migrated database (no demo data):
--
--   psql -v ON_ERROR_STOP=1 -v mentors=1000000 -f sql/seed/generate.sql      (default: 10000 mentors)
--
-- Set-based throughout (INSERT ... SELECT over generate_series, no per-row loops), deterministic (every
-- "random" choice hashes the mentor number, so two runs with the same :mentors give the same data apart
-- from the dates, which are relative to now()). Per 1M mentors it produces roughly:
--   20 organizations of skewed size (custom inactivity thresholds 7/21/30 days, one with it disabled)
--   ~50k coordinators (1 per 20 mentors, with coordinator_scopes) and 20 org_admins
--   ~20M activities: ~8% of mentors none, most 5-40, a tail up to ~150, spread over the membership;
--     ~30% of mentors have been quiet (coalesce(last activity, joined_at)) for more than 14 days
--   ~3% paused now, ~5% with a lifted pause; ~5% master switch off, ~5% inactivity category off; ~1% deactivated
--   device tokens: ~70% one, ~15% two, ~15% none (APNs production/sandbox and FCM), plus retired ones
--   ~5% of mentors with an earlier inactivity reminder (and its sent deliveries)
-- Activities go through the statement-level insert trigger, which maintains users.last_activity_logged_at
-- (a few big statements, so the trigger runs once per batch); the script checks the column on a sample.
--   ~4M assignments (one per ~4 months of membership; ~0.4M active, ~2% of mentors with one active and
--     unacknowledged for 10+ days, ~80% of those already reminded), ~3.7M read receipts
--   ~1.5M impact summaries (last year's and the year before's), announced when computed, except those of
--     organization 6, computed six hours ago; ~3% of last year's recomputed lately
-- Not generated: job runs, decisions, earlier overdue digests.

\if :{?mentors}
\else
\set mentors 10000
\endif
\set ON_ERROR_STOP 1
\timing on
\echo generating :mentors mentors

-- Large temporary staging tables: give them memory, and let nothing run in parallel (determinism).
SET temp_buffers = '1GB';
SET work_mem = '256MB';
SET maintenance_work_mem = '1GB';
-- History, not news: the generated rows append no events.
SET mentor_push.events = 'off';

DO $$
BEGIN
    IF EXISTS (SELECT FROM organizations) THEN
        RAISE EXCEPTION 'generate.sql: the database already has organizations; load into a freshly migrated database';
    END IF;
END $$;

-- rnd(n, salt): a uniform number in [0, 1) that depends only on (n, salt).
CREATE OR REPLACE FUNCTION pg_temp.rnd(n bigint, salt bigint) RETURNS float8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT (hashint8extended(n, salt) & 9007199254740991)::float8 / 9007199254740992.0 $$;
-- A deterministic UUID in version 4 format (version nibble 4, variant nibble 8), from a seed text.
-- (These helpers are single expressions without FROM, so the planner inlines them.)
CREATE OR REPLACE FUNCTION pg_temp.uuid_of(seed text) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT overlay(overlay(md5(seed) PLACING '4' FROM 13) PLACING '8' FROM 17)::uuid $$;
-- APNs device token: 64 lowercase hex characters.
CREATE OR REPLACE FUNCTION pg_temp.apns_token(seed text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT md5('apns-a:' || seed) || md5('apns-b:' || seed) $$;
-- FCM registration token: 22 characters, ':APA91b', 134 URL-safe base64 characters (163 in all).
CREATE OR REPLACE FUNCTION pg_temp.fcm_token(seed text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE AS     -- STABLE like convert_to, or it would not be inlined
$$ SELECT left(overlay(translate(encode(sha512(convert_to('fcm-1:' || seed, 'UTF8')) || sha512(convert_to('fcm-2:' || seed, 'UTF8')),
                                       'base64'), E'+/=\n', '-_')
                     PLACING ':APA91b' FROM 23 FOR 0), 163) $$;

-- Organizations ---------------------------------------------------------------------------------------------

CREATE TEMP TABLE gen_orgs AS
SELECT k, pg_temp.uuid_of('org:' || k) AS id, name,
       CASE k WHEN 4 THEN 7 WHEN 7 THEN 21 WHEN 11 THEN 30 ELSE 14 END AS threshold_days,
       k <> 15 AS inactivity_on
  FROM unnest(ARRAY[
        'Landsforeningen for hjerte- og lungesyke', 'Kreftforeningen', 'Mental Helse', 'Blindeforbundet',
        'Diabetesforbundet', 'Norges Handikapforbund', 'Revmatikerforbundet', 'Astma- og Allergiforbundet',
        'Hørselshemmedes Landsforbund', 'Norsk Epilepsiforbund', 'Norsk Parkinsonforbund', 'MS-forbundet',
        'Ryggforeningen', 'Afasiforbundet', 'Landsforeningen for Nyrepasienter', 'Cerebral Parese-foreningen',
        'Foreningen for hjertesyke barn', 'Norsk Forbund for Utviklingshemmede', 'LPP', 'Barnekreftforeningen'])
       WITH ORDINALITY AS t (name, k);

INSERT INTO organizations (id, name, time_zone, default_locale, created_at)
SELECT id, name, 'Europe/Oslo', CASE WHEN k = 20 THEN 'en' ELSE 'nb' END, now() - interval '4 years'
  FROM gen_orgs ORDER BY k;

INSERT INTO organization_scenario_rules (organization_id, scenario, enabled, settings)
SELECT id, 'inactivity', NULL, jsonb_build_object('threshold_days', threshold_days) FROM gen_orgs WHERE threshold_days <> 14
UNION ALL
SELECT id, 'inactivity', false, '{}' FROM gen_orgs WHERE NOT inactivity_on
UNION ALL
SELECT id, 'honorarium', true, '{"assignment_count": 3}' FROM gen_orgs WHERE k IN (2, 4);

-- Mentors: one staging row each, with every choice made up front ---------------------------------------------
-- n ascends with joined_at (over 3 years, more of them recently), so users go into the heap in join order.

CREATE TEMP TABLE gen_mentors AS
SELECT n, id, org, joined_at, k, last_at, u_pause, u_cfg, u_dev,
       CASE WHEN k > 0 THEN last_at ELSE joined_at END AS quiet_since
  FROM (SELECT n, id, org, joined_at, span, k,
               CASE WHEN k = 0 THEN NULL
                    -- ~24% of those with activities went quiet more than 14.5 days ago ...
                    WHEN pg_temp.rnd(n, 5) < 0.24 AND span > interval '15 days'
                         THEN date_trunc('second', now() - interval '14.5 days' - (span - interval '14.5 days') * pg_temp.rnd(n, 6) ^ 1.5)
                    -- ... the rest logged something in the last 14 days (or since joining)
                    ELSE date_trunc('second', now() - least(span, interval '14 days') * pg_temp.rnd(n, 6))
               END AS last_at,
               pg_temp.rnd(n, 7) AS u_pause, pg_temp.rnd(n, 8) AS u_cfg, pg_temp.rnd(n, 9) AS u_dev
          FROM (SELECT n, id, org, joined_at, now() - joined_at AS span,
                       -- activity count, skewed; members of less than half a year have proportionally fewer
                       round(k0 * least(1.0, extract(epoch FROM now() - joined_at) / (180 * 86400)))::int AS k
                  FROM (SELECT n,
                               pg_temp.uuid_of('mentor:' || n) AS id,
                               1 + floor(20 * pg_temp.rnd(n, 1) ^ 1.6)::int AS org,
                               date_trunc('second', now() - interval '3 years' * (1 - sqrt((n - pg_temp.rnd(n, 2)) / :mentors))) AS joined_at,
                               CASE WHEN u < 0.08 THEN 0
                                    WHEN u < 0.18 THEN 1 + floor(4 * v)
                                    WHEN u < 0.86 THEN 5 + floor(36 * v ^ 1.6)
                                    ELSE 41 + floor(110 * v ^ 1.5) END AS k0
                          FROM (SELECT n, pg_temp.rnd(n, 3) AS u, pg_temp.rnd(n, 4) AS v
                                  FROM generate_series(1, :mentors) AS n) s) s) s) s;
ALTER TABLE gen_mentors ADD PRIMARY KEY (n);
ANALYZE gen_mentors;

-- Staff: one org_admin per organization (rank 0), one coordinator per 20 of its mentors (ranks 1..).
CREATE TEMP TABLE gen_org_size AS
SELECT org, count(*) AS mentors, greatest(1, ceil(count(*) / 20.0))::int AS coordinators FROM gen_mentors GROUP BY org;

CREATE TEMP TABLE gen_staff AS
SELECT o.k AS org, o.id AS organization_id, c.rank,
       pg_temp.uuid_of('staff:' || o.k || ':' || c.rank) AS id,
       CASE WHEN c.rank = 0 THEN 'org_admin' ELSE 'coordinator' END AS role
  FROM gen_orgs o
  JOIN gen_org_size z ON z.org = o.k
  CROSS JOIN LATERAL generate_series(0, z.coordinators) AS c (rank);

INSERT INTO users (id, organization_id, role, display_name, joined_at)
SELECT id, organization_id, role,
       CASE WHEN role = 'org_admin' THEN 'Administrator ' || org ELSE format('Koordinator %s-%s', org, rank) END,
       now() - interval '3 years' - rank * interval '1 hour'
  FROM gen_staff ORDER BY org, rank;

INSERT INTO users (id, organization_id, role, display_name, locale, joined_at)
SELECT m.id, o.id, 'peer_mentor',
       (ARRAY['Kari','Ola','Ingrid','Lars','Sigrid','Per','Marit','Nils','Astrid','Bjørn','Hilde','Eirik','Tone','Geir',
              'Camilla','Knut','Anne','Emma','Solveig','Liv','Henrik','Randi','Jonas','Marte','Ahmed','Ida','Siri','Thomas',
              'Fatima','Kristin','Morten','Hanne','Even','Frida','Jon','Aisha'])[1 + (hashint8extended(m.n, 10) & 1023) % 36]
       || ' ' ||
       (ARRAY['Nordmann','Berg','Dahl','Haugen','Johansen','Lie','Solberg','Moen','Kristiansen','Pedersen','Larsen',
              'Andersen','Olsen','Hansen','Eriksen','Karlsen','Nilsen','Halvorsen','Jakobsen','Strand','Bakke','Lund',
              'Hassan','Ruud','Holm','Berge','Aas','Vik','Foss','Sand','Lunde','Tangen','Ali','Nguyen'])[1 + (hashint8extended(m.n, 11) & 1023) % 34],
       CASE WHEN pg_temp.rnd(m.n, 12) < 0.06 THEN 'en' WHEN pg_temp.rnd(m.n, 12) < 0.10 THEN 'nb' END,
       m.joined_at
  FROM gen_mentors m JOIN gen_orgs o ON o.k = m.org
 ORDER BY m.n;

-- ~1% of mentors have left: deactivated some time after their last sign of life.
UPDATE users u SET deactivated_at = m.quiet_since + (now() - m.quiet_since) * pg_temp.rnd(m.n, 13)
  FROM gen_mentors m
 WHERE u.id = m.id AND pg_temp.rnd(m.n, 14) < 0.01;

INSERT INTO coordinator_scopes (organization_id, coordinator_id, mentor_id)
SELECT s.organization_id, s.id, m.id
  FROM (SELECT m.n, m.id, m.org, 1 + (hashint8extended(m.n, 15) & 2147483647) % z.coordinators AS rank
          FROM gen_mentors m JOIN gen_org_size z ON z.org = m.org) m
  JOIN gen_staff s ON s.org = m.org AND s.rank = m.rank
 ORDER BY m.n;

-- Activities -----------------------------------------------------------------------------------------------------
-- Mentor m's activities: k of them, the last at last_at, the others stratified over [joined_at, last_at) in
-- ascending order. Inserted in batches of ~250k mentors (~5M rows): one trigger run per batch.

SELECT format($f$
INSERT INTO activities (mentor_id, occurred_at, logged_at, kind)
SELECT m.id,
       a.logged_at - interval '1 hour' * (1 + 70 * pg_temp.rnd(m.n * 1000 + a.i, 17) ^ 3),
       a.logged_at,
       CASE WHEN pg_temp.rnd(m.n * 1000 + a.i, 18) < 0.7 THEN 'conversation'
            WHEN pg_temp.rnd(m.n * 1000 + a.i, 18) < 0.9 THEN 'phone_call'
            ELSE 'group_meeting' END
  FROM gen_mentors m
  CROSS JOIN LATERAL (
        SELECT i, CASE WHEN i = m.k THEN m.last_at
                       ELSE date_trunc('second', m.joined_at + (m.last_at - m.joined_at) * ((i - 1 + 0.999 * pg_temp.rnd(m.n * 1000 + i, 16)) / m.k))
                  END AS logged_at
          FROM generate_series(1, m.k) AS i) a
 WHERE m.k > 0 AND m.n BETWEEN %s AND %s
$f$, lo, least(lo + 249999, :mentors))
  FROM generate_series(1, :mentors, 250000) AS lo
\gexec

-- Availability pauses ------------------------------------------------------------------------------------------
-- ~3% paused now (60% open-ended, 40% with a future end), ~5% with a pause lifted in the last 6 months
-- (6.5% drawn, minus those who joined after the pause would have started).

INSERT INTO availability_pauses (mentor_id, starts_at, ends_at, reason, created_at)
SELECT m.id, p.starts_at, p.ends_at, p.reason, p.starts_at
  FROM gen_mentors m
  CROSS JOIN LATERAL (
        SELECT greatest(m.joined_at, date_trunc('second', now() - interval '1 day' * (1 + 90 * pg_temp.rnd(m.n, 20)))) AS starts_at,
               CASE WHEN pg_temp.rnd(m.n, 21) < 0.6 THEN NULL
                    ELSE date_trunc('second', now() + interval '1 day' * (1 + 45 * pg_temp.rnd(m.n, 22))) END AS ends_at,
               (ARRAY['Ferie', 'Sykmeldt', 'Permisjon', 'Eksamensperiode', NULL])[1 + (hashint8extended(m.n, 23) & 1023) % 5] AS reason
         WHERE m.u_pause < 0.03
        UNION ALL
        SELECT e - interval '1 day' * (7 + 80 * pg_temp.rnd(m.n, 24)), e,
               (ARRAY['Ferie', 'Sykmeldt', 'Reise', NULL])[1 + (hashint8extended(m.n, 25) & 1023) % 4]
          FROM (SELECT date_trunc('second', now() - interval '1 day' * (1 + 180 * pg_temp.rnd(m.n, 26))) AS e) x
         WHERE m.u_pause >= 0.03 AND m.u_pause < 0.095 AND e - interval '1 day' * (7 + 80 * pg_temp.rnd(m.n, 24)) > m.joined_at) p
 ORDER BY m.n;

-- Notification settings ----------------------------------------------------------------------------------------
-- ~5% master switch off, ~5% inactivity off, ~15% a row with everything on or some other category off.

INSERT INTO push_notification_configs (user_id, enabled, inactivity, milestone, impact_summary, updated_at)
SELECT id, u_cfg >= 0.05, NOT (u_cfg >= 0.05 AND u_cfg < 0.10), NOT (u_cfg >= 0.20 AND u_cfg < 0.25),
       NOT (u_cfg >= 0.22 AND u_cfg < 0.30), joined_at + (now() - joined_at) * pg_temp.rnd(n, 27)
  FROM gen_mentors WHERE u_cfg < 0.30
 ORDER BY n;

-- Device tokens ---------------------------------------------------------------------------------------------------
-- ~70% one active device, ~15% two, ~15% none; ~55% APNs (5% of those sandbox), ~45% FCM. ~6% also have
-- an old retired token. Coordinators and admins have one APNs device each.

INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id, created_at, last_seen_at, retired_at, retired_reason)
SELECT d.user_id, d.provider,
       CASE d.provider WHEN 'apns' THEN pg_temp.apns_token(d.seed) ELSE pg_temp.fcm_token(d.seed) END,
       CASE WHEN d.provider = 'apns' THEN CASE WHEN d.u_env < 0.05 THEN 'sandbox' ELSE 'production' END END,
       'no.likeperson.app', d.created_at, d.last_seen_at, d.retired_at,
       CASE WHEN d.retired_at IS NOT NULL THEN CASE d.provider WHEN 'apns' THEN 'Unregistered' ELSE 'UNREGISTERED' END END
  FROM (SELECT m.id AS user_id, m.id::text || ':' || s.seq AS seed,
               CASE WHEN pg_temp.rnd(m.n * 10 + s.seq, 30) < 0.55 THEN 'apns' ELSE 'fcm' END AS provider,
               pg_temp.rnd(m.n * 10 + s.seq, 31) AS u_env,
               -- the retired phone (3) came first, then device 1, then device 2
               m.joined_at + (now() - m.joined_at) * (s.seq % 3 + pg_temp.rnd(m.n * 10 + s.seq, 32)) / 4 AS created_at,
               CASE WHEN s.seq = 3 THEN m.joined_at + (now() - m.joined_at) * 0.3
                    ELSE greatest(m.joined_at + (now() - m.joined_at) * (s.seq % 3 + 1) / 4,
                                  now() - interval '1 day' * 30 * pg_temp.rnd(m.n * 10 + s.seq, 33) ^ 2) END AS last_seen_at,
               CASE WHEN s.seq = 3 THEN m.joined_at + (now() - m.joined_at) * 0.3 END AS retired_at
          FROM gen_mentors m
          CROSS JOIN LATERAL (VALUES (1), (2), (3)) AS s (seq)
         WHERE (s.seq = 1 AND m.u_dev >= 0.15)                               -- one device: 70% + 15%
            OR (s.seq = 2 AND m.u_dev >= 0.85)                               -- a second: 15%
            OR (s.seq = 3 AND pg_temp.rnd(m.n, 34) < 0.06)                   -- an old, retired one
        UNION ALL
        SELECT id, id::text || ':1', 'apns', 1.0, now() - interval '300 days', now() - interval '1 day', NULL
          FROM gen_staff) d;

-- Assignments ------------------------------------------------------------------------------------------------------
-- About one per four months of membership (between none and twice that, drawn per mentor), dispatched by the
-- mentor's coordinator and spread over the membership. Those of the last 30 days are mostly active, older
-- ones mostly completed (5% still active: long-running cases); ~93% acknowledged within three days. Per 1M
-- mentors: ~4M assignments, ~0.4M active, ~2% of mentors with an active one unacknowledged for 10+ days
-- (the follow-up's and the digest's cases).

CREATE TEMP TABLE gen_assignments AS
SELECT a.*,
       CASE WHEN a.state = 'active' THEN a.dispatched_at
            ELSE least(now(), a.dispatched_at + interval '1 day' * (1 + 60 * pg_temp.rnd(a.h, 53))) END AS state_changed_at,
       CASE WHEN pg_temp.rnd(a.h, 54) < 0.93 AND a.dispatched_at + interval '72 hours' * pg_temp.rnd(a.h, 55) ^ 2 <= now()
            THEN a.dispatched_at + interval '72 hours' * pg_temp.rnd(a.h, 55) ^ 2 END AS acknowledged_at
  FROM (SELECT m.n, d.h, pg_temp.uuid_of('assignment:' || d.h) AS id, o.id AS organization_id, m.id AS mentor_id,
               s.coordinator_id, d.dispatched_at,
               (ARRAY['Ring ny deltaker', 'Følg opp etter sykehusopphold', 'Likepersonsamtale på sykehuset',
                      'Samtale med pårørende', 'Gruppemøte for nye medlemmer', 'Følge til første kontroll',
                      'Telefonsamtale med nydiagnostisert', 'Besøk på rehabiliteringssenteret'])[1 + (d.h & 1023) % 8]
               || ' #' || d.i AS title,
               CASE WHEN d.dispatched_at > now() - interval '30 days'
                    THEN CASE WHEN pg_temp.rnd(d.h, 52) < 0.85 THEN 'active' WHEN pg_temp.rnd(d.h, 52) < 0.95 THEN 'completed' ELSE 'withdrawn' END
                    ELSE CASE WHEN pg_temp.rnd(d.h, 52) < 0.88 THEN 'completed' WHEN pg_temp.rnd(d.h, 52) < 0.95 THEN 'withdrawn' ELSE 'active' END
               END AS state
          FROM gen_mentors m
          JOIN gen_orgs o ON o.k = m.org
          JOIN coordinator_scopes s ON s.mentor_id = m.id
          CROSS JOIN LATERAL (SELECT least(15, floor(extract(epoch FROM now() - m.joined_at) / (120 * 86400) * 2 * pg_temp.rnd(m.n, 50)))::int AS cnt) c
          CROSS JOIN LATERAL (
                SELECT i, m.n * 100 + i AS h,
                       date_trunc('second', m.joined_at + (now() - m.joined_at) * ((i - 1 + pg_temp.rnd(m.n * 100 + i, 51)) / c.cnt)) AS dispatched_at
                  FROM generate_series(1, c.cnt) AS i) d) a;

INSERT INTO assignments (id, organization_id, mentor_id, coordinator_id, title, dispatched_at, state, state_changed_at)
SELECT id, organization_id, mentor_id, coordinator_id, title, dispatched_at, state, state_changed_at
  FROM gen_assignments ORDER BY dispatched_at;

INSERT INTO assignment_read_receipts (assignment_id, acknowledged_at)
SELECT id, acknowledged_at FROM gen_assignments WHERE acknowledged_at IS NOT NULL ORDER BY acknowledged_at;

-- Earlier follow-ups: ~80% of the assignments still unacknowledged 11+ days after dispatch were reminded on
-- their tenth day (the rest are what a first run, or one after a pause, catches up on).
INSERT INTO notifications (user_id, category, title, body, data, created_at, read_at, dedupe_key, subject)
SELECT a.mentor_id, 'assignment_follow_up', 'Et oppdrag venter på deg',
       format('Du fikk oppdraget «%s» for 10 dager siden. Trykk her for å se det og bekrefte at du har lest det.', a.title),
       jsonb_build_object('category', 'assignment_follow_up', 'route', '/assignments/' || a.id, 'assignment_id', a.id),
       a.dispatched_at + interval '10 days' + interval '1 day' * pg_temp.rnd(a.h, 57), NULL,
       'assignment_follow_up:' || a.id, 'assignment:' || a.id
  FROM gen_assignments a
 WHERE a.state = 'active' AND a.acknowledged_at IS NULL AND a.dispatched_at < now() - interval '11 days'
   AND pg_temp.rnd(a.h, 56) < 0.8
 ORDER BY a.dispatched_at;

-- Impact summaries ------------------------------------------------------------------------------------------------
-- The two last years' summaries of every mentor who was a member then. Each organization computes them on
-- its own day (when its annual report is approved); organization 6 did it six hours ago, so its summaries
-- are not announced yet (the candidates). ~3% of last year's were recomputed in the last 20 days (already
-- announced: not again). Every summary computed more than a day ago was announced then.

CREATE TEMP TABLE gen_summaries AS
SELECT s.*, CASE WHEN s.y = 1 AND pg_temp.rnd(s.n, 60) < 0.03 AND s.first_at < now() - interval '20 days'
                 THEN date_trunc('second', now() - interval '20 days' * pg_temp.rnd(s.n, 61)) ELSE s.first_at END AS computed_at
  FROM (SELECT m.n, m.id AS mentor_id, y.y, extract(year FROM now())::int - y.y AS year,
               date_trunc('second',
                   CASE WHEN m.org = 6 AND y.y = 1 THEN now() - interval '6 hours'
                        ELSE greatest(date_trunc('year', now()) - make_interval(years => y.y - 1) + interval '2 days',
                                      now() - make_interval(years => y.y - 1) - interval '1 day' * (2 + (m.org * 23) % 300))
                   END + interval '1 hour' * 3 * pg_temp.rnd(m.n, 62)) AS first_at
          FROM gen_mentors m
          CROSS JOIN (VALUES (1), (2)) AS y (y)
         WHERE m.joined_at < date_trunc('year', now()) - make_interval(years => y.y - 1)) s;

INSERT INTO impact_summaries (mentor_id, year, computed_at)
SELECT mentor_id, year, computed_at FROM gen_summaries ORDER BY computed_at;

INSERT INTO notifications (user_id, category, title, body, data, created_at, read_at, dedupe_key, subject)
SELECT s.mentor_id, 'impact_summary', 'Året ditt som likeperson',
       format('Oppsummeringen av det du har bidratt med i %s er klar. Trykk her for å se den.', s.year),
       jsonb_build_object('category', 'impact_summary', 'route', '/impact/' || s.year, 'year', s.year),
       s.first_at + interval '1 hour' * 20 * pg_temp.rnd(s.n * 10 + s.y, 63),
       CASE WHEN pg_temp.rnd(s.n * 10 + s.y, 64) < 0.6 THEN s.first_at + interval '1 day' * 3 * pg_temp.rnd(s.n * 10 + s.y, 65) END,
       format('impact_summary:%s:%s', s.mentor_id, s.year), 'year:' || s.year
  FROM gen_summaries s
 WHERE s.first_at < now() - interval '1 day'
 ORDER BY s.first_at;

-- Earlier inactivity reminders ------------------------------------------------------------------------------------
-- ~1 in 6 of the mentors now quiet beyond their organization's threshold (and without pauses) was reminded
-- between crossing the threshold and now: some within a threshold (suppressed now), some longer ago.
-- dedupe_key: 'inactivity:<user uuid>:<stretch start as unix epoch seconds>'.

INSERT INTO notifications (user_id, category, title, body, data, created_at, read_at, dedupe_key)
SELECT r.id, 'inactivity',
       CASE r.locale WHEN 'en' THEN 'We miss you' ELSE 'Vi savner deg' END,
       format(CASE r.locale WHEN 'en' THEN 'It has been %s days since you last logged an activity. Log your conversations in the app!'
                            ELSE 'Det er %s dager siden du sist registrerte en aktivitet. Husk å logge samtalene dine i appen!' END,
              extract(day FROM r.created_at - r.quiet_since)),
       jsonb_build_object('scenario', 'inactivity', 'anchor', r.quiet_since,
                          'days_inactive', extract(day FROM r.created_at - r.quiet_since)),
       r.created_at,
       CASE WHEN pg_temp.rnd(r.n, 42) < 0.4 THEN r.created_at + interval '1 hour' * 48 * pg_temp.rnd(r.n, 43) END,
       format('inactivity:%s:%s', r.id, extract(epoch FROM r.quiet_since)::bigint)
  FROM (SELECT m.n, m.id, m.quiet_since, coalesce(u.locale, og.default_locale) AS locale,
               date_trunc('second', m.quiet_since + make_interval(days => o.threshold_days)
                   + (now() - m.quiet_since - make_interval(days => o.threshold_days)) * pg_temp.rnd(m.n, 41)) AS created_at
          FROM gen_mentors m
          JOIN gen_orgs o ON o.k = m.org
          JOIN users u ON u.id = m.id
          JOIN organizations og ON og.id = o.id
         WHERE o.inactivity_on AND m.u_pause >= 0.095
           AND m.quiet_since < now() - make_interval(days => o.threshold_days + 1)
           AND pg_temp.rnd(m.n, 40) < 0.17) r
 ORDER BY r.n;

-- The pushes of every notification above: one sent delivery per device token that was active then.
INSERT INTO deliveries (notification_id, device_token_id, state, attempts, provider_message_id, created_at, updated_at)
SELECT n.id, t.id, 'sent', 1, md5(n.id::text || t.id), n.created_at, n.created_at + interval '1 second'
  FROM notifications n
  JOIN device_tokens t ON t.user_id = n.user_id AND t.created_at <= n.created_at
                      AND (t.retired_at IS NULL OR t.retired_at > n.created_at);

-- Checks -----------------------------------------------------------------------------------------------------------

-- The trigger-maintained column, against max(logged_at) on a sample of ~2000 mentors (and against the
-- planned value for all of them).
DO $$
DECLARE bad bigint;
BEGIN
    SELECT count(*) INTO bad
      FROM gen_mentors m JOIN users u ON u.id = m.id
     WHERE m.n % greatest(1, (SELECT count(*) / 2000 FROM gen_mentors)) = 0
       AND u.last_activity_logged_at IS DISTINCT FROM (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id);
    IF bad > 0 THEN RAISE EXCEPTION 'generate: users.last_activity_logged_at wrong for % sampled users', bad; END IF;
    SELECT count(*) INTO bad
      FROM gen_mentors m JOIN users u ON u.id = m.id
     WHERE u.last_activity_logged_at IS DISTINCT FROM m.last_at;
    IF bad > 0 THEN RAISE EXCEPTION 'generate: users.last_activity_logged_at differs from the plan for % mentors', bad; END IF;
END $$;

-- The delivery policies on (issue 9), so the benchmark decides with them: every organization caps
-- non-critical pushes at 3 a day and keeps quiet hours 22:00-07:00; the largest marks new assignments
-- critical and sends impact summaries to the inbox only; 2% of mentors set a cap and a window of their own.
INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end, daily_push_cap, critical_categories)
SELECT id, '22:00', '07:00', 3, CASE WHEN row_number() OVER (ORDER BY id) = 1 THEN '{new_assignment}'::text[] ELSE '{}' END FROM organizations;
INSERT INTO organization_category_channels (organization_id, category, channels)
SELECT id, 'impact_summary', 'inbox_only' FROM organizations ORDER BY id LIMIT 1;
INSERT INTO push_notification_configs (user_id, daily_push_cap, quiet_hours_start, quiet_hours_end)
SELECT id, 1, '21:00', '08:00' FROM users WHERE role = 'peer_mentor' AND hashtext(id::text) % 50 = 0
ON CONFLICT (user_id) DO UPDATE SET daily_push_cap = excluded.daily_push_cap,
    quiet_hours_start = excluded.quiet_hours_start, quiet_hours_end = excluded.quiet_hours_end;

VACUUM (ANALYZE);

\timing off
SELECT t.name AS "table", t.count AS "rows"
  FROM (          SELECT 1, 'organizations', count(*) FROM organizations
        UNION ALL SELECT 2, 'users: peer mentors', count(*) FROM users WHERE role = 'peer_mentor'
        UNION ALL SELECT 3, 'users: staff', count(*) FROM users WHERE role <> 'peer_mentor'
        UNION ALL SELECT 4, 'coordinator_scopes', count(*) FROM coordinator_scopes
        UNION ALL SELECT 5, 'activities', count(*) FROM activities
        UNION ALL SELECT 6, 'availability_pauses', count(*) FROM availability_pauses
        UNION ALL SELECT 7, 'push_notification_configs', count(*) FROM push_notification_configs
        UNION ALL SELECT 8, 'device_tokens', count(*) FROM device_tokens
        UNION ALL SELECT 9, 'notifications', count(*) FROM notifications
        UNION ALL SELECT 10, 'deliveries', count(*) FROM deliveries
        UNION ALL SELECT 11, 'assignments', count(*) FROM assignments
        UNION ALL SELECT 12, 'assignments: active', count(*) FROM assignments WHERE state = 'active'
        UNION ALL SELECT 13, 'assignment_read_receipts', count(*) FROM assignment_read_receipts
        UNION ALL SELECT 14, 'impact_summaries', count(*) FROM impact_summaries) AS t (ord, name, count)
 ORDER BY t.ord;

SELECT round(100.0 * count(*) FILTER (WHERE coalesce(last_activity_logged_at, joined_at) < now() - interval '14 days') / count(*), 1)
           AS "% quiet > 14 days",
       round(100.0 * count(*) FILTER (WHERE last_activity_logged_at IS NULL) / count(*), 1) AS "% never logged",
       round(1.0 * (SELECT count(*) FROM device_tokens t JOIN users m ON m.id = t.user_id
                     WHERE t.retired_at IS NULL AND m.role = 'peer_mentor' AND m.deactivated_at IS NULL) / count(*), 2) AS "active devices / mentor"
  FROM users
 WHERE role = 'peer_mentor' AND deactivated_at IS NULL;
