import FakePush
import Foundation
import Postgres
import Testing
import TestSupport

/// A device token is input from outside: apps and databases get rows that are not what Apple or Google
/// issued. The database refuses them when written; rows written before that rule are retired by
/// push-deliver, each alone and unsent, and never stop the provider or send anything elsewhere.
@Suite struct HostileTokenTests {
    let db: TestDatabase
    let f: Fixtures
    let push: PushEnvironment

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        push = try PushEnvironment()
    }

    static let hostile: [(provider: String, token: String)] = [
        ("apns", "../../v1/projects/demo-project/messages:send?x=1"),
        ("apns", String(repeating: "ab", count: 32) + "\r\nx-evil: 1"),
        ("apns", String(repeating: "ab", count: 32) + " " + String(repeating: "cd", count: 32)),
        ("apns", String(repeating: "ab", count: 31)),
        ("fcm", "tok en with spaces and enough characters"),
        ("fcm", "../../3/device/" + String(repeating: "ab", count: 32)),
        ("fcm", String(repeating: "x", count: 40) + "\u{1b}[2J"),
    ]

    @Test func theDatabaseRefusesAMalformedToken() throws {
        let user = try f.mentor(try f.organization("Org"), "Kari", lastActivityDaysAgo: 1, devices: 0)
        for (provider, token) in Self.hostile {
            #expect(throws: PostgresError.self, "\(provider) \(token.debugDescription) was stored") {
                try f.connection.execute("""
                    INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id)
                    VALUES (\(user), \(provider), \(token), \(provider == "apns" ? "production" : nil), 'no.likeperson.app')
                    """)
            }
        }
        try f.device(user, provider: "apns")
        try f.device(user, provider: "fcm")
        #expect(try f.count("device_tokens") == 2, "well-formed tokens are stored")
    }

    @Test func aTokensProviderNeverChanges() throws {
        // The outbox's queue keeps a copy of it: a token that moved to another provider would be sent there.
        let user = try f.mentor(try f.organization("Org"), "Kari", lastActivityDaysAgo: 1, devices: 0)
        let device = try f.device(user, provider: "fcm")
        #expect(throws: PostgresError.self) {
            try f.connection.execute("UPDATE device_tokens SET provider = 'expo' WHERE id = \(device.id)")
        }
        try f.connection.execute("UPDATE device_tokens SET last_seen_at = now(), provider = 'fcm' WHERE id = \(device.id)")
        #expect(try f.connection.query("SELECT provider FROM device_tokens").first!.decode(0, as: String.self) == "fcm")
    }

    @Test func rowsWrittenBeforeTheRuleAreRetiredAloneAndNeverSent() throws {
        // As if written before migration 0005: the rule is put back afterwards as the schema has it, NOT VALID
        // (old rows are not checked when it is added, but every later version of them is: the retirement's too).
        let rule: String = try f.connection.query("""
            SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'device_tokens_token_format'
            """).first!.decode(0)
        #expect(rule.hasSuffix("NOT VALID"))
        try f.connection.execute("ALTER TABLE device_tokens DROP CONSTRAINT device_tokens_token_format")
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        let iphone = try f.device(kari, provider: "apns")
        let android = try f.device(kari, provider: "fcm")
        for (provider, token) in Self.hostile {
            try f.connection.execute("""
                INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id)
                VALUES (\(kari), \(provider), \(token), \(provider == "apns" ? "production" : nil), 'no.likeperson.app')
                """)
        }
        try f.connection.runScript("ALTER TABLE device_tokens ADD CONSTRAINT device_tokens_token_format " + rule)
        let check = try Jobs.inactivityCheck(db, now: f.now)
        #expect(check.status == 0, "stderr: \(check.stderr)")
        #expect(try f.count("deliveries") == 2 + Self.hostile.count)
        // The dry run says so too (it listed them as SEND).
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        let lines = plan.stdout.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("RETIRE ") && $0.contains("retire the token: malformed token: ") }.count == Self.hostile.count, "\(plan.stdout)")
        #expect(lines.filter { $0.hasPrefix("SEND ") }.count == 2, "\(plan.stdout)")
        #expect(!plan.stdout.unicodeScalars.contains { $0.value == 0x1B }, "a token's tail is shown escaped")

        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "a malformed token never stops a provider: \(result.stderr)")
        let requests = push.server.requests().filter { $0.provider != .oauth }
        #expect(requests.compactMap(\.deviceToken).sorted() == [iphone.token, android.token].sorted(), "only the real tokens were sent")
        #expect(requests.allSatisfy { $0.path.hasPrefix("/3/device/") || $0.path.hasSuffix("/messages:send") })

        let rows = try f.connection.query("""
            SELECT t.token, t.retired_reason, d.state, d.attempts
              FROM device_tokens t JOIN deliveries d ON d.device_token_id = t.id ORDER BY t.id
            """)
        for row in rows {
            let token: String = try row.decode(0)
            let reason = try row.decode(1, as: String?.self)
            let state: String = try row.decode(2)
            let attempts: Int = try row.decode(3)
            if token == iphone.token || token == android.token {
                #expect(state == "sent" && reason == nil)
            } else {
                #expect(state == "failed", "\(token.debugDescription)")
                #expect(attempts == 0, "nothing was sent: no attempt counted")
                #expect(reason?.hasPrefix("malformed token: ") == true, "\(String(describing: reason))")
            }
        }
        #expect(!result.stderr.contains("../../"), "the log never quotes a token whole")

        let again = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(again.status == 0)
        #expect(push.server.requests().filter { $0.provider != .oauth }.count == 2, "nothing is sent twice, nothing retried")
    }
}
