-- 0014: the badge counts a user's unread rows listed in the inbox (push-only notifications, migration
-- 0012, are not listed), so the index the count reads carries that condition too: the count stays an
-- index-only lookup instead of visiting each unread row to check in_inbox.
DROP INDEX IF EXISTS notifications_unread_idx;
CREATE INDEX notifications_unread_idx ON notifications (user_id) WHERE read_at IS NULL AND deleted_at IS NULL AND in_inbox;
