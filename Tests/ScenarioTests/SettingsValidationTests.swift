import Foundation
import Postgres
@testable import ScenarioEngine
import Scenarios
import Testing
import TestSupport

/// An organization's scenario settings are refused when they are written (migration 0009), with a message
/// that names the key and what it must be; and the database's rules and the jobs' agree.
@Suite struct SettingsValidationTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
        org = try f.organization("Org")
    }

    @Test(arguments: [
        ("inactivity", #"{"threshold_dayz": 7}"#, "inactivity.threshold_dayz is not a setting of inactivity (its settings: threshold_days)"),
        ("inactivity", #"{"threshold_days": "fourteen"}"#, #"inactivity.threshold_days must be an integer from 1 to 365, not "fourteen""#),
        ("inactivity", #"{"threshold_days": 0}"#, "must be an integer from 1 to 365, not 0"),
        ("inactivity", #"{"threshold_days": 14.5}"#, "not 14.5"),
        ("overdue_digest", #"{"send_hour": 24}"#, "overdue_digest.send_hour must be an integer from 0 to 23, not 24"),
        ("milestone", #"{"milestones": []}"#, "milestone.milestones must be a non-empty list of integers from 1 to 100000"),
        ("milestone", #"{"milestones": [25, "fifty"]}"#, "milestone.milestones must be a non-empty list"),
        ("availability_change", #"{"quiet": true}"#, "availability_change.quiet is not a setting of availability_change (its settings: none)"),
    ])
    func anInvalidRuleIsRefusedWhenWritten(scenario: String, settings: String, message: String) throws {
        do {
            try f.rule(org, scenario: scenario, settings: settings)
            Issue.record("\(scenario) \(settings) was stored")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23514")
            #expect("\(error)".contains(message), "\(error)")
        }
        #expect(try f.count("organization_scenario_rules") == 0)
    }

    /// The defaults set every setting of their scenario (0048): `{}` for inactivity was stored, and every
    /// organization without a value of its own was then skipped (78), each blamed for a row it did not have.
    @Test func defaultsWithoutOneOfTheirSettingsAreRefused() throws {
        for (scenario, settings, message) in [
            ("inactivity", "{}", "scenario_defaults: inactivity.threshold_days missing: the defaults must set every setting of inactivity"),
            ("milestone", #"{"milestones": [5]}"#, "milestone.max_age_days missing"),
        ] {
            do {
                try f.connection.execute("UPDATE scenario_defaults SET settings = \(settings)::jsonb WHERE scenario = \(scenario)")
                Issue.record("\(scenario) defaults \(settings) were stored")
            } catch let error as PostgresError {
                #expect(error.sqlState == "23514")
                #expect("\(error)".contains(message), "\(error)")
            }
        }
        try f.connection.execute("UPDATE scenario_defaults SET settings = '{\"threshold_days\": 21}' WHERE scenario = 'inactivity'")
        let result = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"])
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// A bad value in `scenario_defaults` (written before the database checked it) was blamed on every
    /// organization's own row, "fix its row in organization_scenario_rules", even where there was none. The message
    /// says where the value comes from; one the organization's own row sets is still its row's to fix.
    @Test func aBadDefaultIsBlamedOnTheDefaultsNotOnTheOrganizations() throws {
        let other = try f.organization("Other")
        try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO organization_scenario_rules (organization_id, scenario, settings) VALUES (\(other), 'inactivity', '{}')")
        try f.connection.execute("ALTER TABLE scenario_defaults DISABLE TRIGGER scenario_defaults_valid")
        try f.connection.execute(#"UPDATE scenario_defaults SET settings = '{"threshold_days": -3}' WHERE scenario = 'inactivity'"#)
        try f.connection.execute("ALTER TABLE scenario_defaults ENABLE TRIGGER scenario_defaults_valid")

        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("inactivity.threshold_days must be an integer from 1 to 365, found -3; the value comes from scenario_defaults"), "\(result.stderr)")
        #expect(!result.stderr.contains("fix its row in organization_scenario_rules"), "\(result.stderr)")

        // Its own value, bad too (written before 0009), is its own row's to fix.
        try f.connection.execute("ALTER TABLE organization_scenario_rules DISABLE TRIGGER organization_scenario_rules_valid")
        try f.connection.execute(#"UPDATE organization_scenario_rules SET settings = '{"threshold_days": 0}' WHERE organization_id = \#(other)"#)
        try f.connection.execute("ALTER TABLE organization_scenario_rules ENABLE TRIGGER organization_scenario_rules_valid")
        let again = try Jobs.inactivityCheck(db, now: f.now)
        #expect(again.stderr.contains("found 0; fix its row in organization_scenario_rules"), "\(again.stderr)")
    }

    @Test func validRulesAreStored() throws {
        try f.rule(org, settings: #"{"threshold_days": 7}"#)
        try f.rule(org, scenario: "milestone", settings: #"{"milestones": [10, 20], "max_age_days": 30}"#)
        try f.rule(org, scenario: "honorarium", enabled: true, settings: #"{"assignment_count": 3}"#)
        try f.rule(org, scenario: "availability_change", enabled: false)
        #expect(try f.count("organization_scenario_rules") == 4)
        #expect(throws: PostgresError.self, "an update is checked too") {
            try f.connection.execute("UPDATE organization_scenario_rules SET settings = '{\"threshold_days\": 400}' WHERE scenario = 'inactivity'")
        }
    }

    /// Every setting the database knows, at and just beyond its bounds: the jobs accept and refuse the same.
    @Test func theDatabaseAndTheJobsAgreeOnEveryBound() throws {
        let scenarios: [String: any Scenario] = Dictionary(uniqueKeysWithValues: ([InactivityCheck(), AssignmentFollowUp(), OverdueDigest(),
            ImpactSummary(), Milestone(), Honorarium(), AvailabilityChange(), NewAssignment()] as [any Scenario]).map { ($0.key, $0) })
        let rows = try f.connection.query("SELECT scenario, key, kind, minimum, maximum FROM scenario_setting_keys ORDER BY 1, 2")
        #expect(rows.count >= 8)
        for row in rows {
            let (scenario, key, kind): (String, String, String) = (try row.decode(0), try row.decode(1), try row.decode(2))
            let (minimum, maximum): (Int, Int) = (try row.decode(3), try row.decode(4))
            let swift = try #require(scenarios[scenario], "no scenario \(scenario) in the build")
            for (value, valid) in [(minimum, true), (maximum, true), (minimum - 1, false), (maximum + 1, false)] {
                let json = kind == "integer" ? "{\"\(key)\": \(value)}" : "{\"\(key)\": [\(value)]}"
                let databaseSays: Bool = try f.connection.query("SELECT scenario_settings_problem(\(scenario), \(json)::jsonb) IS NULL").first!.decode(0)
                #expect(databaseSays == valid, "database: \(scenario) \(json)")
                #expect(try jobAccepts(swift, json) == valid, "jobs: \(scenario) \(json)")
            }
        }
    }

    /// Whether the job's own check (`RuleLoader`, as every run loads rules) accepts `settings` for `scenario`.
    func jobAccepts<S: Scenario>(_ scenario: S, _ settings: String) throws -> Bool {
        let organization = try f.organization("Probe \(UUID().uuidString.prefix(8))")
        try f.ruleWrittenBeforeValidation(organization, scenario: scenario.key, settings: settings)
        let (rules, _) = try RuleLoader.load(scenario, only: [organization], from: f.connection)
        return rules.contains { $0.organizationID == organization }
    }
}
