import Foundation
import Postgres
import Testing
import TestSupport

/// SIGTERM while a scenario job is still deciding: what it decided is recorded, the run is `stopped`,
/// the process ends by the signal, and the next run does the rest without repeating anyone.
@Suite struct StopTests {
    @Test func sigtermWhileDecidingRecordsWhatWasDecidedAndTheNextRunDoesTheRest() throws {
        let db = try TestCluster.shared().makeDatabase()
        let f = try Fixtures(db)
        let org = try f.organization("Big")
        let count = 60_000
        // Mentors who joined long ago and never logged an activity: every one is a candidate.
        try f.connection.execute("""
            INSERT INTO users (organization_id, role, display_name, joined_at)
            SELECT \(org), 'peer_mentor', 'Mentor ' || i, \(f.daysAgo(400)) FROM generate_series(1, \(count)) AS i
            """)
        let running = try ProcessRunner.start(Paths.executable("inactivity-check"), ["--database-url", db.url, "--now", Jobs.iso(f.now)])
        func stored() throws -> Int { try f.connection.query("SELECT count(*) FROM notifications").first!.decode(0) }
        let deadline = Date().addingTimeInterval(30)
        while try stored() == 0 && Date() < deadline { usleep(10_000) }
        kill(running.pid, SIGTERM)
        let result = try running.wait()

        #expect(result.signal == SIGTERM, "stderr: \(result.stderr)")
        #expect(result.summary?["outcome"] as? String == "stopped")
        #expect(result.summary?["stopped_by"] as? String == "SIGTERM")
        #expect(result.summary?["exit_code"] as? Int == 143)
        let recorded = try stored()
        #expect(recorded > 0 && recorded < count, "stopped mid-stream: \(recorded) of \(count)")
        #expect(result.summary?["inbox_rows"] as? Int == recorded, "everything decided before the stop is recorded, nothing after")
        let run = try #require(try f.connection.query("SELECT outcome, (counts->>'inbox_rows')::int FROM job_runs").first)
        #expect(try run.decode(0, as: String.self) == "stopped")
        #expect(try run.decode(1, as: Int.self) == recorded)

        let again = try Jobs.inactivityCheck(db, now: f.now)
        #expect(again.status == 0, "stderr: \(again.stderr)")
        #expect(again.summary?["inbox_rows"] as? Int == count - recorded)
        #expect(try stored() == count, "each mentor reminded once")
    }
}
