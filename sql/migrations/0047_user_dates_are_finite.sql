-- 0047: a user's joined_at and last_activity_logged_at are real times, not infinity.
--
-- A user row with joined_at (or last_activity_logged_at) of '-infinity' stopped inactivity-check for every
-- organization (PostgreSQL: 0A000 cannot convert infinity to bigint, exit 70: nobody was reminded), and so did
-- rules --dry-run. No count of days means anything from it. Now a row written with either set to infinity or
-- -infinity is refused; rows written before are not refused by this upgrade (a trigger on the values written,
-- not a CHECK, so that a write to the row's other columns, or an activity logged for it, still succeeds):
-- inactivity-check skips them with the decision invalid_data naming the column, and exits 65.

CREATE FUNCTION users_dates_finite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only a value being written: an activity logged for a user whose old row has joined_at -infinity still
    -- moves last_activity_logged_at (activities_after_insert).
    IF (TG_OP = 'INSERT' OR NEW.joined_at IS DISTINCT FROM OLD.joined_at) AND NOT isfinite(NEW.joined_at)
       OR (TG_OP = 'INSERT' OR NEW.last_activity_logged_at IS DISTINCT FROM OLD.last_activity_logged_at)
          AND NOT coalesce(isfinite(NEW.last_activity_logged_at), true) THEN
        RAISE EXCEPTION 'user %: joined_at and last_activity_logged_at must be times, not infinity (joined_at %, last_activity_logged_at %)',
                        NEW.id, NEW.joined_at, NEW.last_activity_logged_at
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER users_dates_finite BEFORE INSERT OR UPDATE OF joined_at, last_activity_logged_at ON users
    FOR EACH ROW EXECUTE FUNCTION users_dates_finite();
