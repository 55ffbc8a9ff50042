-- Demo data for the peer-mentor app: three organizations, their staff, and ~36 peer mentors that
-- between them cover every case inactivity-check has to decide, and the cases of assignment-follow-up,
-- overdue-digest and impact-summary (see the Assignments and Impact summaries sections).
--
--   psql -v ON_ERROR_STOP=1 -f sql/seed/demo.sql        (into a freshly migrated database)
--
-- Every instant is relative to the moment of loading (now(), truncated to whole seconds so the epoch
-- seconds in dedupe keys are exact), so the demo tells the same story on any date. Organizations and
-- users have fixed, readable UUIDs (valid v4 format):
--   00000000-0000-4000-8000-000000000001..3   organizations A, B, C
--   00000000-0000-4000-8000-0000000001xx      users of A, Landsforeningen for hjerte- og lungesyke
--   00000000-0000-4000-8000-0000000002xx      users of B, Blindeforbundet
--   00000000-0000-4000-8000-0000000003xx      users of C, Demo Org Off
--   xx = 01 org_admin, 02-03 coordinators, 11 and up peer mentors
--
-- The rule inactivity-check applies (see the comment on each mentor for what it should do):
--   stretch start = latest of (last activity logged_at, or joined_at if none) and the end of the latest
--   lifted pause (ends_at <= now); candidate when now - stretch start >= the organization's threshold
--   (scenario_defaults: 14 days; B: 7 days). Suppressed when: the organization's scenario is off (C);
--   paused now; push_notification_configs.enabled = false (master off); .inactivity = false (category
--   off); an 'inactivity' notification created after the stretch start and less than a threshold ago.
--   Deactivated mentors are never considered. No device token: the inbox row only.
-- A sanity query that derives each mentor's expected state is at the end of this file.

BEGIN;

-- History, not news: this load appends no events (event-notify would otherwise announce every pause).
SET LOCAL mentor_push.events = 'off';

