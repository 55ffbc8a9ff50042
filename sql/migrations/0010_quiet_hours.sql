-- 0010: quiet hours. An organization may set a default window (e.g. 22:00–07:00) and a user may set
-- their own; both are local wall-clock times in the user's time zone (else the organization's). A push
-- decided inside the window is stored in the inbox at once and its delivery waits until the window
-- ends (QuietHours in Sources/ScenarioEngine/QuietHours.swift).

-- Per-organization delivery policies (quiet hours now; caps and channels to come).
CREATE TABLE organization_delivery_policies (
    organization_id    uuid PRIMARY KEY REFERENCES organizations (id),
    quiet_hours_start  time,
    quiet_hours_end    time,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((quiet_hours_start IS NULL) = (quiet_hours_end IS NULL)),
    CHECK (quiet_hours_start IS NULL OR quiet_hours_start <> quiet_hours_end)
);

-- A user's own window (both NULL: the organization's).
ALTER TABLE push_notification_configs
    ADD COLUMN quiet_hours_start time,
    ADD COLUMN quiet_hours_end time,
    ADD CONSTRAINT push_notification_configs_quiet_hours_check
        CHECK ((quiet_hours_start IS NULL) = (quiet_hours_end IS NULL) AND (quiet_hours_start IS NULL OR quiet_hours_start <> quiet_hours_end));
