import Foundation
import JobKit
import Logging
import Postgres
@testable import ScenarioEngine
import Testing
import TestSupport

/// event-notify's dry run made again event by event (a row the scenarios cannot read): each event's lines are
/// printed only when every scenario of its kind planned it, as a run decides an event whole or sets it aside.
@Suite struct EventPlanTests {
    /// Prints a line for each selected `activities_logged` event.
    struct Printing: EventHandling {
        var key: String { "printing" }
        var eventKinds: [String] { ["activities_logged"] }
        var suppressionReasons: [SuppressionReason] { [] }
        var decidesBySubject: Bool { false }
        func process(_ events: EventSelection, on connection: Connection, policies: [any Policy], runID: Int?, now: Date,
                     printer: PlanPrinter?, logger: Logger, summary: inout ScenarioSummary) throws {
            for row in try connection.query("SELECT e.subject_id FROM events e WHERE \(events.condition) AND e.kind = 'activities_logged' ORDER BY e.id") {
                printer?.emit("planned \(try row.decode(0, as: String.self))")
            }
        }
    }

    /// Reads each selected event's subject as a number: a data exception on one that is not.
    struct Reading: EventHandling {
        var key: String { "reading" }
        var eventKinds: [String] { ["activities_logged"] }
        var suppressionReasons: [SuppressionReason] { [] }
        var decidesBySubject: Bool { false }
        func process(_ events: EventSelection, on connection: Connection, policies: [any Policy], runID: Int?, now: Date,
                     printer: PlanPrinter?, logger: Logger, summary: inout ScenarioSummary) throws {
            _ = try connection.query("SELECT e.subject_id::int FROM events e WHERE \(events.condition) AND e.kind = 'activities_logged'")
        }
    }

    @Test func anEventAnotherScenarioCannotReadPrintsNoLineOfAnEarlierOne() throws {
        let db = try TestCluster.shared().makeDatabase()
        let f = try Fixtures(db, now: Date())
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: nil, devices: 0)
        try f.connection.execute("UPDATE events SET processed_at = now()")
        try f.connection.execute("""
            INSERT INTO events (kind, mentor_id, subject_id) VALUES ('activities_logged', \(kari), '41'),
                ('activities_logged', \(kari), 'not-a-number'), ('activities_logged', \(kari), '43')
            """)
        var lines: [String] = []
        var printer = PlanPrinter(format: .text)
        printer.emit = { lines.append($0) }
        var summary = ScenarioSummary(job: "event-notify", dryRun: true, reasonOrder: [])
        let processor = EventProcessor([Printing(), Reading()])
        let connection = try db.connect()
        let planned = try processor.plan(on: connection, now: Date(), printer: printer, logger: Logger(label: "event-plan-test"), summary: &summary)
        #expect(planned == 3)
        #expect(lines == ["planned 41", "planned 43"], "the unreadable event's line is not printed")
        #expect(summary.failedEvents == 1)
    }
}