-- Session-local helpers (pg_temp: they vanish with the session and never touch the schema).
CREATE OR REPLACE FUNCTION pg_temp.ago(i interval) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$ SELECT date_trunc('second', now()) - i $$;
CREATE OR REPLACE FUNCTION pg_temp.from_now(i interval) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$ SELECT date_trunc('second', now()) + i $$;
-- APNs device token: 32 bytes as 64 lowercase hex characters.
CREATE OR REPLACE FUNCTION pg_temp.apns_token(seed text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT md5('apns-a:' || seed) || md5('apns-b:' || seed) $$;
-- FCM registration token: a 22-character instance id, ':', then 'APA91b' and 134 URL-safe base64
-- characters (163 characters in all, like the real ones).
CREATE OR REPLACE FUNCTION pg_temp.fcm_token(seed text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT substr(b, 1, 22) || ':APA91b' || substr(b, 23, 134)
      FROM (SELECT translate(encode(sha256(convert_to('fcm-1:' || seed, 'UTF8')) || sha256(convert_to('fcm-2:' || seed, 'UTF8'))
                                 || sha256(convert_to('fcm-3:' || seed, 'UTF8')) || sha256(convert_to('fcm-4:' || seed, 'UTF8')),
                                   'base64'), E'+/=\n', '-_') AS b) t
$$;

-- Organizations --------------------------------------------------------------------------------------

INSERT INTO organizations (id, name, time_zone, default_locale, created_at) VALUES
    ('00000000-0000-4000-8000-000000000001', 'Landsforeningen for hjerte- og lungesyke', 'Europe/Oslo', 'nb', pg_temp.ago('3 years')),
    ('00000000-0000-4000-8000-000000000002', 'Blindeforbundet',                          'Europe/Oslo', 'nb', pg_temp.ago('2 years')),
    ('00000000-0000-4000-8000-000000000003', 'Demo Org Off',                             'Europe/Oslo', 'nb', pg_temp.ago('1 year'));

-- A uses the default inactivity threshold (14 days, no rule row). B: 7 days, assignment follow-up after
-- 7 days instead of 10, and honorarium enabled. C: the inactivity scenario switched off.
INSERT INTO organization_scenario_rules (organization_id, scenario, enabled, settings, updated_at) VALUES
    ('00000000-0000-4000-8000-000000000002', 'inactivity', NULL,  '{"threshold_days": 7}',   pg_temp.ago('90 days')),
    ('00000000-0000-4000-8000-000000000002', 'assignment_follow_up', NULL, '{"follow_up_days": 7}', pg_temp.ago('90 days')),
    ('00000000-0000-4000-8000-000000000002', 'honorarium', true,  '{"assignment_count": 3}', pg_temp.ago('90 days')),
    ('00000000-0000-4000-8000-000000000003', 'inactivity', false, '{}',                      pg_temp.ago('30 days'));

-- Users ----------------------------------------------------------------------------------------------

INSERT INTO users (id, organization_id, role, display_name, locale, joined_at, deactivated_at)
SELECT ('00000000-0000-4000-8000-000000000' || u.n)::uuid,
       ('00000000-0000-4000-8000-00000000000' || left(u.n, 1))::uuid,
       u.role, u.display_name, u.locale, pg_temp.ago(u.joined::interval),
       CASE WHEN u.deactivated IS NOT NULL THEN pg_temp.ago(u.deactivated::interval) END
  FROM (VALUES
    -- Organization A: Landsforeningen for hjerte- og lungesyke (threshold 14 days, the default)
    ('101', 'org_admin',   'Trude Aasen',    NULL, '3 years',  NULL),
    ('102', 'coordinator', 'Svein Myhre',    NULL, '3 years',  NULL),
    ('103', 'coordinator', 'Linda Bråten',   NULL, '2 years',  NULL),
    -- Kari Nordmann: last activity 20 days ago → notified (1 APNs production device, 1 delivery).
    ('111', 'peer_mentor', 'Kari Nordmann',  NULL, '400 days', NULL),
    -- Ola Nordmann: active 3 days ago → not a candidate. Has an unread assignment dispatched 12 days ago.
    ('112', 'peer_mentor', 'Ola Nordmann',   NULL, '500 days', NULL),
    -- Ingrid Berg: joined 30 days ago, never logged anything → notified (anchor = joined_at).
    ('113', 'peer_mentor', 'Ingrid Berg',    NULL, '30 days',  NULL),
    -- Nils Dahl: joined 2 days ago, never logged anything → not a candidate.
    ('114', 'peer_mentor', 'Nils Dahl',      NULL, '2 days',   NULL),
    -- Sigrid Haugen: last activity 40 days ago, paused (open-ended, 'Ferie til 15. mars') → suppressed, paused.
    ('115', 'peer_mentor', 'Sigrid Haugen',  NULL, '600 days', NULL),
    -- Lars Johansen: last activity 25 days ago, paused until 5 days from now → suppressed, paused.
    ('116', 'peer_mentor', 'Lars Johansen',  NULL, '300 days', NULL),
    -- Marit Lie: last activity 60 days ago, pause lifted 3 days ago → not a candidate (stretch starts 3 days ago).
    ('117', 'peer_mentor', 'Marit Lie',      NULL, '700 days', NULL),
    -- Per Solberg: last activity 70 days ago, pause lifted 20 days ago → notified (anchor = pause end).
    ('118', 'peer_mentor', 'Per Solberg',    NULL, '800 days', NULL),
    -- Astrid Moen: last activity 10 days ago in A (14 days) → not a candidate. Compare Jonas Bakke in B.
    ('119', 'peer_mentor', 'Astrid Moen',    NULL, '250 days', NULL),
    -- Bjørn Kristiansen: last activity 30 days ago, master switch off → suppressed, push disabled.
    ('120', 'peer_mentor', 'Bjørn Kristiansen', NULL, '450 days', NULL),
    -- Hilde Pedersen: last activity 30 days ago, category 'inactivity' off → suppressed, category disabled.
    ('121', 'peer_mentor', 'Hilde Pedersen', NULL, '350 days', NULL),
    -- Eirik Larsen: last activity 22 days ago, no device token → notified, inbox row only (no delivery).
    ('122', 'peer_mentor', 'Eirik Larsen',   NULL, '200 days', NULL),
    -- Tone Andersen: last activity 25 days ago, APNs production + FCM → notified, two deliveries, which wait
    -- for the end of her own quiet hours (two hours from now).
    ('123', 'peer_mentor', 'Tone Andersen',  NULL, '380 days', NULL),
    -- Geir Olsen: last activity 18 days ago, one retired APNs token + one active FCM → notified, one delivery (FCM).
    ('124', 'peer_mentor', 'Geir Olsen',     NULL, '420 days', NULL),
    -- Camilla Hansen: last activity 16 days ago, APNs sandbox token → notified, one delivery (sandbox gateway).
    ('125', 'peer_mentor', 'Camilla Hansen', NULL, '150 days', NULL),
    -- Knut Eriksen: last activity 20 days ago, reminded 5 days ago → suppressed, already notified.
    ('126', 'peer_mentor', 'Knut Eriksen',   NULL, '520 days', NULL),
    -- Anne Karlsen: last activity 31 days ago, reminded 16 days ago (> 14) → notified again.
    ('127', 'peer_mentor', 'Anne Karlsen',   NULL, '610 days', NULL),
    -- Emma Wilson: locale 'en', last activity 21 days ago → notified, English message.
    ('128', 'peer_mentor', 'Emma Wilson',    'en', '180 days', NULL),
    -- Solveig Nilsen: explicit locale 'nb', last activity 15 days ago → notified, Norwegian message.
    ('129', 'peer_mentor', 'Solveig Nilsen', 'nb', '240 days', NULL),
    -- Quotes, SQL and emoji in the name; last activity 19 days ago → notified (name must survive intact).
    ('130', 'peer_mentor', 'Robert''); DROP TABLE users;-- "Bobby" 🎉👩‍👩‍👧 O''Brien', NULL, '330 days', NULL),
    -- Terje Halvorsen: deactivated 10 days ago, last activity 60 days ago → ignored (never considered).
    ('131', 'peer_mentor', 'Terje Halvorsen', NULL, '900 days', '10 days'),
    -- Liv Jakobsen: active yesterday → not a candidate. Acknowledged assignment, last year's impact summary.
    ('132', 'peer_mentor', 'Liv Jakobsen',   NULL, '1000 days', NULL),
    -- Henrik Strand: active 6 days ago, an old pause lifted 100 days ago → not a candidate.
    ('133', 'peer_mentor', 'Henrik Strand',  NULL, '550 days', NULL),
    -- Randi Berntsen: last activity 20 days ago, a pause that starts in 3 days (not paused now) → notified.
    ('134', 'peer_mentor', 'Randi Berntsen', NULL, '460 days', NULL),

    -- Organization B: Blindeforbundet (threshold 7 days)
    ('201', 'org_admin',   'Gunnar Rød',     NULL, '2 years',  NULL),
    ('202', 'coordinator', 'Mona Strøm',     NULL, '2 years',  NULL),
    ('203', 'coordinator', 'Arne Vold',      NULL, '1 year',   NULL),
    -- Jonas Bakke: last activity 10 days ago in B (7 days) → notified. Compare Astrid Moen in A.
    ('211', 'peer_mentor', 'Jonas Bakke',    NULL, '300 days', NULL),
    -- Marte Lund: active 2 days ago → not a candidate. Has a withdrawn assignment.
    ('212', 'peer_mentor', 'Marte Lund',     NULL, '400 days', NULL),
    -- Ahmed Hassan: last activity 5 days ago (under 7) → not a candidate.
    ('213', 'peer_mentor', 'Ahmed Hassan',   'en', '120 days', NULL),
    -- Ida Ruud: joined 9 days ago, never logged anything → notified (anchor = joined_at).
    ('214', 'peer_mentor', 'Ida Ruud',       NULL, '9 days',   NULL),
    -- Siri Holm: last activity 30 days ago, paused open-ended → suppressed, paused.
    ('215', 'peer_mentor', 'Siri Holm',      NULL, '500 days', NULL),
    -- Thomas Berge: locale 'en', last activity 40 days ago → notified, English message.
    ('216', 'peer_mentor', 'Thomas Berge',   'en', '600 days', NULL),
    -- Kristin Aas: last activity 12 days ago, reminded 3 days ago (< 7) → suppressed, already notified.
    ('217', 'peer_mentor', 'Kristin Aas',    NULL, '350 days', NULL),
    -- Morten Vik: last activity 16 days ago, reminded 8 days ago (> 7) → notified again.
    ('218', 'peer_mentor', 'Morten Vik',     NULL, '280 days', NULL),
    -- Hanne Foss: deactivated 30 days ago, last activity 45 days ago → ignored (never considered).
    ('219', 'peer_mentor', 'Hanne Foss',     NULL, '700 days', '30 days'),
    -- Even Sand: active today → not a candidate.
    ('220', 'peer_mentor', 'Even Sand',      NULL, '650 days', NULL),

    -- Organization C: Demo Org Off (inactivity scenario disabled)
    ('301', 'org_admin',   'Demo Admin',     NULL, '1 year',   NULL),
    ('302', 'coordinator', 'Demo Koordinator', NULL, '1 year', NULL),
    -- Frida Lunde: last activity 30 days ago → suppressed, organization scenario off.
    ('311', 'peer_mentor', 'Frida Lunde',    NULL, '200 days', NULL),
    -- Jon Tangen: joined 45 days ago, never logged anything → suppressed, organization scenario off.
    ('312', 'peer_mentor', 'Jon Tangen',     NULL, '45 days',  NULL)
  ) AS u (n, role, display_name, locale, joined, deactivated);

-- Each mentor answers to one coordinator of the same organization, alternating in id order.
INSERT INTO coordinator_scopes (organization_id, coordinator_id, mentor_id)
SELECT m.organization_id, c.id, m.id
  FROM (SELECT id, organization_id, row_number() OVER (PARTITION BY organization_id ORDER BY id) AS rn
          FROM users WHERE role = 'peer_mentor') m
  JOIN (SELECT id, organization_id, row_number() OVER (PARTITION BY organization_id ORDER BY id) AS rn,
               count(*) OVER (PARTITION BY organization_id) AS n
          FROM users WHERE role = 'coordinator') c
    ON c.organization_id = m.organization_id AND c.rn = (m.rn - 1) % c.n + 1;

-- Availability pauses ----------------------------------------------------------------------------------

INSERT INTO availability_pauses (mentor_id, starts_at, ends_at, reason, created_at)
SELECT ('00000000-0000-4000-8000-000000000' || p.n)::uuid, p.starts_at, p.ends_at, p.reason, p.starts_at - interval '1 day'
  FROM (VALUES
    ('115', pg_temp.ago('12 days'),  NULL::timestamptz,          'Ferie til 15. mars'),            -- Sigrid: paused now, open-ended
    ('116', pg_temp.ago('10 days'),  pg_temp.from_now('5 days'), 'Sykehusopphold'),                -- Lars: paused now, ends in 5 days
    ('117', pg_temp.ago('55 days'),  pg_temp.ago('3 days'),      'Sykmeldt'),                      -- Marit: lifted 3 days ago
    ('118', pg_temp.ago('60 days'),  pg_temp.ago('20 days'),     'Reise'),                         -- Per: lifted 20 days ago
    ('133', pg_temp.ago('130 days'), pg_temp.ago('100 days'),    'Sommerferie'),                   -- Henrik: old, lifted long ago
    ('134', pg_temp.from_now('3 days'), pg_temp.from_now('17 days'), 'Ferie'),                     -- Randi: starts in 3 days
    ('215', pg_temp.ago('20 days'),  NULL,                       'Permisjon')                      -- Siri: paused now, open-ended
  ) AS p (n, starts_at, ends_at, reason);

-- Activities ---------------------------------------------------------------------------------------------
-- (mentor, logged days ago, kind); the activity happened a few hours before it was logged. The insert
-- trigger sets users.last_activity_logged_at to each mentor's latest logged_at (checked below).

INSERT INTO activities (mentor_id, occurred_at, logged_at, kind)
SELECT ('00000000-0000-4000-8000-000000000' || a.n)::uuid,
       pg_temp.ago(a.days * interval '1 day' + interval '3 hours'),
       pg_temp.ago(a.days * interval '1 day'),
       a.kind
  FROM (VALUES
    ('111', 20, 'conversation'), ('111', 34, 'phone_call'), ('111', 61, 'conversation'),
    ('112', 3, 'conversation'), ('112', 9, 'group_meeting'), ('112', 17, 'phone_call'), ('112', 30, 'conversation'), ('112', 44, 'conversation'),
    ('115', 40, 'conversation'), ('115', 70, 'conversation'),
    ('116', 25, 'phone_call'), ('116', 39, 'conversation'),
    ('117', 60, 'conversation'), ('117', 88, 'conversation'), ('117', 120, 'phone_call'),
    ('118', 70, 'conversation'), ('118', 95, 'conversation'),
    ('119', 10, 'conversation'), ('119', 24, 'phone_call'), ('119', 38, 'conversation'),
    ('120', 30, 'conversation'), ('120', 52, 'conversation'),
    ('121', 30, 'phone_call'), ('121', 47, 'conversation'),
    ('122', 22, 'conversation'), ('122', 40, 'conversation'),
    ('123', 25, 'conversation'), ('123', 31, 'group_meeting'), ('123', 59, 'conversation'),
    ('124', 18, 'conversation'), ('124', 33, 'phone_call'),
    ('125', 16, 'conversation'), ('125', 29, 'conversation'),
    ('126', 20, 'conversation'), ('126', 41, 'conversation'), ('126', 75, 'phone_call'),
    ('127', 31, 'conversation'), ('127', 50, 'conversation'),
    ('128', 21, 'conversation'), ('128', 35, 'phone_call'),
    ('129', 15, 'conversation'), ('129', 28, 'conversation'),
    ('130', 19, 'conversation'), ('130', 26, 'conversation'),
    ('131', 60, 'conversation'), ('131', 90, 'conversation'),
    ('132', 1, 'conversation'), ('132', 4, 'phone_call'), ('132', 8, 'conversation'), ('132', 15, 'group_meeting'), ('132', 22, 'conversation'), ('132', 36, 'conversation'),
    ('133', 6, 'conversation'), ('133', 13, 'phone_call'), ('133', 27, 'conversation'), ('133', 140, 'conversation'),
    ('134', 20, 'conversation'), ('134', 45, 'conversation'),
    ('211', 10, 'conversation'), ('211', 19, 'phone_call'), ('211', 33, 'conversation'),
    ('212', 2, 'conversation'), ('212', 6, 'conversation'), ('212', 13, 'phone_call'), ('212', 21, 'conversation'),
    ('213', 5, 'conversation'), ('213', 12, 'conversation'), ('213', 26, 'group_meeting'),
    ('215', 30, 'conversation'), ('215', 55, 'conversation'),
    ('216', 40, 'conversation'), ('216', 66, 'phone_call'),
    ('217', 12, 'conversation'), ('217', 20, 'conversation'),
    ('218', 16, 'conversation'), ('218', 27, 'conversation'),
    ('219', 45, 'conversation'), ('219', 80, 'conversation'),
    ('220', 0.1, 'conversation'), ('220', 3, 'phone_call'), ('220', 7, 'conversation'), ('220', 11, 'group_meeting'), ('220', 18, 'conversation'),
    ('311', 30, 'conversation'), ('311', 48, 'conversation')
  ) AS a (n, days, kind);

-- Notification settings: no row means everything on. Two mentors have switched something off;
-- Kari and Emma have a row with everything on, which must behave like no row.
INSERT INTO push_notification_configs (user_id, enabled, inactivity, updated_at) VALUES
    ('00000000-0000-4000-8000-000000000120', false, true,  pg_temp.ago('60 days')),   -- Bjørn: master switch off
    ('00000000-0000-4000-8000-000000000121', true,  false, pg_temp.ago('45 days')),   -- Hilde: inactivity category off
    ('00000000-0000-4000-8000-000000000111', true,  true,  pg_temp.ago('100 days')),  -- Kari: explicit all-on
    ('00000000-0000-4000-8000-000000000128', true,  true,  pg_temp.ago('100 days'));  -- Emma: explicit all-on

-- Tone Andersen keeps quiet hours of her own, set so that the demo always runs inside them (from an hour
-- ago to two hours from now, Oslo time): her reminder is in her inbox at once, its push waits.
INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end, updated_at)
SELECT '00000000-0000-4000-8000-000000000123', ((now() AT TIME ZONE 'Europe/Oslo') - interval '1 hour')::time(0),
       ((now() AT TIME ZONE 'Europe/Oslo') + interval '2 hours')::time(0), pg_temp.ago('10 days');

-- Jonas Bakke keeps quiet hours around now as well: his reminders wait for the end of his night. But
-- Blindeforbundet marks new assignments critical: the one Mona dispatches during the demo reaches his
-- phone at once, through the night, time-sensitive.
INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end, updated_at)
SELECT '00000000-0000-4000-8000-000000000211', ((now() AT TIME ZONE 'Europe/Oslo') - interval '1 hour')::time(0),
       ((now() AT TIME ZONE 'Europe/Oslo') + interval '2 hours')::time(0), pg_temp.ago('20 days');
