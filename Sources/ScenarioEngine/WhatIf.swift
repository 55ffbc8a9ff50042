import Foundation
import JobKit
import Postgres

/// `rules --dry-run --set scenario.key=value`: how many people a scenario would notify now with the
/// organizations' rules as they are, and with the proposed settings, side by side. The proposal is checked
/// as the database checks a rule written (migration 0009's `scenario_settings_problem`), merged over the
/// rules in memory, and read through the jobs' own checks: nothing is written or locked. (It was written in
/// a transaction rolled back at the end, which held every selected organization's rule row for the whole
/// count, the app's edits waiting behind it, and one organization's invalid stored rule failed it all.)
public enum WhatIf {
    /// What one dry decision pass gives.
    public struct Count: Sendable {
        public var candidates = 0
        public var notified = 0
        public var suppressed: [String: Int] = [:]
        public var invalidOrganizations = 0
    }

    /// Counts for `scenario` as the rules are, then with `settings` (a JSON object of the keys to change)
    /// merged into the rule of each of `organizations` (every organization when empty). A proposal the
    /// database would refuse throws its message (64).
    public static func compare<S: Scenario>(_ scenario: S, settings: String, organizations: [UUID], on connection: Connection,
                                            now: Date, policies: [any Policy] = Policies.standard) throws -> (current: Count, proposed: Count) {
        let problem: String? = try connection.query("SELECT scenario_settings_problem(\(scenario.key), \(settings)::jsonb)").first!.decode(0)
        if let problem { throw JobFailure(.usage, "--set: \(problem)") }
        // Both counts of one snapshot (read-only, repeatable read: no row is locked): a job committing between two
        // passes made the side-by-side differ by what it changed, not by the proposal.
        return try connection.transaction(.readOnly) {
            let current = try count(scenario, organizations: organizations, on: connection, now: now, policies: policies)
            let proposed = try count(scenario, organizations: organizations, on: connection, now: now, policies: policies, proposing: settings)
            return (current, proposed)
        }
    }

    /// One pass of the runner's decisions (rules, not-due organizations, candidates, policies, the
    /// scenario's decision), counted, on `connection` as it stands.
    static func count<S: Scenario>(_ scenario: S, organizations: [UUID], on connection: Connection, now: Date,
                                   policies: [any Policy], proposing: String? = nil) throws -> Count {
        var options = JobOptions(SharedJobFlags())
        options.dryRun = true
        let runner = ScenarioRunner(scenario, options: options, policies: policies)
        let (loaded, invalid) = try RuleLoader.load(scenario, only: organizations, from: connection, proposing: proposing)
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
}
