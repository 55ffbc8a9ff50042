-- 0048: a scenario's defaults set every one of its settings.
--
-- scenario_defaults_check (0009) checked only the keys a row has, so `UPDATE scenario_defaults SET settings =
-- '{}' WHERE scenario = 'inactivity'` was accepted; every organization without a value of its own was then
-- skipped (exit 78) with a message that blamed its row in organization_scenario_rules, which it did not have,
-- and event-notify set such organizations' events aside. Now a defaults row without one of its scenario's
-- settings (scenario_setting_keys) is refused, naming it. A row that lost a setting before this is given the
-- shipped value back here (its other values are kept).

UPDATE scenario_defaults d
   SET settings = s.shipped || d.settings
  FROM (VALUES ('inactivity',           '{"threshold_days": 14}'::jsonb),
               ('assignment_follow_up', '{"follow_up_days": 10}'),
               ('overdue_digest',       '{"overdue_days": 10, "send_hour": 8}'),
               ('impact_summary',       '{"max_age_days": 30}'),
               ('milestone',            '{"milestones": [25, 50, 100], "max_age_days": 14}'),
               ('honorarium',           '{"assignment_count": 3}')) AS s(scenario, shipped)
 WHERE d.scenario = s.scenario AND jsonb_typeof(d.settings) = 'object'
   AND EXISTS (SELECT FROM scenario_setting_keys k WHERE k.scenario = d.scenario AND NOT d.settings ? k.key);

CREATE OR REPLACE FUNCTION scenario_defaults_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    problem text := scenario_settings_problem(NEW.scenario, NEW.settings);
    missing text;
BEGIN
    IF problem IS NULL AND jsonb_typeof(NEW.settings) = 'object' THEN
        SELECT string_agg(NEW.scenario || '.' || k.key, ', ' ORDER BY k.key) INTO missing
          FROM scenario_setting_keys k WHERE k.scenario = NEW.scenario AND NOT NEW.settings ? k.key;
        IF missing IS NOT NULL THEN
            problem := format('%s missing: the defaults must set every setting of %s (an organization without a value of its own uses them)',
                              missing, NEW.scenario);
        END IF;
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'scenario_defaults: %', problem USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