INSERT INTO organization_delivery_policies (organization_id, critical_categories, updated_at)
VALUES ('00000000-0000-4000-8000-000000000002', '{new_assignment}', pg_temp.ago('60 days'));

-- Thomas Berge allows himself two pushes a day: his inactivity reminder and his assignment follow-up take
-- them, and the announcement of his impact summary is in his inbox without a push (capped).
INSERT INTO push_notification_configs (user_id, daily_push_cap, updated_at)
VALUES ('00000000-0000-4000-8000-000000000216', 2, pg_temp.ago('30 days'));

-- Device tokens ------------------------------------------------------------------------------------------
-- (user, provider, apns environment, registered days ago, retired days ago). Staff have devices too.

INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id, created_at, last_seen_at, retired_at, retired_reason)
SELECT ('00000000-0000-4000-8000-000000000' || d.n)::uuid,
       d.provider,
       CASE d.provider WHEN 'apns' THEN pg_temp.apns_token(d.n || ':' || d.seq) ELSE pg_temp.fcm_token(d.n || ':' || d.seq) END,
       d.env, 'no.likeperson.app',
       pg_temp.ago(d.registered * interval '1 day'),
       pg_temp.ago(coalesce(d.retired, least(d.registered, 2)) * interval '1 day'),
       CASE WHEN d.retired IS NOT NULL THEN pg_temp.ago(d.retired * interval '1 day') END,
       CASE WHEN d.retired IS NOT NULL THEN 'Unregistered' END
  FROM (VALUES
    ('101', 1, 'apns', 'production', 300, NULL::int),
    ('102', 1, 'fcm',  NULL,         200, NULL),
    ('202', 1, 'apns', 'production', 250, NULL),
    ('203', 1, 'fcm',  NULL,         180, NULL),
    -- 103 Linda (coordinator): no device, her digest is an inbox row only
    ('111', 1, 'apns', 'production', 390, NULL),
    ('112', 1, 'fcm',  NULL,         480, NULL),
    ('113', 1, 'apns', 'production', 29,  NULL),
    ('114', 1, 'fcm',  NULL,         2,   NULL),
    ('115', 1, 'apns', 'production', 500, NULL),
    ('116', 1, 'fcm',  NULL,         290, NULL),
    ('117', 1, 'apns', 'production', 650, NULL),
    ('118', 1, 'fcm',  NULL,         700, NULL),
    ('119', 1, 'apns', 'production', 240, NULL),
    ('120', 1, 'apns', 'production', 440, NULL),
    ('121', 1, 'fcm',  NULL,         340, NULL),
    -- 122 Eirik: no device
    ('123', 1, 'apns', 'production', 370, NULL),
    ('123', 2, 'fcm',  NULL,         120, NULL),
    ('124', 1, 'apns', 'production', 410, 40),     -- Geir's old iPhone: retired
    ('124', 2, 'fcm',  NULL,         60,  NULL),
    ('125', 1, 'apns', 'sandbox',    140, NULL),   -- Camilla: TestFlight/dev build
    ('126', 1, 'apns', 'production', 510, NULL),
    ('127', 1, 'fcm',  NULL,         600, NULL),
    ('128', 1, 'apns', 'production', 170, NULL),
    ('129', 1, 'fcm',  NULL,         230, NULL),
    ('130', 1, 'apns', 'production', 320, NULL),
    ('131', 1, 'fcm',  NULL,         880, NULL),
    ('132', 1, 'apns', 'production', 990, NULL),
    ('133', 1, 'fcm',  NULL,         540, NULL),
    ('134', 1, 'apns', 'production', 450, NULL),
    ('211', 1, 'apns', 'production', 290, NULL),
    ('212', 1, 'fcm',  NULL,         390, NULL),
    ('213', 1, 'apns', 'production', 110, NULL),
    ('214', 1, 'fcm',  NULL,         8,   NULL),
    ('215', 1, 'apns', 'production', 490, NULL),
    ('216', 1, 'fcm',  NULL,         590, NULL),
    ('217', 1, 'apns', 'production', 340, NULL),
    ('218', 1, 'fcm',  NULL,         270, NULL),
    ('219', 1, 'apns', 'production', 690, NULL),
    ('220', 1, 'apns', 'production', 640, NULL),
    ('311', 1, 'fcm',  NULL,         190, NULL),
    ('312', 1, 'apns', 'production', 44,  NULL)
  ) AS d (n, seq, provider, env, registered, retired);

