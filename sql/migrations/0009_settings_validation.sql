-- 0009: an organization's scenario settings are checked when they are written, not when a job runs at
-- 3 a.m. An unknown key (`threshold_dayz`) or a bad value (`"fourteen"`, 0, 1000) is refused with a
-- message that names the scenario, the key and what it must be. The rules are data: one row per setting
-- in scenario_setting_keys (the same bounds as each scenario's settings in Sources/Scenarios; a test
-- keeps the two in step). Rows written before this migration are not checked here: the jobs still
-- refuse them (exit 78, naming the organization and the key).

CREATE TABLE scenario_setting_keys (
    scenario  text NOT NULL REFERENCES scenario_defaults (scenario),
    key       text NOT NULL,
    kind      text NOT NULL CHECK (kind IN ('integer', 'integer_list')),
    minimum   integer NOT NULL,
    maximum   integer NOT NULL,
    PRIMARY KEY (scenario, key)
);
INSERT INTO scenario_setting_keys (scenario, key, kind, minimum, maximum) VALUES
    ('inactivity',           'threshold_days',   'integer',      1, 365),
    ('assignment_follow_up', 'follow_up_days',   'integer',      1, 90),
    ('overdue_digest',       'overdue_days',     'integer',      1, 90),
    ('overdue_digest',       'send_hour',        'integer',      0, 23),
    ('impact_summary',       'max_age_days',     'integer',      1, 366),
    ('milestone',            'milestones',       'integer_list', 1, 100000),
    ('milestone',            'max_age_days',     'integer',      1, 365),
    ('honorarium',           'assignment_count', 'integer',      1, 1000);

-- What is wrong with `settings` for `scenario`, or NULL when nothing is.
CREATE FUNCTION scenario_settings_problem(p_scenario text, p_settings jsonb) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    entry record;
    rule record;
    known text;
    expectation text;
BEGIN
    IF jsonb_typeof(p_settings) IS DISTINCT FROM 'object' THEN
        RETURN format('%s settings must be a JSON object', p_scenario);
    END IF;
    FOR entry IN SELECT key, value FROM jsonb_each(p_settings) LOOP
        SELECT * INTO rule FROM scenario_setting_keys k WHERE k.scenario = p_scenario AND k.key = entry.key;
        IF NOT FOUND THEN
            SELECT coalesce(string_agg(k.key, ', ' ORDER BY k.key), 'none') INTO known FROM scenario_setting_keys k WHERE k.scenario = p_scenario;
            RETURN format('%s.%s is not a setting of %s (its settings: %s)', p_scenario, entry.key, p_scenario, known);
        END IF;
        IF rule.kind = 'integer' THEN
            expectation := format('an integer from %s to %s', rule.minimum, rule.maximum);
            IF jsonb_typeof(entry.value) <> 'number' OR entry.value::text !~ '^-?[0-9]+$'
               OR (entry.value::text)::numeric NOT BETWEEN rule.minimum AND rule.maximum THEN
                RETURN format('%s.%s must be %s, not %s', p_scenario, entry.key, expectation, entry.value);
            END IF;
        ELSE
            expectation := format('a non-empty list of integers from %s to %s', rule.minimum, rule.maximum);
            IF jsonb_typeof(entry.value) <> 'array' OR jsonb_array_length(entry.value) = 0
               OR EXISTS (SELECT FROM jsonb_array_elements(entry.value) e
                           WHERE jsonb_typeof(e) <> 'number' OR e::text !~ '^-?[0-9]+$'
                              OR (e::text)::numeric NOT BETWEEN rule.minimum AND rule.maximum) THEN
                RETURN format('%s.%s must be %s, not %s', p_scenario, entry.key, expectation, entry.value);
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE FUNCTION organization_scenario_rules_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE problem text := scenario_settings_problem(NEW.scenario, NEW.settings);
BEGIN
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'organization %: %', NEW.organization_id, problem USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER organization_scenario_rules_valid BEFORE INSERT OR UPDATE OF scenario, settings ON organization_scenario_rules
    FOR EACH ROW EXECUTE FUNCTION organization_scenario_rules_check();

CREATE FUNCTION scenario_defaults_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE problem text := scenario_settings_problem(NEW.scenario, NEW.settings);
BEGIN
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'scenario_defaults: %', problem USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER scenario_defaults_valid BEFORE INSERT OR UPDATE OF scenario, settings ON scenario_defaults
    FOR EACH ROW EXECUTE FUNCTION scenario_defaults_check();

-- The defaults themselves pass.
DO $$
DECLARE problem text;
BEGIN
    SELECT string_agg(p, '; ') INTO problem
      FROM (SELECT scenario_settings_problem(scenario, settings) AS p FROM scenario_defaults) x WHERE p IS NOT NULL;
    IF problem IS NOT NULL THEN RAISE EXCEPTION 'scenario_defaults do not pass their own rules: %', problem; END IF;
END $$;
