-- 0011: critical categories. Categories an organization marks critical (new assignments, say) cannot be
-- switched off by a user's category switch (the master switch still rules), go through quiet hours, and
-- are pushed with the platforms' time-sensitive presentation (APNs interruption-level time-sensitive,
-- Android high priority on the category's "<category>_critical" channel). The notification keeps the
-- mark, so push-deliver presents a retry the same way.
ALTER TABLE organization_delivery_policies ADD COLUMN critical_categories text[] NOT NULL DEFAULT '{}';
ALTER TABLE notifications ADD COLUMN critical boolean NOT NULL DEFAULT false;
