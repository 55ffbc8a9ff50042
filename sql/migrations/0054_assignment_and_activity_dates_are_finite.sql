-- 0054: an assignment's dispatched_at and mentor_assigned_at, and an activity's occurred_at, are real times, not
-- infinity (as 0047 for a user's dates).
--
-- An assignment dispatched at '-infinity' was followed up "739949 days ago" (the mentor's phone said so), and the
-- overdue digest's detail named the same age. One handed over at 'infinity' was never followed up, without a word.
-- An activity at 'infinity' in a history load passed the milestone scenario's age check ("not older than 14 days")
-- and announced a milestone the load should not. Now such a value is refused when written; rows written before
-- are not refused by this upgrade (a trigger on the values written, not a CHECK, so that a write to the row's
-- other columns still succeeds): assignment-follow-up skips one dispatched at -infinity with the decision
-- invalid_data naming the assignment and the column, and exits 65; one handed over at -infinity is followed up
-- from its dispatch (its key named the hand-over as a number: infinity stopped the whole job, exit 70).

CREATE FUNCTION assignments_dates_finite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'INSERT' OR NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at) AND NOT isfinite(NEW.dispatched_at)
       OR (TG_OP = 'INSERT' OR NEW.mentor_assigned_at IS DISTINCT FROM OLD.mentor_assigned_at)
          AND NOT coalesce(isfinite(NEW.mentor_assigned_at), true) THEN
        RAISE EXCEPTION 'assignment %: dispatched_at and mentor_assigned_at must be times, not infinity (dispatched_at %, mentor_assigned_at %)',
                        NEW.id, NEW.dispatched_at, NEW.mentor_assigned_at
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER assignments_dates_finite BEFORE INSERT OR UPDATE OF dispatched_at, mentor_assigned_at ON assignments
    FOR EACH ROW EXECUTE FUNCTION assignments_dates_finite();

CREATE FUNCTION activities_date_finite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only a value being written: a row written before keeps its other columns writable, whole-row writes included.
    IF (TG_OP = 'INSERT' OR NEW.occurred_at IS DISTINCT FROM OLD.occurred_at) AND NOT isfinite(NEW.occurred_at) THEN
        RAISE EXCEPTION 'activity %: occurred_at must be a time, not infinity (%)', NEW.id, NEW.occurred_at
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER activities_date_finite BEFORE INSERT OR UPDATE OF occurred_at ON activities
    FOR EACH ROW EXECUTE FUNCTION activities_date_finite();
