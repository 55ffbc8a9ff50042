-- 0039: an organization that switches a scenario off cancels its pushes still waiting to go out.
--
-- The organization's switch beats every user preference, but only the users' switches were followed after a
-- job had decided (0024): reminders an organization had just turned off still went out, deferred for the
-- night or held for a retry, the next morning. A rule row written (inserted or updated) that leaves the
-- scenario off (its own `enabled`, else the scenario's default) cancels the waiting pushes of that category
-- to the organization's users, critical ones too ("the organization switched … off"). The inbox rows stay.

CREATE FUNCTION organization_rules_cancel_switched_off() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    off record;
BEGIN
    FOR off IN SELECT DISTINCT r.organization_id, r.scenario FROM new_rows r JOIN scenario_defaults d ON d.scenario = r.scenario
                WHERE NOT coalesce(r.enabled, d.enabled) LOOP
        PERFORM cancel_pushes_of(array(
            SELECT DISTINCT n.id FROM delivery_queue q JOIN deliveries dl ON dl.id = q.delivery_id
              JOIN notifications n ON n.id = dl.notification_id JOIN users u ON u.id = n.user_id
             WHERE u.organization_id = off.organization_id AND n.category = off.scenario),
            'the organization switched ' || off.scenario || ' off before the push went out');
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER organization_rules_insert_cancel AFTER INSERT ON organization_scenario_rules
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION organization_rules_cancel_switched_off();
CREATE TRIGGER organization_rules_update_cancel AFTER UPDATE ON organization_scenario_rules
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION organization_rules_cancel_switched_off();
