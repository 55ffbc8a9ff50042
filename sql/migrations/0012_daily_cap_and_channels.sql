-- 0012: a daily cap of non-critical pushes across scenarios, with scenario priorities, and channels per
-- category (push and inbox, inbox only, push only) with their presentation in one table.

-- Each scenario's priority when pushes compete for a user's last slots of the day: 1 comes first. An
-- organization may reorder with its own value in organization_scenario_rules.
ALTER TABLE scenario_defaults ADD COLUMN priority integer NOT NULL DEFAULT 50 CHECK (priority BETWEEN 1 AND 100);
UPDATE scenario_defaults SET priority = CASE scenario
    WHEN 'new_assignment'       THEN 10
    WHEN 'assignment_follow_up' THEN 20
    WHEN 'overdue_digest'       THEN 30
    WHEN 'availability_change'  THEN 40
    WHEN 'inactivity'           THEN 50
    WHEN 'activity_reminder'    THEN 60
    WHEN 'honorarium'           THEN 70
    WHEN 'milestone'            THEN 80
    WHEN 'impact_summary'       THEN 90
    ELSE 50 END;
ALTER TABLE organization_scenario_rules ADD COLUMN priority integer CHECK (priority BETWEEN 1 AND 100);

-- At most this many non-critical pushes per user per local day (NULL: no cap). A user may lower the
-- organization's cap (or set one where it has none), never raise it: the lower of the two applies.
ALTER TABLE organization_delivery_policies ADD COLUMN daily_push_cap integer CHECK (daily_push_cap BETWEEN 1 AND 100);
ALTER TABLE push_notification_configs ADD COLUMN daily_push_cap integer CHECK (daily_push_cap BETWEEN 0 AND 100);

-- One row per non-critical notification that took one of its user's daily slots: the local day is that
-- of the moment the push may go (a push deferred past midnight counts on the next day). A higher-priority
-- push over the cap takes the slot of a lower-priority one whose push has not gone out yet (that one's
-- pushes are cancelled and it stays in the inbox). The recorder holds a transaction-scoped advisory lock
-- per user and day while it counts, so concurrent jobs never overshoot.
CREATE TABLE daily_push_slots (
    notification_id  uuid PRIMARY KEY REFERENCES notifications (id) ON DELETE CASCADE,
    user_id          uuid NOT NULL,
    local_day        date NOT NULL,
    priority         integer NOT NULL,
    scenario         text NOT NULL
);
CREATE INDEX daily_push_slots_user_day_idx ON daily_push_slots (user_id, local_day);

-- The categories, each with its channels by default and its presentation on the phone: the Android
-- notification channel (a critical notification uses "<channel>_critical"), the sound and the APNs
-- thread. A new category is a row here (and a switch in push_notification_configs).
CREATE TABLE notification_categories (
    category            text PRIMARY KEY,
    channels            text NOT NULL DEFAULT 'push_and_inbox' CHECK (channels IN ('push_and_inbox', 'inbox_only', 'push_only')),
    android_channel_id  text NOT NULL CHECK (android_channel_id ~ '^[a-z0-9_]{1,40}$'),
    sound               text NOT NULL CHECK (sound ~ '^[A-Za-z0-9_.-]{1,64}$'),
    apns_thread_id      text NOT NULL CHECK (apns_thread_id ~ '^[A-Za-z0-9_.-]{1,64}$')
);
INSERT INTO notification_categories (category, android_channel_id, sound, apns_thread_id) VALUES
    ('inactivity',           'inactivity',           'default',         'inactivity'),
    ('assignment_follow_up', 'assignments',          'default',         'assignments'),
    ('new_assignment',       'assignments',          'default',         'assignments'),
    ('overdue_digest',       'coordinator_digest',   'default',         'coordinator'),
    ('availability_change',  'coordinator_updates',  'default',         'coordinator'),
    ('activity_reminder',    'reminders',            'default',         'reminders'),
    ('milestone',            'celebrations',         'celebration.caf', 'celebrations'),
    ('honorarium',           'celebrations',         'celebration.caf', 'celebrations'),
    ('impact_summary',       'celebrations',         'celebration.caf', 'celebrations');

-- An organization's channels for a category (no row: the category's default).
CREATE TABLE organization_category_channels (
    organization_id  uuid NOT NULL REFERENCES organizations (id),
    category         text NOT NULL REFERENCES notification_categories (category),
    channels         text NOT NULL CHECK (channels IN ('push_and_inbox', 'inbox_only', 'push_only')),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, category)
);

-- A user's narrowing of a category's channels: the channels that apply are those both allow.
CREATE TABLE user_category_channels (
    user_id     uuid NOT NULL REFERENCES users (id),
    category    text NOT NULL REFERENCES notification_categories (category),
    channels    text NOT NULL CHECK (channels IN ('push_and_inbox', 'inbox_only', 'push_only')),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, category)
);

-- A push-only notification is stored (for its deliveries, its dedupe key and the audit) but is not
-- listed in the inbox: the app lists rows WHERE in_inbox.
ALTER TABLE notifications ADD COLUMN in_inbox boolean NOT NULL DEFAULT true;
