import Foundation
import JobKit
import Logging
import Postgres
@testable import ScenarioEngine
import Scenarios
import Testing
import TestSupport

/// A pause changed while event-notify decides its start: the coordinator hears the dates that hold, once.
/// The batches are driven here, with another session acting at a set point inside one (`EventProcessor.reached`).
@Suite struct PauseOrderTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID
    let mentor: UUID
    let coordinator: UUID
    let logger = Logger(label: "pause-order-test")

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
        mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        coordinator = try f.user(org, "Linda", role: "coordinator")
        try f.device(coordinator)
        try f.scope(org, coordinator: coordinator, mentor: mentor)
    }

    /// A pause from noon UTC in 2 days to noon in `endsInDays` days.
    func savePause(endsInDays: Int) throws {
        try f.connection.execute("""
            INSERT INTO availability_pauses (mentor_id, starts_at, ends_at)
            VALUES (\(mentor), date_trunc('day', now()) + interval '2 days 12 hours', date_trunc('day', now()) + make_interval(days => \(endsInDays), hours => 12))
            """)
    }

    /// Moves the pause's end, committed by a session of its own (as the app would).
    func movePauseEnd(toDays days: Int) throws {
        let app = try db.connect()
        try app.execute("UPDATE availability_pauses SET ends_at = date_trunc('day', now()) + make_interval(days => \(days), hours => 12) WHERE mentor_id = \(mentor)")
    }

    /// "dd.MM.yyyy" of noon UTC `days` from today, as the Norwegian notice writes it (Oslo is never 12 hours off).
    func dateText(inDays days: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let noon = calendar.date(byAdding: DateComponents(day: days, hour: 12), to: calendar.startOfDay(for: Date()))!
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "Europe/Oslo")
        formatter.dateFormat = "dd.MM.yyyy"
        return formatter.string(from: noon)
    }

    func processor() -> EventProcessor { EventProcessor([AvailabilityChange()]) }

    func runID(_ connection: Connection) throws -> Int {
        let run = JobRun(job: "event-notify", dryRun: false, asOf: Date(), logger: logger)
        try run.record(on: connection)
        return run.runID!
    }

    /// Batches until nothing is pending, as the service's drain does (held-back subjects are taken again a moment
    /// later).
    func drain(_ processor: EventProcessor, on connection: Connection, runID: Int) throws {
        var summary = ScenarioSummary(job: "event-notify", dryRun: false, reasonOrder: processor.reasonOrder)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            let batch = try processor.processBatch(on: connection, runID: runID, now: Date(), logger: logger, summary: &summary)
            if batch.processed == 0 && batch.heldBack == 0 { return }
            if batch.processed == 0 { usleep(20_000) }
        }
        Issue.record("events still pending after 5 s")
    }

    /// The coordinator's notices about the pause, their bodies.
    func notices() throws -> [String] {
        try f.inbox(coordinator).filter { $0.category == "availability_change" }.map(\.body)
    }

    /// Saves the pause, then drains with its end moved from 10 to 20 days when a batch first reaches `stage`;
    /// the coordinator must have one notice, naming the new end, and nothing must be left pending.
    func changeThePauseWhenABatchReaches(_ stage: EventProcessor.BatchStage) throws {
        try savePause(endsInDays: 10)
        let connection = try db.connect()
        let run = try runID(connection)
        var first = processor()
        var moved = false
        first.reached = { reached in
            guard reached == stage, !moved else { return }
            moved = true
            try movePauseEnd(toDays: 20)
        }
        try drain(first, on: connection, runID: run)
        #expect(moved)
        let bodies = try notices()
        #expect(bodies.count == 1, "\(bodies)")
        #expect(bodies.allSatisfy { $0.contains("til \(dateText(inDays: 20))") }, "\(bodies)")
        #expect(try f.connection.query("SELECT count(*) FROM events WHERE processed_at IS NULL").first!.decode(0) as Int == 0)
    }

    /// The change is saved after the batch claimed the start and before it read the pause: the start's notice
    /// names the new end, and the change is not announced again with the same dates (before: two notices).
    @Test func aChangeSavedWhileItsStartIsDecidedIsNotAnnouncedTwice() throws {
        try changeThePauseWhenABatchReaches(.claimed)
    }

    /// The change is saved after the batch took the pause's pending events and before it read the pause: the batch
    /// is made again with the change (before: the start named the new end, and the change did again).
    @Test func aChangeSavedAfterTheBatchTookThePausesEventsIsNotAnnouncedTwice() throws {
        try changeThePauseWhenABatchReaches(.admitted)
    }

    /// Two processes: one has decided the start with the old end and not committed; the change is saved and the
    /// other process takes it. The coordinator must end up told the new end (before: the other process suppressed
    /// the change as announced with its start, and the start named the old end).
    @Test func aChangeTakenByAnotherProcessWhileItsStartIsDecidedReachesTheCoordinator() throws {
        try savePause(endsInDays: 10)
        let connection = try db.connect(), other = try db.connect()
        let run = try runID(connection), otherRun = try runID(other)
        let second = processor()
        var first = processor()
        var otherBatches: [BatchOutcome] = []
        first.reached = { stage in
            guard stage == .decided, otherBatches.isEmpty else { return }
            try movePauseEnd(toDays: 20)
            var summary = ScenarioSummary(job: "event-notify", dryRun: false, reasonOrder: second.reasonOrder)
            otherBatches.append(try second.processBatch(on: other, runID: otherRun, now: Date(), logger: logger, summary: &summary))
        }
        try drain(first, on: connection, runID: run)
        try drain(second, on: other, runID: otherRun)
        // The other process held the change back: its pause's start was this one's.
        #expect(otherBatches == [BatchOutcome(processed: 0, heldBack: 1)])
        let bodies = try notices()
        #expect(bodies.last?.contains("til \(dateText(inDays: 20))") == true, "\(bodies)")
        #expect(!bodies.contains { $0.contains(dateText(inDays: 10)) }, "the old end was never announced: \(bodies)")
        #expect(bodies.count == 1, "\(bodies)")
    }

    /// A session holds a pause's start locked and does not let go (left idle in a transaction): `--once` takes
    /// every other event, even those behind the pause's change with a batch of one, and ends within seconds,
    /// 75, saying what stays pending; once the lock is gone, the pause is decided whole. Before: `--once` waited
    /// as long as the lock was held, and with batches of one took the held change again and again and never the
    /// events behind it.
    @Test func aPauseAnotherSessionHoldsDoesNotStopTheOthersOrTheRun() throws {
        try savePause(endsInDays: 10)
        try movePauseEnd(toDays: 20)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        let other = try f.user(org, "Svein", role: "coordinator")
        try f.device(other)
        try f.scope(org, coordinator: other, mentor: ola)
        try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at) VALUES (\(ola), now() + interval '1 day')")
        let holder = try db.connect()
        try holder.execute("BEGIN")
        try holder.execute("SELECT id FROM events WHERE kind = 'pause_started' AND mentor_id = \(mentor) FOR UPDATE")
        let started = Date()
        let result = try Jobs.run("event-notify", ["--once", "--batch-size", "1"], database: db)
        let took = Date().timeIntervalSince(started)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(result.stderr.contains("stay pending: another session has held some of them locked"), "\(result.stderr)")
        #expect(took < 30, "ended though the lock is still held (\(took) s)")
        #expect(try f.inbox(other).count == 1, "Ola's pause, behind Kari's held change, was announced")
        #expect(try notices().isEmpty)
        try holder.execute("ROLLBACK")
        let again = try Jobs.run("event-notify", ["--once", "--batch-size", "1"], database: db)
        #expect(again.status == 0, "\(again.stderr)")
        let bodies = try notices()
        #expect(bodies.count == 1 && bodies[0].contains("til \(dateText(inDays: 20))"), "the start names the new end, once: \(bodies)")
    }

    /// The same, while other events keep coming (a pause saved every second for 9 s): the held pause is said after
    /// 5 s, and `--once` ends the first time only it is left after that. Before: each batch that took an event
    /// started the 5 s again, so nothing was said until 5 s after the last event.
    @Test func aPauseHeldWhileOtherEventsKeepComingIsSaidAfterFiveSeconds() throws {
        try savePause(endsInDays: 10)
        try movePauseEnd(toDays: 20)
        let holder = try db.connect()
        try holder.execute("BEGIN")
        try holder.execute("SELECT id FROM events WHERE kind = 'pause_started' AND mentor_id = \(mentor) FOR UPDATE")
        let others = try (0..<9).map { try f.mentor(org, "Ola \($0)", lastActivityDaysAgo: 1) }
        let database = db
        let done = DispatchSemaphore(value: 0)
        let trickle = Thread {
            defer { done.signal() }
            guard let app = try? database.connect() else { return }
            for ola in others {
                Thread.sleep(forTimeInterval: 1)
                _ = try? app.execute("INSERT INTO availability_pauses (mentor_id, starts_at) VALUES (\(ola), now() + interval '1 day')")
            }
        }
        let started = Date()
        trickle.start()
        let result = try Jobs.run("event-notify", ["--once", "--batch-size", "1"], database: db)
        let took = Date().timeIntervalSince(started)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(result.stderr.contains("stay pending: another session has held some of them locked"), "\(result.stderr)")
        #expect(took < 12.5, "ended once only the held pause was left, not 5 s after the last event (\(took) s)")
        done.wait()
        let pending: [String] = try f.connection.query("""
            SELECT u.display_name FROM events e JOIN users u ON u.id = e.mentor_id WHERE e.processed_at IS NULL ORDER BY e.id
            """).map { try $0.decode(0) }
        #expect(Array(pending.prefix(2)) == ["Kari", "Kari"], "the held pause's two events, then what came after the run: \(pending)")
        let decided: Int = try f.connection.query("SELECT count(*) FROM events WHERE processed_at IS NOT NULL AND mentor_id <> \(mentor)").first!.decode(0)
        #expect(decided >= 4, "the pauses saved in its first 5 s were decided: \(decided)")
        try holder.execute("ROLLBACK")
    }

    /// An event of a pause that cannot be read sets the pause's other pending events aside with it, and the others
    /// go on (65). Handed back once fixed, they are decided together: a pause called off before its start was
    /// announced is nobody's news. Before, the start was decided alone and the call-off after it, on its own:
    /// the coordinator was told of a call-off of a pause never announced.
    @Test func aPauseWithAnEventThatCannotBeReadIsSetAsideWhole() throws {
        try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at) VALUES (\(mentor), now() + interval '2 days')")
        try f.connection.execute("DELETE FROM availability_pauses WHERE mentor_id = \(mentor)")
        try f.connection.execute("""
            INSERT INTO events (kind, mentor_id, subject_id, payload)
            SELECT 'pause_withdrawn', mentor_id, subject_id, '{"starts_at": "not a time"}' FROM events WHERE kind = 'pause_started'
            """)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        let other = try f.user(org, "Svein", role: "coordinator")
        try f.device(other)
        try f.scope(org, coordinator: other, mentor: ola)
        try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at) VALUES (\(ola), now() + interval '1 day')")
        let result = try Jobs.run("event-notify", ["--once"], database: db)
        #expect(result.status == 65, "\(result.stderr)")
        let setAside: [String] = try f.connection.query("""
            SELECT kind FROM events WHERE mentor_id = \(mentor) AND error IS NOT NULL AND processed_at IS NOT NULL ORDER BY id
            """).map { try $0.decode(0) }
        #expect(setAside == ["pause_started", "pause_withdrawn", "pause_withdrawn"], "\(setAside)")
        #expect(try f.inbox(other).count == 1, "Ola's pause went on")
        #expect(try notices().isEmpty)
        // Fixed (the bad row deleted) and handed back: decided together.
        try f.connection.execute("DELETE FROM events WHERE payload->>'starts_at' = 'not a time'")
        try f.connection.execute("UPDATE events SET processed_at = NULL, error = NULL WHERE error IS NOT NULL")
        let again = try Jobs.run("event-notify", ["--once"], database: db)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try notices().isEmpty, "called off before it was announced: nobody's news")
        #expect(try f.connection.query("SELECT count(*) FROM events WHERE processed_at IS NULL OR error IS NOT NULL").first!.decode(0) as Int == 0)
    }

    /// A change saved after its start's batch committed is announced on its own: the start did not see it.
    @Test func aChangeSavedAfterItsStartWasAnnouncedIsAnnounced() throws {
        try savePause(endsInDays: 10)
        let connection = try db.connect()
        let run = try runID(connection)
        try drain(processor(), on: connection, runID: run)
        try movePauseEnd(toDays: 20)
        try drain(processor(), on: connection, runID: run)
        let bodies = try notices()
        #expect(bodies.count == 2, "\(bodies)")
        #expect(bodies.first?.contains("til \(dateText(inDays: 10))") == true, "\(bodies)")
        #expect(bodies.last?.contains("endret pausen") == true && bodies.last?.contains("til \(dateText(inDays: 20))") == true, "\(bodies)")
    }
}