-- Earlier inactivity reminders ----------------------------------------------------------------------------
-- dedupe_key = 'inactivity:<user uuid>:<stretch start as unix epoch seconds>', the anchor the job used.
-- (user, last activity days ago = the stretch start, reminded days ago, read days ago)

INSERT INTO notifications (user_id, category, title, body, data, created_at, read_at, dedupe_key)
SELECT u.id, 'inactivity',
       CASE WHEN coalesce(u.locale, o.default_locale) = 'en' THEN 'We miss you' ELSE 'Vi savner deg' END,
       CASE WHEN coalesce(u.locale, o.default_locale) = 'en'
            THEN format('It has been %s days since you last logged an activity. Log your conversations in the app!', r.anchor_days - r.reminded_days)
            ELSE format('Det er %s dager siden du sist registrerte en aktivitet. Husk å logge samtalene dine i appen!', r.anchor_days - r.reminded_days) END,
       jsonb_build_object('scenario', 'inactivity', 'days_inactive', r.anchor_days - r.reminded_days,
                          'anchor', pg_temp.ago(r.anchor_days * interval '1 day')),
       pg_temp.ago(r.reminded_days * interval '1 day'),
       CASE WHEN r.read_days IS NOT NULL THEN pg_temp.ago(r.read_days * interval '1 day') END,
       format('inactivity:%s:%s', u.id, extract(epoch FROM pg_temp.ago(r.anchor_days * interval '1 day'))::bigint)
  FROM (VALUES
    ('126', 20, 5,  NULL::int),   -- Knut: reminded 5 days ago → suppressed now
    ('127', 31, 16, 15),          -- Anne: reminded 16 days ago, read it, still inactive → notified again
    ('217', 12, 3,  NULL),        -- Kristin (B): reminded 3 days ago → suppressed now
    ('218', 16, 8,  7)            -- Morten (B): reminded 8 days ago → notified again
  ) AS r (n, anchor_days, reminded_days, read_days)
  JOIN users u ON u.id = ('00000000-0000-4000-8000-000000000' || r.n)::uuid
  JOIN organizations o ON o.id = u.organization_id;

