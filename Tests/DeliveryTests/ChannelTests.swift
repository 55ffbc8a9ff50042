import FakePush
import Foundation
import Postgres
import Testing
import TestSupport

/// Channels per category (push and inbox, inbox only, push only: the organization's, narrowed by the
/// user's), and the category's presentation on the phone from one table.
@Suite struct ChannelTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
    }

    func channels(_ channels: String) throws {
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivity', \(channels))")
    }

    func listedInInbox(_ user: UUID) throws -> [Bool] {
        try f.connection.query("SELECT in_inbox FROM notifications WHERE user_id = \(user)").map { try $0.decode(0) }
    }

    @Test func inboxOnlyStoresWithoutAPush() throws {
        try channels("inbox_only")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let plan = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"])
        #expect(plan.stdout.contains("inactivity goes to the inbox only: no push"), "\(plan.stdout)")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try listedInInbox(kari) == [true])
        #expect(try f.deliveries(kari) == 0)
        #expect(try f.decisions(kari) == ["notified:inbox_only_channel"])
    }

    @Test func pushOnlyPushesWithoutListingItAndLeavesTheBadgeAlone() throws {
        try channels("push_only")
        let push = try PushEnvironment()
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let noDevice = try f.mentor(org, "No device", lastActivityDaysAgo: 20, devices: 0)
        // The plan says "not listed" only of the one pushed (it said so of the one with no device too).
        let plan = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run", "--format", "json"], environment: push.variables)
        let lines = plan.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first { $0.contains(kari.uuidString.lowercased()) }?.contains(#""in_inbox":false"#) == true, "\(plan.stdout)")
        #expect(lines.first { $0.contains(noDevice.uuidString.lowercased()) }?.contains(#""in_inbox":false"#) == false, "\(plan.stdout)")
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try listedInInbox(kari) == [false], "stored for its push, not listed")
        #expect(result.summary?["inbox_rows"] as? Int == 1, "the summary counts the listed one only: \(result.stdout)")
        #expect(result.stderr.contains("wrote 1 inbox rows"), "\(result.stderr)")
        #expect(try f.deliveryStates(kari) == ["sent"])
        let aps = try #require((push.server.requests().first { $0.provider == .apns }?.json as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["badge"] as? Int == 0, "a row not listed is not counted as unread")
        #expect(try listedInInbox(noDevice) == [true], "what cannot be pushed is listed: nothing is dropped")
        #expect(try f.decisions(noDevice) == ["notified:inbox_only_no_device"])
    }

    /// A push-only notification whose push reaches no device (the token is gone, the message refused) is
    /// listed in the inbox: the user never heard of it otherwise (migration 0026). One whose push went to
    /// one of two phones stays out.
    @Test func pushOnlyThatReachesNoDeviceJoinsTheInbox() throws {
        try channels("push_only")
        let push = try PushEnvironment()
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        let gone = try f.device(kari)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 20, devices: 0)
        let olasOld = try f.device(ola)
        try f.device(ola)
        for device in [gone, olasOld] { push.server.setToken(device.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))) }
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try f.deliveryStates(kari) == ["failed"])
        #expect(try listedInInbox(kari) == [true], "no push reached her: listed")
        #expect(try f.deliveryStates(ola).sorted() == ["failed", "sent"])
        #expect(try listedInInbox(ola) == [false], "his other phone got it")
    }

    /// A push-only notification whose two phones' pushes fail in two transactions at once (two workers): the
    /// first, not yet committed, saw the second push still waiting; the second found the notification's row
    /// taken by the first and skipped its check. Nobody listed it, and Kari never heard of it. The skipped
    /// check is written down (migration 0032) and push-deliver makes it at the end of its next run.
    @Test func pushOnlyWhosePushesFailInTwoTransactionsAtOnceJoinsTheInbox() throws {
        try channels("push_only")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        let first = try f.device(kari)
        let second = try f.device(kari)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0) // no push settings: both pushes wait
        let worker = try db.connect()
        try worker.execute("BEGIN")
        try worker.execute("""
            WITH q AS (DELETE FROM delivery_queue q USING deliveries d
                        WHERE d.id = q.delivery_id AND d.device_token_id = \(first.id) RETURNING q.delivery_id)
            UPDATE deliveries SET state = 'failed' WHERE id IN (SELECT delivery_id FROM q)
            """)
        let push = try PushEnvironment()
        push.server.setToken(second.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000)))
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        try worker.execute("COMMIT")
        #expect(try f.deliveryStates(kari) == ["failed", "failed"])
        #expect(try listedInInbox(kari) == [false], "neither transaction could list it")

        let next = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try listedInInbox(kari) == [true], "the next run made the skipped check")
        #expect(next.stderr.contains("listed 1 push-only notification(s)"), "\(next.stderr)")
        #expect(try f.count("unpushed_checks") == 0)
    }

    /// A skipped check is made as 0026 makes it: not for a notification whose other push was cancelled for the
    /// user's own doing (pushes switched off since) or expired, nor one the user read; for one whose other push
    /// went with its phone to another user, yes.
    @Test func theSweepListsOnlyWhat0026Lists() throws {
        try channels("push_only")
        var notifications: [String: UUID] = [:]
        for (name, other) in [("Off", "cancelled:the user switched push notifications off before the push went out"),
                              ("Expired", "expired:past its expiry"), ("Read", "failed:x"),
                              ("Moved", "cancelled:the device token moved to another user")] {
            let user = try f.mentor(org, name, lastActivityDaysAgo: 20, devices: 0)
            let phones = [try f.device(user), try f.device(user)]
            let id: UUID = try f.connection.query("""
                INSERT INTO notifications (user_id, category, title, body, dedupe_key, in_inbox, read_at)
                VALUES (\(user), 'inactivity', 't', 'b', \(name), false, \(name == "Read" ? Date() : nil)) RETURNING id
                """).first!.decode(0)
            let (state, error) = (String(other.prefix { $0 != ":" }), String(other.drop { $0 != ":" }.dropFirst()))
            try f.connection.execute("""
                INSERT INTO deliveries (notification_id, device_token_id, state, last_error)
                VALUES (\(id), \(phones[0].id), 'failed', 'device token retired: Unregistered'), (\(id), \(phones[1].id), \(state), \(error))
                """)
            try f.connection.execute("INSERT INTO unpushed_checks (notification_id) VALUES (\(id))")
            notifications[name] = id
        }
        let push = try PushEnvironment()
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        for (name, id) in notifications {
            let listed: Bool = try f.connection.query("SELECT in_inbox FROM notifications WHERE id = \(id)").first!.decode(0)
            #expect(listed == (name == "Moved"), "\(name)")
        }
        #expect(try f.count("unpushed_checks") == 0)
    }

    /// A push-only notification whose one push was waiting when its phone moved to another user (somebody
    /// else signed in on it): the push is cancelled (migration 0025) and the notification listed (0026).
    @Test func pushOnlyWhosePhoneMovedToAnotherUserJoinsTheInbox() throws {
        try channels("push_only")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0) // no push settings: the push waits
        #expect(try listedInInbox(kari) == [false])
        let stranger = try f.mentor(try f.organization("Other"), "Stranger", lastActivityDaysAgo: 1, devices: 0)
        try f.connection.execute("UPDATE device_tokens SET user_id = \(stranger) WHERE user_id = \(kari)")
        #expect(try f.deliveryStates(kari) == ["cancelled"])
        #expect(try listedInInbox(kari) == [true])
    }

    /// The same move while a job was recording: the job queued the push on the token as its snapshot showed it
    /// (Kari's), the app moved the token to a stranger and committed without waiting (the job's foreign-key
    /// lock does not conflict with it), and its trigger found nothing queued yet. push-deliver sent Kari's
    /// reminder to the stranger's phone. The claim now sees the token belongs to somebody else: the push is
    /// cancelled, never sent, and the push-only notification joins Kari's inbox.
    @Test func aPushQueuedWhileItsPhoneMovedToAnotherUserIsNeverSentToThem() throws {
        try channels("push_only")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        let phone = try f.device(kari)
        let notification: UUID = try f.connection.query("""
            INSERT INTO notifications (user_id, category, title, body, dedupe_key, in_inbox)
            VALUES (\(kari), 'inactivity', 'Hei Kari', 'b', 'race', false) RETURNING id
            """).first!.decode(0)
        let job = try db.connect()
        try job.execute("BEGIN")
        try job.execute("""
            WITH d AS (INSERT INTO deliveries (notification_id, device_token_id) VALUES (\(notification), \(phone.id)) RETURNING id)
            INSERT INTO delivery_queue (delivery_id, provider) SELECT id, 'apns' FROM d
            """)
        try job.execute("INSERT INTO daily_push_slots (notification_id, user_id, local_day, priority, scenario) VALUES (\(notification), \(kari), current_date, 50, 'inactivity')")
        let stranger = try f.mentor(try f.organization("Other"), "Stranger", lastActivityDaysAgo: 1, devices: 0)
        try db.connect().execute("UPDATE device_tokens SET user_id = \(stranger) WHERE id = \(phone.id)") // commits at once
        try job.execute("COMMIT")
        #expect(try f.deliveryStates(kari) == ["pending"], "the app's cancel came first and found nothing")

        let push = try PushEnvironment()
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.stdout.contains("CANCEL") && plan.stdout.contains("the device token moved to another user"), "\(plan.stdout)")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(push.server.requests().filter { $0.deviceToken == phone.token }.isEmpty, "nothing sent to the stranger's phone")
        #expect(try f.deliveryStates(kari) == ["cancelled"])
        let event: String = try f.connection.query("""
            SELECT e.event || ': ' || e.detail FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id WHERE d.notification_id = \(notification)
            """).first!.decode(0)
        #expect(event == "cancelled: the device token moved to another user")
        #expect(try listedInInbox(kari) == [true])
        #expect((result.summary?["push"] as? [String: Any])?["cancelled_token_moved"] as? Int == 1, "\(result.stderr)")
        #expect(try f.count("delivery_queue") == 0)
        #expect(try f.count("daily_push_slots") == 0, "its daily slot given back: it never left")
    }

    /// The outcome write locks a queue row, then (its push failed) the notification, to list it; the app deleting
    /// that notification locks it, then its queue rows (0024's cancel). Neither may wait for the other in a
    /// circle: the listing skips a notification someone is changing.
    @Test func listingAFailedPushOnlyRowNeverDeadlocksWithTheAppChangingIt() throws {
        try channels("push_only")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let row = try f.connection.query("""
            SELECT d.id, n.id FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(kari)
            """).first!
        let delivery: Int = try row.decode(0)
        let notification: UUID = try row.decode(1)
        let writer = try db.connect()
        try writer.execute("BEGIN")
        try writer.execute("DELETE FROM delivery_queue WHERE delivery_id = \(delivery)")
        let app = BlockedStatement("UPDATE notifications SET deleted_at = now() WHERE id = \(notification)", on: db)
        #expect(app.isWaiting(), "the app waits for the queue row")
        try writer.execute("UPDATE deliveries SET state = 'failed' WHERE id = \(delivery)")
        try writer.execute("COMMIT")
        #expect(app.finish() == nil)
    }

    @Test func aUserNarrowsButNeverWidens() throws {
        let narrower = try f.mentor(org, "Narrower", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO user_category_channels (user_id, category, channels) VALUES (\(narrower), 'inactivity', 'inbox_only')")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.decisions(narrower) == ["notified:inbox_only_channel"])
        #expect(try f.deliveries(narrower) == 0)

        // The organization sends inactivity to the inbox only; a user who wants push only gets neither.
        try channels("inbox_only")
        let widener = try f.mentor(org, "Widener", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO user_category_channels (user_id, category, channels) VALUES (\(widener), 'inactivity', 'push_only')")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.decisions(widener) == ["suppressed:no_channel"])
        #expect(try f.inbox(widener).isEmpty)
    }

    @Test func theDatabaseRefusesAnUnknownChannelOrCategory() throws {
        #expect(throws: PostgresError.self) { try channels("sms") }
        #expect(throws: PostgresError.self) {
            try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivty', 'inbox_only')")
        }
    }

    @Test func channelSoundAndThreadComeFromTheCategoryTable() throws {
        try f.connection.execute("""
            UPDATE notification_categories SET android_channel_id = 'mentoring', sound = 'chime.caf', apns_thread_id = 'mentoring-thread'
             WHERE category = 'inactivity'
            """)
        let push = try PushEnvironment()
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 2)
        #expect(try Jobs.inactivityCheck(db, now: f.now, environment: push.variables).status == 0)
        #expect(try f.deliveryStates(kari) == ["sent", "sent"])
        let apns = try #require(push.server.requests().first { $0.provider == .apns })
        let aps = (apns.json as? [String: Any])?["aps"] as? [String: Any]
        #expect(aps?["sound"] as? String == "chime.caf")
        #expect(aps?["thread-id"] as? String == "mentoring-thread")
        let fcm = try #require(push.server.requests().first { $0.provider == .fcm })
        let notification = (((fcm.json as? [String: Any])?["message"] as? [String: Any])?["android"] as? [String: Any])?["notification"] as? [String: Any]
        #expect(notification?["channel_id"] as? String == "mentoring")
        #expect(notification?["sound"] as? String == "chime.caf")
    }
}
