-- 0022: an event whose own row cannot be processed is set aside with the error.
--
-- A row the scenarios cannot read (a subject_id that is no id, a payload value out of range: SQLSTATE 22P02,
-- 22003, 22007, 22008) failed its whole batch, and being the oldest pending event it was
-- taken again first every time: one bad row stopped event-notify for every organization. event-notify now
-- takes such a batch one event at a time, and marks the one at fault processed with the error here.

ALTER TABLE events ADD COLUMN error text;
