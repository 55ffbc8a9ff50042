@testable import Delivery
import FakePush
import Foundation
import HTTP2
import Logging
import Postgres
import Push
import Testing
import TestSupport

/// An outcome is written only while the claim on its row still holds: an engine whose lease ran out
/// (and whose row another engine claimed) cannot overwrite the new owner's work, except to record a
/// push that really went out; and nothing overwrites a delivery once it is sent.
@Suite struct ClaimFencingTests {
    @Test func aLateOutcomeForADeliveryClaimedAgainIsNotWritten() throws {
        let db = try TestCluster.shared().makeDatabase()
        let f = try Fixtures(db, now: Date())
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        try f.device(kari, provider: "apns")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)

        let engine = OutboxEngine(connection: f.connection, providers: [:], client: try HTTP2Client(HTTP2Client.Configuration()),
                                  maxAttempts: 5, logger: Logger(label: "test"))
        let claimed = try #require(try engine.claim(scope: .all, providers: [.apns]).first)
        // Our lease ran out and another engine claimed the row.
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() + interval '5 minutes'")
        func row() throws -> (state: String, attempts: Int, events: Int) {
            let r = try #require(try f.connection.query("""
                SELECT state, attempts, (SELECT count(*) FROM delivery_events)::int FROM deliveries
                """).first)
            return (try r.decode(0), try r.decode(1), try r.decode(2))
        }

        let recorder = OutcomeRecorder(connection: f.connection)
        recorder.settle(claimed, state: "retrying", event: "retried", error: "503", status: 503, attempts: 1, nextAttempt: Date().addingTimeInterval(60))
        recorder.release(claimed)
        _ = try recorder.flush()
        #expect(try row() == ("pending", 0, 0), "the stale engine's retry and release are not written")

        recorder.settle(claimed, state: "sent", event: "sent", error: nil, status: 200, messageID: "id", attempts: 1)
        _ = try recorder.flush()
        #expect(try row() == ("sent", 1, 1), "a push that went out is recorded even after a lost claim")

        recorder.settle(claimed, state: "retrying", event: "retried", error: "503", status: 503, attempts: 2, nextAttempt: Date())
        recorder.release(claimed)
        _ = try recorder.flush()
        #expect(try row() == ("sent", 1, 1), "nothing reopens a sent delivery")
    }
}