-- Assignments ------------------------------------------------------------------------------------------------
-- assignment-follow-up reminds a mentor once per active, unacknowledged assignment dispatched follow_up_days
-- ago or more (A: 10, the default; B: 7). overdue-digest tells each coordinator, once a day from 08:00
-- local time, about the active assignments of their mentors unacknowledged for 10 days or more (A: Svein
-- has 111, 113, 115 … in scope, Linda 112, 114, 116 …; B: Mona 211, 213 …, Arne 212, 214, 216 …).

INSERT INTO assignments (id, organization_id, mentor_id, coordinator_id, title, dispatched_at, state, state_changed_at)
SELECT a.id::uuid, s.organization_id, s.mentor_id, s.coordinator_id, a.title,
       pg_temp.ago(a.dispatched::interval), a.state, pg_temp.ago(a.changed::interval)
  FROM (VALUES
    -- Ola (A): active, 12 days, unread → reminded. In Linda's digest.
    ('00000000-0000-4000-8000-000000000a01', '112', 'Ring ny deltaker etter hjerteoperasjon', '12 days', 'active',    '12 days'),
    -- Liv (A): active, acknowledged the next day → nothing.
    ('00000000-0000-4000-8000-000000000a02', '132', 'Likepersonsamtale på Ullevål',          '8 days',  'active',    '8 days'),
    -- Marte (B): withdrawn by the coordinator → nothing.
    ('00000000-0000-4000-8000-000000000a03', '212', 'Følge til synssentralen',              '15 days', 'withdrawn', '9 days'),
    -- Emma (A, English): active, 11 days, unread → reminded in English. In Linda's digest.
    ('00000000-0000-4000-8000-000000000a04', '128', 'Call a new member after surgery',      '11 days', 'active',    '11 days'),
    -- Sigrid (A): active, 14 days, unread, but paused now → suppressed, paused (reminded after the pause). In Svein's digest.
    ('00000000-0000-4000-8000-000000000a05', '115', 'Besøk på Glittreklinikken',            '14 days', 'active',    '14 days'),
    -- Lars (A): active, 12 days, unread, paused until 5 days from now → suppressed, paused. In Linda's digest.
    ('00000000-0000-4000-8000-000000000a06', '116', 'Samtale med pårørende',                '12 days', 'active',    '12 days'),
    -- Kari (A): active, 5 days, unread → too recent (A: 10 days).
    ('00000000-0000-4000-8000-000000000a07', '111', 'Gruppemøte i Bergen',                  '5 days',  'active',    '5 days'),
    -- Astrid (A): active, 8 days, unread → too recent in A. Compare Jonas in B.
    ('00000000-0000-4000-8000-000000000a08', '119', 'Telefonsamtale med ny deltaker',       '8 days',  'active',    '8 days'),
    -- Jonas (B): active, 8 days, unread → reminded (B: 7 days). Not yet overdue for the digest (10 days).
    ('00000000-0000-4000-8000-000000000a09', '211', 'Ledsager til lesesirkel',              '8 days',  'active',    '8 days'),
    -- Knut (A): active, 30 days, unread, reminded 20 days ago → not reminded again. In Linda's digest.
    ('00000000-0000-4000-8000-000000000a10', '126', 'Oppfølging etter rehabilitering',      '30 days', 'active',    '30 days'),
    -- Terje (A): active, 20 days, unread, but he left 10 days ago → no reminder; still in Svein's digest (nobody has it).
    ('00000000-0000-4000-8000-000000000a11', '131', 'Likepersonsamtale på Haukeland',       '20 days', 'active',    '20 days'),
    -- Anne (A): completed 3 days ago without a read receipt → nothing.
    ('00000000-0000-4000-8000-000000000a12', '127', 'Samtale om arbeidsliv',                '20 days', 'completed', '3 days'),
    -- Thomas (B, English): active, 15 days, unread → reminded in English; the one case in Arne's digest.
    ('00000000-0000-4000-8000-000000000a13', '216', 'Guide at the eye clinic',              '15 days', 'active',    '15 days')
  ) AS a (id, n, title, dispatched, state, changed)
  JOIN coordinator_scopes s ON s.mentor_id = ('00000000-0000-4000-8000-000000000' || a.n)::uuid;

