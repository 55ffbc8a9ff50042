import Foundation
import JobKit
import Postgres

/// `rules --dry-run --set scenario.key=value`: how many people a scenario would notify now with the
/// organizations' rules as they are, and with the proposed settings, side by side. The proposal is
/// written in a transaction that is always rolled back: the database checks it like any rule (migration
/// 0009), the jobs' own checks run on it, and nothing is saved.
public enum WhatIf {
    /// What one dry decision pass gives.
    public struct Count: Sendable {
        public var candidates = 0
        public var notified = 0
        public var suppressed: [String: Int] = [:]
        public var invalidOrganizations = 0
    }

    /// Counts for `scenario` as the rules are, then with `settings` (a JSON object of the keys to change)
    /// merged into the rule of each of `organizations` (every organization when empty).
    public static func compare<S: Scenario>(_ scenario: S, settings: String, organizations: [UUID], on connection: Connection,
                                            now: Date, policies: [any Policy] = Policies.standard) throws -> (current: Count, proposed: Count) {
        let current = try count(scenario, organizations: organizations, on: connection, now: now, policies: policies)
        var proposed = Count()
        do {
            try connection.transaction {
                let filter: PostgresArray<UUID>? = organizations.isEmpty ? nil : PostgresArray(organizations)
                try connection.execute("""
                    INSERT INTO organization_scenario_rules (organization_id, scenario, settings)
                    SELECT o.id, \(scenario.key), \(settings)::jsonb FROM organizations o
                     WHERE \(filter)::uuid[] IS NULL OR o.id = ANY(\(filter)::uuid[])
                    ON CONFLICT (organization_id, scenario) DO UPDATE SET settings = organization_scenario_rules.settings || EXCLUDED.settings
                    """)
                proposed = try count(scenario, organizations: organizations, on: connection, now: now, policies: policies)
                throw RollBack()
            }
        } catch is RollBack {}
        return (current, proposed)
    }

    /// One pass of the runner's decisions (rules, not-due organizations, candidates, policies, the
    /// scenario's decision), counted, on `connection` as it stands.
    static func count<S: Scenario>(_ scenario: S, organizations: [UUID], on connection: Connection, now: Date,
                                   policies: [any Policy]) throws -> Count {
        var options = JobOptions(SharedJobFlags())
        options.dryRun = true
        let runner = ScenarioRunner(scenario, options: options, policies: policies)
        let (loaded, invalid) = try RuleLoader.load(scenario, only: organizations, from: connection)
        let rules = loaded.filter { scenario.notDue($0, now: now) == nil }
        var count = Count(invalidOrganizations: invalid.count)
        let query = Recipient.wrap(scenario.candidateQuery(rules: rules, now: now), category: scenario.category, now: now)
        try runner.decideEach(query, rules: rules, on: connection, now: now) { _, _, decision, _ in
            count.candidates += 1
            switch decision {
            case .notify: count.notified += 1
            case .suppress(let reason, _): count.suppressed[reason.rawValue, default: 0] += 1
            }
        }
        return count
    }

    private struct RollBack: Error {}
}
