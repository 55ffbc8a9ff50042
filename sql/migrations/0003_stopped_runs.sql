-- A run that SIGTERM or SIGINT stopped early (systemd stopping the unit, an operator's Ctrl-C) records
-- what it did and the outcome 'stopped'; the next run picks up the rest.
ALTER TABLE job_runs DROP CONSTRAINT job_runs_outcome_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_outcome_check
    CHECK (outcome IN ('running', 'ok', 'partial', 'failed', 'skipped', 'stopped'));