INSERT INTO assignment_read_receipts (assignment_id, acknowledged_at) VALUES
    ('00000000-0000-4000-8000-000000000a02', pg_temp.ago('7 days'));

-- Knut's follow-up went out 20 days ago.
INSERT INTO notifications (user_id, category, title, body, data, created_at, dedupe_key, subject)
VALUES ('00000000-0000-4000-8000-000000000126', 'assignment_follow_up', 'Et oppdrag venter på deg',
        'Hei Knut Eriksen! Du fikk oppdraget «Oppfølging etter rehabilitering» for 10 dager siden. Trykk her for å se det og bekrefte at du har lest det.',
        '{"category": "assignment_follow_up", "route": "/assignments/00000000-0000-4000-8000-000000000a10", "assignment_id": "00000000-0000-4000-8000-000000000a10"}',
        pg_temp.ago('20 days'), 'assignment_follow_up:00000000-0000-4000-8000-000000000a10', 'assignment:00000000-0000-4000-8000-000000000a10');

-- Impact summaries ---------------------------------------------------------------------------------------------
-- impact-summary tells a mentor once per (mentor, year) that a summary computed in the last max_age_days
-- (30) is ready. (mentor, computed days ago, first computed days ago when recomputed and announced then)

INSERT INTO impact_summaries (mentor_id, year, computed_at)
SELECT ('00000000-0000-4000-8000-000000000' || s.n)::uuid, extract(year FROM now())::int - 1, pg_temp.ago(s.computed::interval)
  FROM (VALUES
    ('132', '20 days'),   -- Liv: → announced
    ('123', '3 days'),    -- Tone: → announced
    ('216', '5 days'),    -- Thomas (B, English): → announced in English
    ('115', '10 days'),   -- Sigrid: paused, but a summary asks nothing of her → announced
    ('120', '10 days'),   -- Bjørn: master switch off → suppressed, push disabled
    ('118', '40 days'),   -- Per: computed 40 days ago → too old to announce out of the blue
    ('111', '2 days'),    -- Kari: recomputed 2 days ago, announced 25 days ago → not again
    ('131', '10 days')    -- Terje: left 10 days ago → ignored
  ) AS s (n, computed);

