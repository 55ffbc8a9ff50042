import Foundation
import Testing
import TestSupport

/// The demo data covers every case each scenario job decides; these keep the data and the rules in step
/// (each expectation is what the comment beside the row in sql/seed/demo.sql promises).
@Suite struct DemoDataTests {
    let db: TestDatabase

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        let load = try ProcessRunner.run("/usr/bin/psql", [db.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", Paths.root.appendingPathComponent("sql/seed/demo.sql").path])
        try #require(load.status == 0, "psql: \(load.stderr)")
    }

    /// The plan lines of `job --dry-run --format json`, by recipient name.
    func plan(_ job: String, _ extra: [String] = []) throws -> [String: [String: Any]] {
        let result = try Jobs.run(job, ["--dry-run", "--format", "json"] + extra, database: db)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        var lines: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n").dropLast() {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let name = object["name"] as? String else { continue }
            lines[name] = object
        }
        return lines
    }

    /// Each recipient's "notify" or suppression reason.
    func outcomes(_ plan: [String: [String: Any]]) -> [String: String] {
        plan.mapValues { $0["decision"] as? String == "notify" ? "notify" : ($0["reason"] as? String ?? "?") }
    }

    @Test func inactivityCheck() throws {
        #expect(outcomes(try plan("inactivity-check")) == [
            "Kari Nordmann": "notify", "Per Solberg": "notify", "Ingrid Berg": "notify", "Tone Andersen": "notify",
            "Geir Olsen": "notify", "Camilla Hansen": "notify", "Anne Karlsen": "notify", "Emma Wilson": "notify",
            "Solveig Nilsen": "notify", "Randi Berntsen": "notify", "Eirik Larsen": "notify", "Jonas Bakke": "notify",
            "Ida Ruud": "notify", "Thomas Berge": "notify", "Morten Vik": "notify",
            #"Robert'); DROP TABLE users;-- "Bobby" 🎉👩‍👩‍👧 O'Brien"#: "notify",
            "Knut Eriksen": "already_notified", "Kristin Aas": "already_notified",
            "Hilde Pedersen": "category_disabled", "Bjørn Kristiansen": "push_disabled",
            "Frida Lunde": "organization_scenario_off", "Jon Tangen": "organization_scenario_off",
            "Lars Johansen": "paused", "Sigrid Haugen": "paused", "Siri Holm": "paused",
        ])
    }

    @Test func assignmentFollowUp() throws {
        let plan = try plan("assignment-follow-up")
        #expect(outcomes(plan) == [
            "Ola Nordmann": "notify", "Emma Wilson": "notify", "Jonas Bakke": "notify", "Thomas Berge": "notify",
            "Sigrid Haugen": "paused", "Lars Johansen": "paused",
        ])
        #expect(plan["Emma Wilson"]?["title"] as? String == "An assignment is waiting for you")
        #expect(plan["Ola Nordmann"]?["title"] as? String == "Et oppdrag venter på deg")
    }

    @Test func overdueDigest() throws {
        // From 08:00 Oslo time: as of 08:30 today when the test runs earlier.
        var oslo = Calendar(identifier: .gregorian)
        oslo.timeZone = TimeZone(identifier: "Europe/Oslo")!
        var at = Date()
        if oslo.component(.hour, from: at) < 8 { at = oslo.date(bySettingHour: 8, minute: 30, second: 0, of: at)! }
        let plan = try plan("overdue-digest", ["--now", Jobs.iso(at)])
        #expect(outcomes(plan) == ["Linda Bråten": "notify", "Svein Myhre": "notify", "Arne Vold": "notify"])
        #expect(plan["Linda Bråten"]?["title"] as? String == "4 oppdrag er ikke bekreftet")
        #expect(plan["Svein Myhre"]?["title"] as? String == "2 oppdrag er ikke bekreftet")
        #expect(plan["Arne Vold"]?["body"] as? String
                == "Thomas Berge har ikke bekreftet oppdraget «Guide at the eye clinic» etter 10 dager. Trykk for å følge opp.")
    }

    @Test func impactSummary() throws {
        let plan = try plan("impact-summary")
        #expect(outcomes(plan) == [
            "Liv Jakobsen": "notify", "Tone Andersen": "notify", "Thomas Berge": "notify", "Sigrid Haugen": "notify",
            "Bjørn Kristiansen": "push_disabled",
        ])
        #expect(plan["Thomas Berge"]?["title"] as? String == "Your year as a peer mentor")
    }

    /// The delivery policies in the demo: Thomas Berge's cap of 2 leaves his impact summary without a push;
    /// Jonas Bakke's reminders wait for the end of his quiet hours.
    @Test func policiesAsTheDemoTellsThem() throws {
        for job in ["inactivity-check", "assignment-follow-up", "impact-summary"] {
            let result = try Jobs.run(job, [], database: db)
            #expect(result.status == 0, "\(job): \(result.stderr)")
        }
        let connection = try db.connect()
        func reasons(_ user: String) throws -> [String] {
            try connection.query("SELECT scenario || ':' || reason FROM decisions WHERE user_id = \(UUID(uuidString: user)!) ORDER BY id").map { try $0.decode(0) }
        }
        #expect(try reasons("00000000-0000-4000-8000-000000000216") == ["inactivity:notified", "assignment_follow_up:notified", "impact_summary:capped"])
        #expect(try reasons("00000000-0000-4000-8000-000000000211") == ["inactivity:deferred_quiet_hours", "assignment_follow_up:deferred_quiet_hours"])
    }
}
