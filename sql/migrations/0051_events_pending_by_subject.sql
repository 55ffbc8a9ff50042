-- 0051: a subject's pending events, for the batches that decide a pause's events together.
--
-- A batch of event-notify that claimed an event of a pause takes the pause's other pending events too, and
-- decides the pause only when it holds all of them (SubjectOrder): a pause changed while its start was being
-- decided had two notices naming the same dates, and with two processes the new dates could reach nobody
-- (suspects review, stop 31). Those reads look up the pending events of a few subjects; the partial index
-- holds only pending rows with a subject, so it stays small however long the table grows.

CREATE INDEX events_pending_subject_idx ON events (subject_id, id) WHERE processed_at IS NULL AND subject_id IS NOT NULL;
