import FakePush
import Foundation
import Postgres
import Testing
import TestSupport

/// `why` end to end: a user's history made by the real jobs (inactivity-check, then push-deliver against
/// the local fake APNs/FCM), and what the operator then reads, as text and as JSON.
@Suite struct WhyTests {
    let db: TestDatabase
    let f: Fixtures

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        // An hour ago: a later real run (the history's second) may not be ahead of the clock.
        f = try Fixtures(db, now: Date().addingTimeInterval(-3_600))
    }

    /// Kari's history: reminded once (an iPhone whose token APNs calls Unregistered, an Android phone that
    /// gets a 503 first and the push on the second attempt), then a run an hour later that suppresses
    /// her as already notified. Her organization has its own threshold and switched follow-ups off; she
    /// switched the overdue digest off.
    struct History {
        var kari: UUID
        var iphone: Fixtures.Device
        var android: Fixtures.Device
    }

    func history() throws -> History {
        let push = try PushEnvironment()
        let org = try f.organization("Hjelpelinjen")
        try f.rule(org, settings: #"{"threshold_days": 10}"#)
        try f.rule(org, scenario: "assignment_follow_up", enabled: false)
        let kari = try f.mentor(org, "Kari Nordmann", lastActivityDaysAgo: 20, devices: 0)
        let iphone = try f.device(kari, provider: "apns")
        let android = try f.device(kari, provider: "fcm")
        try f.categoryOff(kari, "overdue_digest")

        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        push.server.setToken(iphone.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 60_000))
        push.server.inject(.status503(retryAfter: nil), provider: .fcm)
        let first = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        try f.makeDue(where: "d.state = 'retrying'")
        let second = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(try Jobs.inactivityCheck(db, now: Date()).status == 0)
        #expect(try f.decisions(kari) == ["notified:notified", "suppressed:already_notified"])
        return History(kari: kari, iphone: iphone, android: android)
    }

    func why(_ arguments: [String]) throws -> ProcessRunner.Result {
        try Jobs.run("why", arguments, database: db)
    }

    /// Outside text reaches the operator's terminal escaped: a name with an escape sequence and a
    /// right-to-left override cannot clear or rewrite the screen. And a notification kept from the push
    /// by its channel says so, not "no active device" while a device is listed above it.
    @Test func outsideTextIsEscapedAndANotificationWithoutAPushSaysWhy() throws {
        let org = try f.organization("Org")
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivity', 'inbox_only')")
        let kari = try f.mentor(org, "Kari\u{1b}[2J\u{202e}nordmann", lastActivityDaysAgo: 20)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let result = try why([kari.uuidString])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(!result.stdout.contains("\u{1b}") && !result.stdout.contains("\u{202e}"), "\(result.stdout)")
        #expect(result.stdout.contains(#"Kari\u{1b}[2J\u{202e}nordmann"#), "shown escaped: \(result.stdout)")
        #expect(!result.stdout.contains("no active device"), "\(result.stdout)")
        #expect(result.stdout.contains("no delivery: inbox_only_channel"), "\(result.stdout)")
    }

    /// The delivery policy in force, with whose each part is: the organization's quiet hours, the user's own
    /// lower cap, the critical categories, and the channels that are not push and inbox.
    /// A time zone the jobs do not know (a row written before 0016 refused them) is said, with what the jobs do
    /// instead: the header showed "time zone Mars/Olympus" and the policy line Europe/Oslo, without a word.
    @Test func anUnknownTimeZoneIsSaidWithWhatTheJobsDoInstead() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let other = try f.organization("Other")
        let ola = try f.mentor(other, "Ola", lastActivityDaysAgo: 20)
        try f.connection.execute("ALTER TABLE users DROP CONSTRAINT users_time_zone_known")
        try f.connection.execute("ALTER TABLE organizations DROP CONSTRAINT organizations_time_zone_known")
        try f.connection.execute("UPDATE users SET time_zone = 'Mars/Olympus' WHERE id = \(kari)")
        try f.connection.execute("UPDATE organizations SET time_zone = 'Europe/Osloo' WHERE id = \(other)")
        let text = try why([kari.uuidString])
        #expect(text.status == 0, "stderr: \(text.stderr)")
        #expect(text.stdout.contains("UNKNOWN TIME ZONE Mars/Olympus: the jobs use Europe/Oslo instead and exit 65; fix users.time_zone"), "\(text.stdout)")
        let orgText = try why([ola.uuidString])
        #expect(orgText.stdout.contains("UNKNOWN TIME ZONE Europe/Osloo of the organization: the scheduled jobs skip the organization (exit 78)"), "\(orgText.stdout)")
        let json = try why([kari.uuidString, "--format", "json"])
        let first = try #require(json.stdout.split(separator: "\n").first)
        let user = try #require((try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])?["user"] as? [String: Any])
        #expect(user["time_zone_known"] as? Bool == false, "\(first)")
        // Both unknown: the organization is skipped, so the user's zone is never used: not said to be.
        let nils = try f.mentor(other, "Nils", lastActivityDaysAgo: 20)
        try f.connection.execute("UPDATE users SET time_zone = 'Mars/Olympus' WHERE id = \(nils)")
        let both = try why([nils.uuidString])
        #expect(both.stdout.contains("UNKNOWN TIME ZONE Europe/Osloo of the organization") && !both.stdout.contains("UNKNOWN TIME ZONE Mars/Olympus"), "\(both.stdout)")
        // Said only when it is so.
        let plain = try why([try f.mentor(org, "Per", lastActivityDaysAgo: 20).uuidString])
        #expect(!plain.stdout.contains("UNKNOWN"), "\(plain.stdout)")
    }

    @Test func theDeliveryPolicyInForceIsShownWithWhoseItIs() throws {
        let org = try f.organization("Org")
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end, daily_push_cap, critical_categories)
            VALUES (\(org), '22:00', '07:00', 3, '{new_assignment}')
            """)
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivity', 'inbox_only')")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, daily_push_cap) VALUES (\(kari), 1)")
        let text = try why([kari.uuidString])
        #expect(text.status == 0, "stderr: \(text.stderr)")
        // The window is in the user's zone (here the organization's), the times of the story below in UTC: said.
        #expect(text.stdout.contains("Delivery policy: quiet hours 22:00–07:00 Europe/Oslo (the organization's; pushes inside wait for the end; the times below are UTC); daily cap 1 non-critical push (the user's own); critical: new_assignment; inactivity: the organization's inbox_only"), "\(text.stdout)")
        let json = try why([kari.uuidString, "--format", "json"])
        let first = try #require(json.stdout.split(separator: "\n").first, "the report is the first line")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        let policy = try #require(report["delivery_policy"] as? [String: Any], "\(json.stdout)")
        #expect((policy["quiet_hours"] as? [String: Any])?["source"] as? String == "organization")
        #expect((policy["quiet_hours"] as? [String: Any])?["time_zone"] as? String == "Europe/Oslo")
        #expect((policy["daily_cap"] as? [String: Any])?["cap"] as? Int == 1)
        #expect((policy["daily_cap"] as? [String: Any])?["source"] as? String == "user")
        #expect(policy["critical_categories"] as? [String] == ["new_assignment"])
        #expect((policy["channels"] as? [[String: Any]])?.first?["organization"] as? String == "inbox_only")
    }

    @Test func textTellsTheWholeStoryInOrderAndWritesNothing() throws {
        let h = try history()
        let before = try f.fingerprint()
        let result = try why([h.kari.uuidString])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try f.fingerprint() == before, "why writes nothing")
        let text = result.stdout

        #expect(text.contains("Kari Nordmann, peer_mentor in \"Hjelpelinjen\""))
        #expect(text.contains("master switch on; categories OFF: overdue_digest"))
        #expect(text.contains(#"inactivity            on   {"threshold_days": 10}  (organization's row"#), "\(text)")
        #expect(text.contains("assignment_follow_up  OFF"))
        #expect(text.contains("RETIRED"))
        #expect(text.contains("…\(h.iphone.token.suffix(6))"))
        #expect(text.contains(": RETIRED") && text.contains("Unregistered"))

        // decision → notification → deliveries → events, in that order.
        let decision = try #require(text.range(of: "inactivity-check): notified: notified"))
        let failed = try #require(text.range(of: "apns …\(h.iphone.token.suffix(6)) (production): FAILED"))
        let fcm = try #require(text.range(of: "fcm …\(h.android.token.suffix(6)): SENT"))
        let retried = try #require(text.range(of: "retried   attempt 1  HTTP 503"))
        let sent = try #require(text.range(of: "sent      attempt 2"))
        let suppressed = try #require(text.range(of: "inactivity  suppressed: already_notified — "))
        #expect(decision.lowerBound < failed.lowerBound)
        #expect(fcm.lowerBound < retried.lowerBound && retried.lowerBound < sent.lowerBound)
        #expect(sent.lowerBound < suppressed.lowerBound)
        #expect(text.contains("2 attempts"))
        #expect(text.contains("last error: device token retired: Unregistered"))

        for token in [h.iphone.token, h.android.token] {
            #expect(!result.stdout.contains(token) && !result.stderr.contains(token), "a whole device token was printed")
        }
        let summary = try #require(result.summary)
        #expect(summary["job"] as? String == "why")
        #expect(summary["exit_code"] as? Int == 0)
        #expect(summary["run_id"] is NSNull, "why leaves no job_runs row")
        #expect(summary["decisions"] as? Int == 2)
        #expect(summary["deliveries"] as? Int == 2)
    }

    @Test func jsonHoldsTheSameFacts() throws {
        let h = try history()
        let before = try f.fingerprint()
        let result = try why([h.kari.uuidString, "--format", "json"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try f.fingerprint() == before)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2, "the report, then the summary line")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])

        let decisions = try #require(report["decisions"] as? [[String: Any]])
        #expect(decisions.map { "\($0["outcome"]!):\($0["reason"]!)" } == ["notified:notified", "suppressed:already_notified"])
        #expect((decisions[1]["detail"] as? String)?.isEmpty == false)
        let notifications = try #require(report["notifications"] as? [[String: Any]])
        #expect(notifications.count == 1)
        #expect(notifications[0]["scenario"] as? String == "inactivity")
        #expect(notifications[0]["decision_ids"] as? [Int] == [decisions[0]["id"] as! Int])
        let deliveries = try #require(notifications[0]["deliveries"] as? [[String: Any]])
        let byProvider = Dictionary(uniqueKeysWithValues: deliveries.map { ($0["provider"] as! String, $0) })
        let apns = try #require(byProvider["apns"])
        let fcm = try #require(byProvider["fcm"])
        #expect(apns["state"] as? String == "failed")
        #expect(apns["token"] as? String == "…" + h.iphone.token.suffix(6))
        #expect(fcm["state"] as? String == "sent")
        #expect(fcm["attempts"] as? Int == 2)
        let fcmEvents = try #require(fcm["events"] as? [[String: Any]])
        #expect(fcmEvents.map { $0["event"] as? String } == ["retried", "sent"])
        #expect(fcmEvents.first?["provider_status"] as? Int == 503)
        let apnsEvents = try #require(apns["events"] as? [[String: Any]])
        #expect(apnsEvents.contains { $0["event"] as? String == "retired" })

        let devices = try #require(report["devices"] as? [[String: Any]])
        let retired = try #require(devices.first { $0["state"] as? String == "retired" })
        #expect(retired["retired_reason"] as? String == "Unregistered")
        #expect(retired["token"] as? String == "…" + h.iphone.token.suffix(6))
        let preferences = try #require(report["preferences"] as? [String: Any])
        #expect(preferences["row"] as? Bool == true)
        #expect(preferences["categories_off"] as? [String] == ["overdue_digest"])
        let rules = try #require(report["rules"] as? [[String: Any]])
        let inactivity = try #require(rules.first { $0["scenario"] as? String == "inactivity" })
        #expect((inactivity["settings"] as? [String: Any])?["threshold_days"] as? Int == 10)
        #expect(inactivity["source"] as? String == "organization")
        #expect(rules.first { $0["scenario"] as? String == "assignment_follow_up" }?["enabled"] as? Bool == false)

        for token in [h.iphone.token, h.android.token] { #expect(!result.stdout.contains(token)) }
        #expect(result.summary?["notifications"] as? Int == 1)
    }

    @Test func scenarioAndSinceFilter() throws {
        let org = try f.organization("Org")
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 60, devices: 0)
        // Reminded 30 days ago, suppressed 20 days ago, reminded again today (another full threshold later).
        for daysAgo in [30.0, 20, 0] {
            #expect(try Jobs.inactivityCheck(db, now: f.daysAgo(daysAgo)).status == 0)
        }
        try f.connection.execute("""
            INSERT INTO decisions (job_run_id, scenario, user_id, outcome, reason, detail, decided_at)
            SELECT max(id), 'assignment_follow_up', \(ola), 'suppressed', 'paused', 'paused since yesterday', now() FROM job_runs
            """)
        #expect(try f.decisions(ola) == ["notified:inbox_only_no_device", "suppressed:already_notified", "notified:inbox_only_no_device", "suppressed:paused"])

        func report(_ extra: [String]) throws -> [String: Any] {
            let result = try why([ola.uuidString, "--format", "json"] + extra)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            let line = try #require(result.stdout.split(separator: "\n").first)
            return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        func reasons(_ report: [String: Any]) -> [String] {
            (report["decisions"] as? [[String: Any]] ?? []).map { "\($0["scenario"]!):\($0["reason"]!)" }
        }
        func notificationCount(_ report: [String: Any]) -> Int { (report["notifications"] as? [Any])?.count ?? -1 }

        let all = try report([])
        #expect(reasons(all).count == 4)
        #expect(notificationCount(all) == 2)

        let followUps = try report(["--scenario", "assignment_follow_up"])
        #expect(reasons(followUps) == ["assignment_follow_up:paused"])
        #expect(notificationCount(followUps) == 0)
        #expect((followUps["rules"] as? [[String: Any]])?.map { $0["scenario"] as? String } == ["assignment_follow_up"])

        let inactivity = try report(["--scenario", "inactivity"])
        #expect(reasons(inactivity) == ["inactivity:inbox_only_no_device", "inactivity:already_notified", "inactivity:inbox_only_no_device"])
        #expect(notificationCount(inactivity) == 2)

        let recent = try report(["--scenario", "inactivity", "--since", Jobs.iso(f.daysAgo(25))])
        #expect(reasons(recent) == ["inactivity:already_notified", "inactivity:inbox_only_no_device"])
        #expect(notificationCount(recent) == 1)

        let text = try why([ola.uuidString, "--since", Jobs.iso(f.daysAgo(25))]).stdout
        #expect(text.contains("since \(Jobs.iso(f.daysAgo(25)))"))
        #expect(text.contains("Notifications (1):"))
        #expect(text.contains("no delivery: inbox_only_no_device (its decision above)"), "\(text)")
    }

    @Test func aUserThatDoesNotExistExits64AndSaysSo() throws {
        let missing = "00000000-0000-4000-8000-000000000999"
        let result = try why([missing])
        #expect(result.status == 64)
        #expect(result.stderr.contains("no such user: \(missing)"))
        #expect(result.summary?["exit_code"] as? Int == 64)
    }

    @Test(arguments: [["not-a-uuid"], [], ["00000000-0000-4000-8000-000000000001", "--since", "yesterday"],
                      ["00000000-0000-4000-8000-000000000001", "--format", "xml"]])
    func badFlagsExit64(arguments: [String]) throws {
        let result = try why(arguments)
        #expect(result.status == 64, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("Error:"))
    }

    @Test func anUnknownScenarioExits64AndListsTheScenarios() throws {
        let org = try f.organization("Org")
        let user = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        let result = try why([user.uuidString, "--scenario", "inactivty"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--scenario inactivty: no such scenario"))
        #expect(result.stderr.contains("inactivity"))
    }

    @Test func aPushStillQueuedShowsWhenItIsDueAndWhoseClaimHoldsIt() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        try f.device(kari, provider: "apns")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let waiting = try why([kari.uuidString])
        #expect(waiting.stdout.contains(": PENDING, due "), "\(waiting.stdout)")
        #expect(!waiting.stdout.contains("claimed by"))

        let until: Date = try f.connection.query("UPDATE delivery_queue SET lease_until = date_trunc('second', now()) + interval '5 minutes' RETURNING lease_until").first!.decode(0)
        let claimed = try why([kari.uuidString])
        #expect(claimed.stdout.contains("0 attempts so far, claimed by a push-deliver run until \(Jobs.iso(until))"), "\(claimed.stdout)")
        let json = try why([kari.uuidString, "--format", "json"])
        #expect(json.stdout.contains(#""claimed_until":"\#(Jobs.iso(until))""#), "\(json.stdout)")

        // Long due, held by a claim: not overdue, push-deliver has it.
        try f.connection.execute("UPDATE delivery_queue SET next_attempt_at = now() - interval '20 minutes'")
        #expect(try !why([kari.uuidString]).stdout.contains("OVERDUE"))
        // The claim of a run that crashed ran out: nothing holds the push, and it is overdue.
        let ranOut: Date = try f.connection.query("UPDATE delivery_queue SET lease_until = date_trunc('second', now()) - interval '10 minutes' RETURNING lease_until").first!.decode(0)
        let stranded = try why([kari.uuidString])
        #expect(stranded.stdout.contains("its claim by a push-deliver run ran out at \(Jobs.iso(ranOut))"), "\(stranded.stdout)")
        #expect(stranded.stdout.contains("OVERDUE: no push-deliver run is on record"), "\(stranded.stdout)")
    }

    /// A push long past its time and not claimed: why is it still waiting? The last push-deliver run says (its
    /// outcome and error), or there is none on record (no timer installed). It said only "PENDING, due <past>".
    @Test func aPushLongOverdueSaysWhatTheLastPushDeliverRunSaid() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        try f.device(kari, provider: "apns")
        #expect(try Jobs.inactivityCheck(db, now: Date()).status == 0) // a run as of now: due now (f.now is an hour ago)
        let fresh = try why([kari.uuidString])
        #expect(!fresh.stdout.contains("OVERDUE"), "due just now: \(fresh.stdout)")
        try f.connection.execute("UPDATE delivery_queue SET next_attempt_at = now() - interval '20 minutes'")
        let none = try why([kari.uuidString])
        #expect(none.stdout.contains("OVERDUE: no push-deliver run is on record"), "\(none.stdout)")
        // A push-deliver run that could not use APNs (no key configured for it: 78).
        let failed = try Jobs.run("push-deliver", [], database: db, environment: ["APNS_KEY_FILE": "/nonexistent/AuthKey.p8"])
        #expect(failed.status == 78)
        let told = try why([kari.uuidString])
        #expect(told.stdout.contains("OVERDUE: the last push-deliver run (") && told.stdout.contains("ended failed: APNS_"), "\(told.stdout)")
        let json = try why([kari.uuidString, "--format", "json"])
        #expect(json.stdout.contains(#""overdue":"the last push-deliver run ("#), "\(json.stdout)")
    }

    @Test func aUserWithNoHistoryGetsAPlainAnswer() throws {
        let org = try f.organization("Org")
        let user = try f.mentor(org, "Newcomer", lastActivityDaysAgo: 1, devices: 0)
        let result = try why([user.uuidString])
        #expect(result.status == 0)
        #expect(result.stdout.contains("Preferences: no row in push_notification_configs: everything on"))
        #expect(result.stdout.contains("none registered: notifications go to the inbox only"))
        #expect(result.stdout.contains("Notifications (0):"))
        #expect(result.stdout.contains("Decisions that led to no notification (0):"))
    }
}