INSERT INTO notifications (user_id, category, title, body, data, created_at, read_at, dedupe_key, subject)
SELECT u.id, 'impact_summary', 'Året ditt som likeperson',
       format('Hei %s! Oppsummeringen av det du har bidratt med i %s er klar. Trykk her for å se den.', u.display_name, y.year),
       jsonb_build_object('category', 'impact_summary', 'route', '/impact/' || y.year, 'year', y.year),
       pg_temp.ago('25 days'), pg_temp.ago('24 days'), format('impact_summary:%s:%s', u.id, y.year), 'year:' || y.year
  FROM users u CROSS JOIN (SELECT extract(year FROM now())::int - 1 AS year) y
 WHERE u.id = '00000000-0000-4000-8000-000000000111';

-- The earlier notifications' pushes went out at the time: one sent delivery per device that was active then.
INSERT INTO deliveries (notification_id, device_token_id, state, attempts, provider_message_id, created_at, updated_at)
SELECT n.id, t.id, 'sent', 1,
       CASE t.provider WHEN 'apns' THEN upper(md5(n.id::text)::uuid::text)
                       ELSE 'projects/likeperson-app/messages/0:' || left(md5(n.id::text), 16) END,
       n.created_at, n.created_at + interval '2 seconds'
  FROM notifications n
  JOIN device_tokens t ON t.user_id = n.user_id AND t.created_at <= n.created_at
                      AND (t.retired_at IS NULL OR t.retired_at > n.created_at);

