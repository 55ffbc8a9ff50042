import Foundation
import Testing
import TestSupport

/// The demo data covers every case inactivity-check decides; this keeps the data and the rules in step.
@Test func demoDataGivesEachMentorTheOutcomeItsCommentPromises() throws {
    let db = try TestCluster.shared().makeDatabase()
    let load = try ProcessRunner.run("/usr/bin/env", ["psql", db.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", Paths.root.appendingPathComponent("sql/seed/demo.sql").path])
    try #require(load.status == 0, "psql: \(load.stderr)")
    let result = try Jobs.run("inactivity-check", ["--dry-run", "--format", "json"], database: db)
    #expect(result.status == 0, "stderr: \(result.stderr)")
    var outcomes: [String: String] = [:]
    for line in result.stdout.split(separator: "\n").dropLast() {
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let name = object["name"] as? String else { continue }
        outcomes[name] = object["decision"] as? String == "notify" ? "notify" : (object["reason"] as? String ?? "?")
    }
    let expected: [String: String] = [
        "Kari Nordmann": "notify", "Per Solberg": "notify", "Ingrid Berg": "notify", "Tone Andersen": "notify",
        "Geir Olsen": "notify", "Camilla Hansen": "notify", "Anne Karlsen": "notify", "Emma Wilson": "notify",
        "Solveig Nilsen": "notify", "Randi Berntsen": "notify", "Eirik Larsen": "notify", "Jonas Bakke": "notify",
        "Ida Ruud": "notify", "Thomas Berge": "notify", "Morten Vik": "notify",
        #"Robert'); DROP TABLE users;-- "Bobby" 🎉👩‍👩‍👧 O'Brien"#: "notify",
        "Knut Eriksen": "already_notified", "Kristin Aas": "already_notified",
        "Hilde Pedersen": "category_disabled", "Bjørn Kristiansen": "push_disabled",
        "Frida Lunde": "organization_scenario_off", "Jon Tangen": "organization_scenario_off",
        "Lars Johansen": "paused", "Sigrid Haugen": "paused", "Siri Holm": "paused",
    ]
    #expect(outcomes == expected)
}
