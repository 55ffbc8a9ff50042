-- 0047: a user's joined_at and last_activity_logged_at are real times, not infinity.
--
-- A user row with joined_at (or last_activity_logged_at) of '-infinity' stopped inactivity-check for every
-- organization (PostgreSQL: 0A000 cannot convert infinity to bigint, exit 70: nobody was reminded), and so did
-- rules --dry-run. No count of days means anything from it. Now a row written with either set to infinity or
-- -infinity is refused; rows written before are not refused by this upgrade (a trigger on the two columns, not
-- a CHECK, so that a write to the row's other columns still succeeds): inactivity-check skips them with the
-- decision invalid_data naming the column, and exits 65.

CREATE FUNCTION users_dates_finite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT isfinite(NEW.joined_at) OR NOT coalesce(isfinite(NEW.last_activity_logged_at), true) THEN
        RAISE EXCEPTION 'user %: joined_at and last_activity_logged_at must be times, not infinity (joined_at %, last_activity_logged_at %)',
                        NEW.id, NEW.joined_at, NEW.last_activity_logged_at
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER users_dates_finite BEFORE INSERT OR UPDATE OF joined_at, last_activity_logged_at ON users
    FOR EACH ROW EXECUTE FUNCTION users_dates_finite();
