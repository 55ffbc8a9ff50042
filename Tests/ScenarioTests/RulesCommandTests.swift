import Foundation
import Testing
import TestSupport

/// `rules`: the effective rules, their check, and the what-if that saves nothing.
@Suite struct RulesCommandTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
    }

    @Test func showsEachOrganizationsRulesAndWhereTheyComeFrom() throws {
        try f.rule(org, settings: #"{"threshold_days": 7}"#)
        let result = try Jobs.run("rules", ["--org", org.uuidString], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains(#"inactivity            on   {"threshold_days": 7}  (its own row over the defaults)"#), "\(result.stdout)")
        #expect(result.stdout.contains(#"assignment_follow_up  on   {"follow_up_days": 10}  (defaults)"#))
        #expect(result.stdout.contains(#"honorarium            OFF"#))
        #expect(result.stdout.contains("  delivery: quiet hours none; daily cap none; critical none\n"), "\(result.stdout)")
    }

    /// Names and keys from the database reach the operator's terminal as text: an escape sequence in an organization's
    /// name (setting the window title, clearing the screen) or a key of its rule went out raw, in the list and in
    /// `--validate`'s INVALID lines.
    @Test func escapeSequencesFromTheDatabaseReachTheTerminalAsText() throws {
        let evil = try f.organization("Evil\u{1b}]0;PWNED\u{07}Org\u{1b}[2J\r")
        try f.ruleWrittenBeforeValidation(evil, settings: #"{"thr\u001b[2Jeshold": 7}"#)
        for mode in [["--org", evil.uuidString], ["--validate"]] {
            let result = try Jobs.run("rules", mode, database: db)
            #expect(result.stdout.contains("INVALID"), "\(mode): \(result.stdout)")
            #expect(!result.stdout.contains("\u{1b}") && !result.stdout.contains("\u{07}") && !result.stdout.contains("\r"), "\(mode): \(result.stdout)")
            #expect(result.stdout.contains(#"Evil\u{1b}]0;PWNED"#), "shown as text: \(result.stdout)")
        }
    }

    /// A rule row of the app's own (activity_reminder, which `rules` lists) can be asked for by name: it was refused
    /// as "no such scenario", and left out of the list that message gave.
    @Test func aRuleRowOfTheAppsOwnCanBeShownAndValidatedByName() throws {
        for mode in [[], ["--validate"]] {
            let result = try Jobs.run("rules", ["--org", org.uuidString, "--scenario", "activity_reminder"] + mode, database: db)
            #expect(result.status == 0, "\(mode): \(result.stderr)")
        }
        let shown = try Jobs.run("rules", ["--org", org.uuidString, "--scenario", "activity_reminder"], database: db)
        #expect(shown.stdout.contains("activity_reminder     on   {}  (defaults)") && !shown.stdout.contains("inactivity "), "\(shown.stdout)")
        let unknown = try Jobs.run("rules", ["--scenario", "nope"], database: db)
        #expect(unknown.status == 64 && unknown.stderr.contains("activity_reminder"), "\(unknown.stderr)")
    }

    /// The what-if of an event scenario (decided per event, as it happens) has no candidates to count: it said
    /// "would notify 0 of 0 (as the rules are: 0 of 0)" and exited 0, as if the change did nothing.
    @Test func theWhatIfOfAnEventScenarioSaysItCannotCount() throws {
        let result = try Jobs.run("rules", ["--dry-run", "--set", "milestone.max_age_days=7"], database: db)
        #expect(result.status == 64, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("milestone is decided per event as it happens"), "\(result.stderr)")
    }

    /// `--org` naming no organization is a bad flag (64) in every mode: `rules` alone printed nothing and exited 0.
    @Test func anOrganizationThatDoesNotExistIsABadFlag() throws {
        let nobody = "11111111-1111-4111-8111-111111111111"
        for mode in [[], ["--validate"], ["--dry-run", "--set", "inactivity.threshold_days=7"]] {
            let result = try Jobs.run("rules", ["--org", nobody] + mode, database: db)
            #expect(result.status == 64, "\(mode): \(result.stderr)")
            #expect(result.stderr.contains("--org \(nobody): no such organization"), "\(mode): \(result.stderr)")
        }
    }

    @Test func showsTheDeliveryPoliciesAndPriorities() throws {
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end, daily_push_cap, critical_categories)
            VALUES (\(org), '22:00', '07:00', 3, '{new_assignment}')
            """)
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'impact_summary', 'inbox_only')")
        try f.connection.execute("INSERT INTO organization_scenario_rules (organization_id, scenario, priority) VALUES (\(org), 'milestone', 5)")
        try f.connection.execute("INSERT INTO message_templates (scenario, language, organization_id, title, body) VALUES ('milestone', 'en', \(org), 'Yay', '{{milestone}}!')")
        let result = try Jobs.run("rules", ["--org", org.uuidString], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("  delivery: quiet hours 22:00-07:00; daily cap 3; critical new_assignment; channels impact_summary inbox_only; own templates milestone/en"), "\(result.stdout)")
        #expect(result.stdout.contains("(its own row over the defaults)  priority 5"))
        #expect(result.stdout.contains("(defaults)  priority 90"), "impact_summary's default")
    }

    @Test func validateFindsARuleWrittenBeforeTheDatabaseChecked() throws {
        #expect(try Jobs.run("rules", ["--validate"], database: db).status == 0)
        try f.ruleWrittenBeforeValidation(org, settings: #"{"threshold_dayz": 7}"#)
        let result = try Jobs.run("rules", ["--validate"], database: db)
        #expect(result.status == 78)
        #expect(result.stdout.contains("INVALID") && result.stdout.contains("threshold_dayz"), "\(result.stdout)")
        // As JSON lines, for tools (it printed text whatever --format said).
        let validated = try Jobs.run("rules", ["--validate", "--format", "json"], database: db)
        #expect(validated.status == 78)
        let first = try #require(validated.stdout.split(separator: "\n").first.map(String.init))
        let object = try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any]
        #expect(object?["scenario"] as? String == "inactivity" && (object?["invalid"] as? String)?.contains("threshold_dayz") == true, "\(validated.stdout)")
        // The listing and `why` say so beside the rule (they showed it as if in force).
        let listed = try Jobs.run("rules", ["--org", org.uuidString], database: db)
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n")
        let invalid = try #require(lines.firstIndex { $0.contains("INVALID") }, "\(listed.stdout)")
        #expect(lines[invalid - 1].contains("inactivity") && lines[invalid].contains("threshold_dayz")
                && lines[invalid].contains("the jobs skip this organization for inactivity"), "\(listed.stdout)")
        #expect(lines.filter { $0.contains("INVALID") }.count == 1, "the other scenarios' rules are valid")
        let json = try Jobs.run("rules", ["--org", org.uuidString, "--format", "json"], database: db)
        #expect(json.stdout.contains(#""scenario":"inactivity""#) && json.stdout.contains(#""problem":"inactivity.threshold_dayz is not a setting"#), "\(json.stdout)")
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let why = try Jobs.run("why", [mentor.uuidString], database: db)
        #expect(why.stdout.contains("INVALID: ") && why.stdout.contains("the jobs skip this organization for inactivity"), "\(why.stdout)")
    }

    @Test func theWhatIfCountsWhomAChangeWouldNotifyAndSavesNothing() throws {
        try f.mentor(org, "Ten days quiet", lastActivityDaysAgo: 10)
        try f.mentor(org, "Twenty days quiet", lastActivityDaysAgo: 20)
        let before = try f.fingerprint()
        let result = try Jobs.run("rules", ["--dry-run", "--set", "inactivity.threshold_days=7"], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("would notify 2 of 2 candidates (as the rules are: 1 of 1)"), "\(result.stdout)")
        #expect(try f.fingerprint() == before, "nothing saved")
        #expect(try f.count("organization_scenario_rules") == 0)
        // As of another instant, said as such (it said "as of now" and gave now in its summary).
        let later = try Jobs.run("rules", ["--dry-run", "--set", "inactivity.threshold_days=7", "--now", "2027-06-01T00:00:00Z"], database: db)
        #expect(later.status == 0, "\(later.stderr)")
        #expect(later.stdout.contains("as of 2027-06-01T00:00:00Z:"), "\(later.stdout)")
        #expect(later.summary?["as_of"] as? String == "2027-06-01T00:00:00Z", "\(later.stdout)")
    }

    /// An organization the jobs would skip (a template saved before the check) is said, not counted as
    /// "would notify 0 of 0" without a word.
    @Test func theWhatIfSaysWhichOrganizationsItCouldNotCount() throws {
        try f.mentor(org, "Twenty days quiet", lastActivityDaysAgo: 20)
        try f.connection.execute("ALTER TABLE message_templates DISABLE TRIGGER message_templates_valid")
        try f.connection.execute("INSERT INTO message_templates (scenario, language, organization_id, title, body) VALUES ('inactivity', 'nb', \(org), 'Hei {{#name}}', 'x')")
        try f.connection.execute("ALTER TABLE message_templates ENABLE TRIGGER message_templates_valid")
        let result = try Jobs.run("rules", ["--dry-run", "--set", "inactivity.threshold_days=7"], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("not counted: 1 organization(s) with invalid settings or templates"), "\(result.stdout)")
    }

    /// The proposal was written into every organization's rule in a transaction rolled back at the end: the
    /// rows stayed locked for the whole count (the app's edits waited), and one organization's invalid stored
    /// rule failed the whole what-if (64). It is merged in memory now: that organization is not counted, the
    /// others are, and no rule row is locked.
    @Test func theWhatIfWritesAndLocksNothingAndAnInvalidRuleDoesNotStopIt() throws {
        try f.mentor(org, "Twenty days quiet", lastActivityDaysAgo: 20)
        let broken = try f.organization("Broken")
        try f.ruleWrittenBeforeValidation(broken, settings: #"{"threshold_dayz": 7}"#)
        let holder = try db.connect()
        try holder.execute("BEGIN")
        try holder.execute("SELECT 1 FROM organization_scenario_rules FOR UPDATE")
        defer { _ = try? holder.execute("ROLLBACK") }
        let result = try Jobs.run("rules", ["--dry-run", "--set", "inactivity.threshold_days=7"], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("would notify 1 of 1 candidates"), "\(result.stdout)")
        #expect(result.stdout.contains("not counted: 1 organization(s) with invalid settings or templates"), "\(result.stdout)")
    }

    @Test(arguments: [
        (["--dry-run", "--set", "inactivity.threshold_dayz=7"], "inactivity.threshold_dayz is not a setting of inactivity"),
        (["--dry-run", "--set", "inactivity.threshold_days=0"], "must be an integer from 1 to 365"),
        (["--dry-run", "--set", "nosuch.key=1"], "no such scenario"),
        (["--set", "inactivity.threshold_days=7"], "add --dry-run"),
        (["--dry-run", "--set", "inactivity=7"], "expected scenario.key=value"),
        // Contradictions that were ignored without a word.
        (["--validate", "--dry-run", "--set", "inactivity.threshold_days=7"], "give one of them"),
        (["--now", "2026-11-01"], "--now is the instant of the what-if"),
        (["--scenario", "milestone", "--dry-run", "--set", "inactivity.threshold_days=7"], "--scenario milestone names another scenario"),
        // jsonb refuses a NUL: it ended the what-if as a bug (70).
        (["--dry-run", "--set", #"inactivity.threshold_days="\u0000""#], "holds a NUL character"),
        (["--dry-run", "--set", #"inactivity.threshold_days={"a":["\u0000"]}"#], "holds a NUL character"),
        // The last one was used, the header showed both, and a first value of 0 was not refused.
        (["--dry-run", "--set", "inactivity.threshold_days=0", "--set", "inactivity.threshold_days=300"], "--set inactivity.threshold_days is given twice"),
    ])
    func aBadProposalExits64(arguments: [String], message: String) throws {
        let result = try Jobs.run("rules", arguments, database: db)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }
}