-- The trigger-maintained column must equal each user's latest logged_at (NULL: never logged anything).
DO $$
DECLARE bad integer;
BEGIN
    SELECT count(*) INTO bad
      FROM users u
     WHERE u.last_activity_logged_at IS DISTINCT FROM (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id);
    IF bad > 0 THEN
        RAISE EXCEPTION 'demo seed: users.last_activity_logged_at is wrong for % users', bad;
    END IF;
END $$;

COMMIT;

-- Sanity query: each mentor's expected inactivity-check outcome, derived from the rule above.
--
-- WITH rule AS (
--     SELECT o.id AS organization_id, coalesce(r.enabled, d.enabled) AS enabled,
--            (d.settings || coalesce(r.settings, '{}'))->>'threshold_days' AS threshold_days
--       FROM organizations o
--       CROSS JOIN scenario_defaults d
--       LEFT JOIN organization_scenario_rules r ON r.organization_id = o.id AND r.scenario = d.scenario
--      WHERE d.scenario = 'inactivity'),
-- m AS (
--     SELECT u.*, rule.enabled AS scenario_on, make_interval(days => rule.threshold_days::int) AS threshold,
--            greatest(coalesce(u.last_activity_logged_at, u.joined_at),
--                     (SELECT max(p.ends_at) FROM availability_pauses p WHERE p.mentor_id = u.id AND p.ends_at <= now())) AS stretch_start,
--            EXISTS (SELECT FROM availability_pauses p WHERE p.mentor_id = u.id AND p.starts_at <= now()
--                                                        AND (p.ends_at IS NULL OR p.ends_at > now())) AS paused,
--            (SELECT count(*) FROM device_tokens t WHERE t.user_id = u.id AND t.retired_at IS NULL) AS devices
--       FROM users u JOIN rule USING (organization_id)
--      WHERE u.role = 'peer_mentor')
-- SELECT o.name AS organization, m.display_name, m.last_activity_logged_at::date AS last_activity,
--        m.paused, date_part('day', now() - m.stretch_start)::int AS quiet_days,
--        CASE WHEN m.deactivated_at IS NOT NULL THEN 'ignored (deactivated)'
--             WHEN now() - m.stretch_start < m.threshold THEN 'not a candidate'
--             WHEN NOT m.scenario_on THEN 'suppressed: organization scenario off'
--             WHEN m.paused THEN 'suppressed: paused'
--             WHEN c.enabled = false THEN 'suppressed: push disabled'
--             WHEN c.inactivity = false THEN 'suppressed: category disabled'
--             WHEN EXISTS (SELECT FROM notifications n WHERE n.user_id = m.id AND n.category = 'inactivity'
--                            AND n.created_at > m.stretch_start AND n.created_at > now() - m.threshold)
--                  THEN 'suppressed: already notified'
--             ELSE format('notified (%s deliveries)', m.devices) END AS state
--   FROM m JOIN organizations o ON o.id = m.organization_id
--   LEFT JOIN push_notification_configs c ON c.user_id = m.id
--  ORDER BY m.id;
