-- 0001: the domain of the peer-mentor app, the in-app inbox, the push outbox and the run history.
--
-- Applied by the `migrate` command, which records it in schema_migrations. Never edit a migration
-- that has been applied anywhere: add the next number instead (migrate refuses a changed checksum).

-- Organizations: each has its own time zone, default locale and scenario rules.
CREATE TABLE organizations (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name            text NOT NULL,
    time_zone       text NOT NULL DEFAULT 'Europe/Oslo',
    default_locale  text NOT NULL DEFAULT 'nb',
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Users of the app. last_activity_logged_at is maintained by the triggers on activities below, so the
-- inactivity query reads one indexed column instead of aggregating every mentor's activity history.
CREATE TABLE users (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id          uuid NOT NULL REFERENCES organizations (id),
    role                     text NOT NULL CHECK (role IN ('peer_mentor', 'coordinator', 'org_admin')),
    display_name             text NOT NULL,
    locale                   text,            -- NULL: the organization's default
    time_zone                text,            -- NULL: the organization's
    joined_at                timestamptz NOT NULL DEFAULT now(),
    deactivated_at           timestamptz,     -- left the organization: no scenario considers them
    last_activity_logged_at  timestamptz,     -- maintained by trigger; NULL: never logged anything
    UNIQUE (id, organization_id)              -- lets child tables prove two users share an organization
);
CREATE INDEX users_organization_role_idx ON users (organization_id, role) WHERE deactivated_at IS NULL;
-- Drives inactivity-check: per organization, a range scan over the mentors quiet since before the threshold.
CREATE INDEX users_inactivity_idx ON users (organization_id, (coalesce(last_activity_logged_at, joined_at)))
    WHERE role = 'peer_mentor' AND deactivated_at IS NULL;

-- Which coordinators answer for which peer mentors. The composite keys make a cross-organization
-- scope impossible to store: organization scope is a security boundary.
CREATE TABLE coordinator_scopes (
    organization_id  uuid NOT NULL,
    coordinator_id   uuid NOT NULL,
    mentor_id        uuid NOT NULL,
    PRIMARY KEY (coordinator_id, mentor_id),
    FOREIGN KEY (coordinator_id, organization_id) REFERENCES users (id, organization_id),
    FOREIGN KEY (mentor_id, organization_id) REFERENCES users (id, organization_id)
);
CREATE INDEX coordinator_scopes_mentor_idx ON coordinator_scopes (mentor_id);

-- A peer mentor's availability pauses. ends_at NULL: paused until further notice.
CREATE TABLE availability_pauses (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mentor_id   uuid NOT NULL REFERENCES users (id),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz CHECK (ends_at IS NULL OR ends_at > starts_at),
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX availability_pauses_mentor_idx ON availability_pauses (mentor_id, starts_at);

-- Activities a peer mentor logged: when it happened, and when it was logged in the app.
CREATE TABLE activities (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mentor_id    uuid NOT NULL REFERENCES users (id),
    occurred_at  timestamptz NOT NULL,
    logged_at    timestamptz NOT NULL DEFAULT now(),
    kind         text NOT NULL DEFAULT 'conversation'
);
CREATE INDEX activities_mentor_logged_idx ON activities (mentor_id, logged_at);

-- Statement-level triggers with transition tables: a bulk load of millions of activities costs one
-- UPDATE per statement, not one per row.
CREATE FUNCTION activities_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users u SET last_activity_logged_at = n.latest
      FROM (SELECT mentor_id, max(logged_at) AS latest FROM new_rows GROUP BY mentor_id) n
     WHERE u.id = n.mentor_id
       AND (u.last_activity_logged_at IS NULL OR u.last_activity_logged_at < n.latest);
    RETURN NULL;
END $$;

CREATE FUNCTION activities_after_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users u SET last_activity_logged_at =
           (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id)
     WHERE u.id IN (SELECT mentor_id FROM old_rows);
    IF TG_OP = 'UPDATE' THEN
        UPDATE users u SET last_activity_logged_at =
               (SELECT max(a.logged_at) FROM activities a WHERE a.mentor_id = u.id)
         WHERE u.id IN (SELECT mentor_id FROM new_rows);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER activities_insert AFTER INSERT ON activities
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION activities_after_insert();
CREATE TRIGGER activities_update AFTER UPDATE ON activities
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION activities_after_change();
CREATE TRIGGER activities_delete AFTER DELETE ON activities
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION activities_after_change();

-- Assignments a coordinator dispatches to a peer mentor, and the mentor's read receipt.
CREATE TABLE assignments (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    organization_id  uuid NOT NULL,
    mentor_id        uuid NOT NULL,
    coordinator_id   uuid NOT NULL,
    title            text NOT NULL,
    dispatched_at    timestamptz NOT NULL DEFAULT now(),
    state            text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'withdrawn', 'completed')),
    state_changed_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (mentor_id, organization_id) REFERENCES users (id, organization_id),
    FOREIGN KEY (coordinator_id, organization_id) REFERENCES users (id, organization_id)
);
CREATE INDEX assignments_active_dispatched_idx ON assignments (organization_id, dispatched_at) WHERE state = 'active';
CREATE INDEX assignments_mentor_idx ON assignments (mentor_id, dispatched_at);

CREATE TABLE assignment_read_receipts (
    assignment_id    uuid PRIMARY KEY REFERENCES assignments (id),
    acknowledged_at  timestamptz NOT NULL DEFAULT now()
);

-- Annual impact summaries, computed once per mentor and year.
CREATE TABLE impact_summaries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mentor_id    uuid NOT NULL REFERENCES users (id),
    year         integer NOT NULL CHECK (year BETWEEN 2000 AND 2200),
    computed_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (mentor_id, year)
);
CREATE INDEX impact_summaries_computed_idx ON impact_summaries (computed_at);

-- Scenario rules. scenario_defaults holds each scenario's defaults; an organization overrides them
-- with a row of its own (enabled NULL: the default; settings: only the keys it changes). An
-- administrator changes a threshold with an UPDATE or INSERT here, no release needed.
CREATE TABLE scenario_defaults (
    scenario  text PRIMARY KEY,
    enabled   boolean NOT NULL DEFAULT true,
    settings  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object')
);
INSERT INTO scenario_defaults (scenario, enabled, settings) VALUES
    ('inactivity',           true,  '{"threshold_days": 14}'),
    ('assignment_follow_up', true,  '{"follow_up_days": 10}'),
    ('overdue_digest',       true,  '{"overdue_days": 10}'),
    ('milestone',            true,  '{"milestones": [25, 50, 100]}'),
    ('honorarium',           false, '{"assignment_count": 3}'),
    ('impact_summary',       true,  '{}'),
    ('availability_change',  true,  '{}'),
    ('new_assignment',       true,  '{}'),
    ('activity_reminder',    true,  '{}');

CREATE TABLE organization_scenario_rules (
    organization_id  uuid NOT NULL REFERENCES organizations (id),
    scenario         text NOT NULL REFERENCES scenario_defaults (scenario),
    enabled          boolean,
    settings         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object'),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, scenario)
);

-- The app's per-user notification settings: a master switch and one switch per category.
-- No row: everything on.
CREATE TABLE push_notification_configs (
    user_id               uuid PRIMARY KEY REFERENCES users (id),
    enabled               boolean NOT NULL DEFAULT true,
    inactivity            boolean NOT NULL DEFAULT true,
    assignment_follow_up  boolean NOT NULL DEFAULT true,
    overdue_digest        boolean NOT NULL DEFAULT true,
    milestone             boolean NOT NULL DEFAULT true,
    honorarium            boolean NOT NULL DEFAULT true,
    impact_summary        boolean NOT NULL DEFAULT true,
    availability_change   boolean NOT NULL DEFAULT true,
    new_assignment        boolean NOT NULL DEFAULT true,
    activity_reminder     boolean NOT NULL DEFAULT true,
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- Device tokens the app registered. A retired token is never sent to again.
CREATE TABLE device_tokens (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id           uuid NOT NULL REFERENCES users (id),
    provider          text NOT NULL CHECK (provider IN ('apns', 'fcm', 'webpush', 'expo')),
    token             text NOT NULL CHECK (length(token) BETWEEN 1 AND 4096),
    apns_environment  text CHECK (apns_environment IN ('production', 'sandbox')),
    app_id            text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now(),
    retired_at        timestamptz,
    retired_reason    text,
    UNIQUE (provider, token),
    CHECK (provider <> 'apns' OR apns_environment IS NOT NULL)
);
CREATE INDEX device_tokens_user_active_idx ON device_tokens (user_id) WHERE retired_at IS NULL;

-- The in-app inbox. dedupe_key names the scenario, the subject and the period: the same
-- notification can never be stored twice, however many runs race.
CREATE TABLE notifications (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id          uuid NOT NULL REFERENCES users (id),
    category         text NOT NULL,
    title            text NOT NULL,
    body             text NOT NULL,
    data             jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    read_at          timestamptz,
    deleted_at       timestamptz,
    expires_at       timestamptz,
    dedupe_key       text NOT NULL UNIQUE,
    job_run_id       bigint
);
CREATE INDEX notifications_user_created_idx ON notifications (user_id, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX notifications_user_category_idx ON notifications (user_id, category, created_at);
CREATE INDEX notifications_unread_idx ON notifications (user_id) WHERE read_at IS NULL AND deleted_at IS NULL;

-- The outbox: one delivery per notification and device token.
CREATE TABLE deliveries (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id      uuid NOT NULL REFERENCES notifications (id),
    device_token_id      bigint NOT NULL REFERENCES device_tokens (id),
    state                text NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'sent', 'retrying', 'failed', 'dead', 'expired')),
    attempts             integer NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    last_error           text,
    provider_message_id  text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (notification_id, device_token_id)
);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE state IN ('pending', 'retrying');
CREATE INDEX deliveries_token_idx ON deliveries (device_token_id);

-- One row per job run (dry runs write nothing, so they leave none).
CREATE TABLE job_runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job          text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    as_of        timestamptz NOT NULL,
    dry_run      boolean NOT NULL DEFAULT false,
    outcome      text NOT NULL DEFAULT 'running'
                 CHECK (outcome IN ('running', 'ok', 'partial', 'failed', 'skipped')),
    counts       jsonb NOT NULL DEFAULT '{}',
    error        text,
    host         text,
    pid          integer
);
CREATE INDEX job_runs_job_started_idx ON job_runs (job, started_at DESC);
ALTER TABLE notifications ADD FOREIGN KEY (job_run_id) REFERENCES job_runs (id);

-- Every candidate a job considered, notified or suppressed with the reason:
-- "why didn't she get it?" is one query.
CREATE TABLE decisions (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_run_id       bigint NOT NULL REFERENCES job_runs (id),
    scenario         text NOT NULL,
    user_id          uuid NOT NULL REFERENCES users (id),
    outcome          text NOT NULL CHECK (outcome IN ('notified', 'suppressed')),
    reason           text NOT NULL,
    detail           text,
    notification_id  uuid REFERENCES notifications (id),
    dedupe_key       text,
    decided_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX decisions_user_idx ON decisions (user_id, decided_at DESC);
CREATE INDEX decisions_run_idx ON decisions (job_run_id);
