import Foundation
import Postgres
import Testing
import TestSupport

/// A push still waiting to go out (deferred past quiet hours, due for a retry, or not yet claimed by
/// push-deliver) is cancelled when what it was decided on changes first: the user's switches, the user
/// leaving, the notification read in the inbox, an activity logged, a pause started (migration 0024).
@Suite struct WaitingPushTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
    }

    /// An inactivity reminder stored with its push waiting: inactivity-check without push settings leaves
    /// the deliveries to push-deliver.
    func remindedWithAPushWaiting(_ name: String = "Kari") throws -> UUID {
        let mentor = try f.mentor(org, name, lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states(of: mentor) == ["pending"])
        return mentor
    }

    func states(of user: UUID) throws -> [String] {
        try f.connection.query("""
            SELECT d.state FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(user) ORDER BY d.id
            """).map { try $0.decode(0) }
    }

    /// The cancellation as the delivery's history shows it, and nothing left in the queue.
    func cancelledBecause(_ user: UUID) throws -> String? {
        let queued: Int = try f.connection.query("""
            SELECT count(*) FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
              JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(user)
            """).first!.decode(0)
        #expect(queued == 0, "nothing of the user's left in the queue")
        return try f.connection.query("""
            SELECT e.detail FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
              JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(user) AND e.event = 'cancelled'
            """).first?.decode(0)
    }

    /// The app's changes committed while the job, having read its candidates, waited to record them: each
    /// trigger found nothing of the job's queued yet, and the job's pushes went out all the same (a paused
    /// mentor reminded, a user who had switched pushes off pushed). The batch's new pushes are checked again
    /// once recorded (migration 0028), and cancelled as the triggers cancel them.
    @Test func changesCommittedWhileTheJobWasDecidingCancelItsNewPushesToo() throws {
        let names = ["Kari", "Ola", "Per", "Anne", "Liv", "Eva"]
        var mentor: [String: UUID] = [:]
        for name in names { mentor[name] = try f.mentor(org, name, lastActivityDaysAgo: 20) }
        let result = try Jobs.runDecidingWhile(db, f, "inactivity-check") {
            // A pause from the app's now: after the batch's transaction began (the check reads the clock, not its now()).
            try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at, reason) VALUES (\(mentor["Kari"]!), now(), 'ferie')")
            try f.preferences(mentor["Ola"]!, master: false)
            try f.preferences(mentor["Per"]!, inactivity: false)
            try f.connection.execute("UPDATE users SET deactivated_at = now() WHERE id = \(mentor["Anne"]!)")
            try f.connection.execute("INSERT INTO activities (mentor_id, occurred_at) VALUES (\(mentor["Liv"]!), now())")
        }
        #expect(result.status == 0, "\(result.stderr)")

        #expect(try cancelledBecause(mentor["Kari"]!) == "a pause of the mentor started before the push went out")
        #expect(try cancelledBecause(mentor["Ola"]!) == "the user switched push notifications off before the push went out")
        #expect(try cancelledBecause(mentor["Per"]!) == "the user switched inactivity off before the push went out")
        #expect(try cancelledBecause(mentor["Anne"]!) == "the user was deactivated before the push went out")
        #expect(try cancelledBecause(mentor["Liv"]!) == "the mentor logged an activity before the push went out")
        for name in names.dropLast() {
            #expect(try states(of: mentor[name]!) == ["cancelled"], "\(name)")
            #expect(try f.inbox(mentor[name]!).count == 1, "\(name): the inbox row stays")
        }
        #expect(try states(of: mentor["Eva"]!) == ["pending"], "nobody else's")
        #expect(try f.count("daily_push_slots") <= 1, "the cancelled pushes gave their slots back")
    }

    /// A push-only notification whose user's only device token was retired while the job decided: the batch
    /// stored it out of the inbox (as decided) but queued no push (no active token by then), so nobody ever
    /// saw it, and it took the day's slot for a push that never was. It is listed in the inbox instead, with
    /// no slot taken.
    @Test func aPushOnlyNotificationWhoseLastTokenWentWhileTheJobDecidedIsListedInTheInbox() throws {
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivity', 'push_only')")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, daily_push_cap) VALUES (\(org), 1)")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let eva = try f.mentor(org, "Eva", lastActivityDaysAgo: 20)
        let result = try Jobs.runDecidingWhile(db, f, "inactivity-check") {
            try f.connection.execute("UPDATE device_tokens SET retired_at = now(), retired_reason = 'Unregistered' WHERE user_id = \(kari)")
        }
        #expect(result.status == 0, "\(result.stderr)")
        let listed = { (user: UUID) throws -> Bool in
            try f.connection.query("SELECT in_inbox FROM notifications WHERE user_id = \(user)").first!.decode(0)
        }
        #expect(try listed(kari), "no push to carry it: in the inbox")
        #expect(try states(of: kari) == [])
        #expect(try !listed(eva), "push only, its push waiting")
        #expect(try states(of: eva) == ["pending"])
        let slots: [UUID] = try f.connection.query("SELECT user_id FROM daily_push_slots").map { try $0.decode(0) }
        #expect(slots == [eva], "a slot for the push that waits only")
    }

    /// The same for a follow-up: the assignment acknowledged while the job decided (0004's cancel found nothing).
    @Test func anAssignmentAcknowledgedWhileTheJobWasDecidingCancelsItsFollowUp() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let linda = try f.user(org, "Linda", role: "coordinator")
        let assignment = try f.assignment(org, mentor: kari, coordinator: linda, dispatchedDaysAgo: 12)
        let result = try Jobs.runDecidingWhile(db, f, "assignment-follow-up") {
            try f.connection.execute("INSERT INTO assignment_read_receipts (assignment_id) VALUES (\(assignment))")
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try f.decisions(kari) == ["notified:notified"])
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "the assignment was acknowledged before the push went out")
    }

    /// The organization switching the scenario off, or the assignment given to another mentor, while the job
    /// decided: the triggers (0037, 0039) found nothing queued yet, and the batch's recheck cancels them (0040).
    @Test func anOrganizationSwitchOrAReassignmentWhileTheJobWasDecidingCancelsItsNewPushes() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        let linda = try f.user(org, "Linda", role: "coordinator")
        let assignment = try f.assignment(org, mentor: kari, coordinator: linda, dispatchedDaysAgo: 12)
        try f.assignment(org, mentor: ola, coordinator: linda, dispatchedDaysAgo: 12)
        let reassigned = try Jobs.runDecidingWhile(db, f, "assignment-follow-up") {
            try f.connection.execute("UPDATE assignments SET mentor_id = \(per) WHERE id = \(assignment)")
        }
        #expect(reassigned.status == 0, "\(reassigned.stderr)")
        #expect(try cancelledBecause(kari) == "the assignment was given to another mentor before the push went out")
        #expect(try states(of: ola) == ["pending"], "the other assignment's follow-up still goes")

        let eva = try f.mentor(org, "Eva", lastActivityDaysAgo: 20)
        let switched = try Jobs.runDecidingWhile(db, f, "inactivity-check") {
            try f.rule(org, enabled: false)
        }
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(try cancelledBecause(eva) == "the organization switched inactivity off before the push went out")
    }

    /// The recheck finds a push's assignment by its key: joined on `'assignment:' || a.id` (no index serves it),
    /// every batch that queued pushes read the whole assignments table, which is never pruned (migration 0033).
    /// With sequential scans priced out, the recheck of a follow-up still reads assignments without one.
    @Test func theRecheckFindsTheAssignmentByItsKeyNotByReadingEveryAssignment() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let linda = try f.user(org, "Linda", role: "coordinator")
        for days in [1.0, 2, 3] { try f.assignment(org, mentor: kari, coordinator: linda, dispatchedDaysAgo: days) }
        let assignment = try f.assignment(org, mentor: kari, coordinator: linda, dispatchedDaysAgo: 12)
        try f.connection.execute("INSERT INTO assignment_read_receipts (assignment_id) VALUES (\(assignment))")
        let notification: UUID = try f.connection.query("""
            INSERT INTO notifications (user_id, category, title, body, dedupe_key, subject)
            VALUES (\(kari), 'assignment_follow_up', 't', 'b', 'k', \("assignment:\(assignment.uuidString.lowercased())")) RETURNING id
            """).first!.decode(0)
        let delivery: Int = try f.connection.query("""
            INSERT INTO deliveries (notification_id, device_token_id) SELECT \(notification), id FROM device_tokens WHERE user_id = \(kari) RETURNING id
            """).first!.decode(0)
        try f.connection.execute("INSERT INTO delivery_queue (delivery_id, provider) VALUES (\(delivery), 'apns')")
        // This transaction's own scans only (pg_stat_xact_user_tables): no other session's count in between.
        let session = try db.connect()
        try session.execute("BEGIN")
        try session.execute("SET LOCAL enable_seqscan = off")
        try session.execute("SELECT cancel_unwanted_new_pushes(ARRAY[\(notification)]::uuid[])")
        let scans: Int = try session.query("SELECT seq_scan::int FROM pg_stat_xact_user_tables WHERE relname = 'assignments'").first!.decode(0)
        try session.execute("COMMIT")
        #expect(scans == 0, "assignments read from start to end")
        #expect(try states(of: kari) == ["cancelled"], "the acknowledged assignment's push, found")
        #expect(try cancelledBecause(kari) == "the assignment was acknowledged before the push went out")
    }

    @Test func switchingPushesOffCancelsTheWaitingPushAndKeepsTheInboxRow() throws {
        let kari = try remindedWithAPushWaiting()
        let ola = try remindedWithAPushWaiting("Ola")
        try f.preferences(kari, master: false)
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "the user switched push notifications off before the push went out")
        #expect(try f.inbox(kari).count == 1, "still in the inbox")
        #expect(try states(of: ola) == ["pending"], "nobody else's")
    }

    @Test func aCategorySwitchedOffCancelsItsPushesButNotACriticalOneWhichTheMasterSwitchStillDoes() throws {
        let kari = try remindedWithAPushWaiting()
        try f.connection.execute("INSERT INTO push_notification_configs (user_id) VALUES (\(kari))")
        try f.connection.execute("UPDATE push_notification_configs SET milestone = false WHERE user_id = \(kari)")
        #expect(try states(of: kari) == ["pending"], "another category")
        try f.connection.execute("UPDATE push_notification_configs SET inactivity = false WHERE user_id = \(kari)")
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "the user switched inactivity off before the push went out")

        try f.connection.execute("UPDATE notifications SET critical = true WHERE user_id = \(kari)")
        try f.connection.execute("UPDATE deliveries SET state = 'pending' WHERE state = 'cancelled'")
        try f.connection.execute("INSERT INTO delivery_queue (delivery_id, provider) SELECT id, 'apns' FROM deliveries WHERE state = 'pending'")
        try f.connection.execute("UPDATE push_notification_configs SET inactivity = true WHERE user_id = \(kari)")
        try f.connection.execute("UPDATE push_notification_configs SET inactivity = false WHERE user_id = \(kari)")
        #expect(try states(of: kari) == ["pending"], "a critical push goes through the category switch")
        try f.connection.execute("UPDATE push_notification_configs SET enabled = false WHERE user_id = \(kari)")
        #expect(try states(of: kari) == ["cancelled"], "not through the master switch")
    }

    @Test func anActivityLoggedCancelsTheWaitingReminder() throws {
        let kari = try remindedWithAPushWaiting()
        try f.activity(kari, daysAgo: 0)
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "the mentor logged an activity before the push went out")
    }

    @Test func aPauseInForceCancelsTheWaitingReminderAFutureOneDoesNot() throws {
        let kari = try remindedWithAPushWaiting()
        try f.pause(kari, startedDaysAgo: -3, endsDaysAgo: -10)
        #expect(try states(of: kari) == ["pending"], "a pause that starts in three days")
        try f.pause(kari, startedDaysAgo: 0.01, endsDaysAgo: nil)
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "a pause of the mentor started before the push went out")
    }

    @Test func readingOrDeletingTheNotificationCancelsItsPush() throws {
        let kari = try remindedWithAPushWaiting()
        let ola = try remindedWithAPushWaiting("Ola")
        try f.connection.execute("UPDATE notifications SET read_at = now() WHERE user_id = \(kari)")
        try f.connection.execute("UPDATE notifications SET deleted_at = now() WHERE user_id = \(ola)")
        for user in [kari, ola] {
            #expect(try states(of: user) == ["cancelled"])
            #expect(try cancelledBecause(user) == "the notification was read or deleted in the inbox before the push went out")
        }
    }

    @Test func aDeactivatedUsersWaitingPushesAreCancelled() throws {
        let kari = try remindedWithAPushWaiting()
        try f.connection.execute("UPDATE users SET deactivated_at = now() WHERE id = \(kari)")
        #expect(try states(of: kari) == ["cancelled"])
        #expect(try cancelledBecause(kari) == "the user was deactivated before the push went out")
    }

    /// The organization's switch beats every user preference: switching the scenario off cancels its waiting
    /// pushes (they went out the next morning), and only that scenario's, only in that organization (0039).
    @Test func anOrganizationSwitchingAScenarioOffCancelsItsWaitingPushes() throws {
        let kari = try remindedWithAPushWaiting("Kari")
        let elsewhere = try f.organization("Elsewhere")
        let ola = try f.mentor(elsewhere, "Ola", lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states(of: ola) == ["pending"])
        try f.rule(org, scenario: "assignment_follow_up", enabled: false)
        #expect(try states(of: kari) == ["pending"], "another scenario switched off cancels nothing")
        try f.rule(org, enabled: false)
        #expect(try cancelledBecause(kari) == "the organization switched inactivity off before the push went out")
        #expect(try states(of: ola) == ["pending"], "another organization's push still waits")
    }

    /// A waiting push was written for who the recipient was: moved to another organization, or given another
    /// role, they got it all the same (migration 0037).
    @Test func aUserWhoMovesOrganizationOrChangesRoleGetsNoneOfTheWaitingPushes() throws {
        let kari = try remindedWithAPushWaiting("Kari")
        let ola = try remindedWithAPushWaiting("Ola")
        let per = try remindedWithAPushWaiting("Per")
        let other = try f.organization("Other")
        try f.connection.execute("UPDATE users SET organization_id = \(other) WHERE id = \(kari)")
        try f.connection.execute("UPDATE users SET role = 'coordinator' WHERE id = \(ola)")
        try f.connection.execute("UPDATE users SET display_name = 'Per Hansen' WHERE id = \(per)")
        #expect(try cancelledBecause(kari) == "the user moved to another organization before the push went out")
        #expect(try cancelledBecause(ola) == "the user's role changed before the push went out")
        #expect(try states(of: per) == ["pending"], "another change cancels nothing")
    }

    /// A mentor taken out of a coordinator's scope: the coordinator's waiting pause notice about them (it carries
    /// the mentor's reason) is cancelled; one about a mentor still in scope is not (migration 0037).
    @Test func aMentorLeavingACoordinatorsScopeCancelsTheirWaitingPauseNotice() throws {
        let linda = try f.user(org, "Linda", role: "coordinator")
        try f.device(linda)
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        try f.scope(org, coordinator: linda, mentor: kari)
        try f.scope(org, coordinator: linda, mentor: ola)
        try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at, reason) VALUES (\(kari), now(), 'Innlagt'), (\(ola), now(), 'Ferie')")
        let notified = try Jobs.run("event-notify", ["--once"], database: db)
        #expect(notified.status == 0, "\(notified.stderr)")
        #expect(try states(of: linda) == ["pending", "pending"], "two pause notices wait for push-deliver")
        try f.connection.execute("DELETE FROM coordinator_scopes WHERE coordinator_id = \(linda) AND mentor_id = \(kari)")
        let left: [(String, String, String?)] = try f.connection.query("""
            SELECT n.body, d.state, d.last_error FROM deliveries d JOIN notifications n ON n.id = d.notification_id
             WHERE n.user_id = \(linda) ORDER BY n.body
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2)) }
        #expect(left.map(\.1).sorted() == ["cancelled", "pending"], "\(left)")
        #expect(left.first { $0.1 == "cancelled" }?.0.contains("Innlagt") == true, "Kari's notice is the one cancelled: \(left)")
        #expect(left.first { $0.1 == "cancelled" }?.2 == "the mentor left the coordinator's scope before the push went out", "\(left)")
    }

    /// An assignment given to another mentor: the first mentor's waiting follow-up (it names the assignment) is
    /// cancelled (migration 0037).
    @Test func aReassignedAssignmentsWaitingFollowUpIsCancelled() throws {
        let linda = try f.user(org, "Linda", role: "coordinator")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        try f.connection.execute("SET mentor_push.events = 'off'")
        let assignment = try f.assignment(org, mentor: kari, coordinator: linda, title: "Besøk hos Per Hansen", dispatchedDaysAgo: 12)
        try f.connection.execute("RESET mentor_push.events")
        let followUp = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now)], database: db)
        #expect(followUp.status == 0, "\(followUp.stderr)")
        #expect(try states(of: kari) == ["pending"])
        try f.connection.execute("UPDATE assignments SET mentor_id = \(per) WHERE id = \(assignment)")
        #expect(try cancelledBecause(kari) == "the assignment was given to another mentor before the push went out")
    }

    @Test func aDeviceTokenThatMovesToAnotherUserTakesNoneOfTheFirstUsersPushes() throws {
        // Somebody else signs in on Kari's phone: the app moves the token row to them (UNIQUE (provider,
        // token) leaves it no other way). Kari's waiting push to that phone must not reach them; the one to
        // her other phone still goes, and her inbox keeps the row (migration 0025).
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 2)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states(of: kari) == ["pending", "pending"])
        let otherOrganization = try f.organization("Other")
        let stranger = try f.mentor(otherOrganization, "Stranger", lastActivityDaysAgo: 1, devices: 0)
        let phone: Int = try f.connection.query("SELECT min(id) FROM device_tokens WHERE user_id = \(kari)").first!.decode(0)
        try f.connection.execute("UPDATE device_tokens SET last_seen_at = now() WHERE id = \(phone)")
        #expect(try states(of: kari) == ["pending", "pending"], "an update that does not move the token cancels nothing")
        try f.connection.execute("UPDATE device_tokens SET user_id = \(stranger), last_seen_at = now() WHERE id = \(phone)")
        let byToken = try f.connection.query("""
            SELECT d.device_token_id = \(phone), d.state, d.last_error FROM deliveries d JOIN notifications n ON n.id = d.notification_id
             WHERE n.user_id = \(kari) ORDER BY 1 DESC
            """).map { (try $0.decode(0, as: Bool.self), try $0.decode(1, as: String.self), try $0.decode(2, as: String?.self)) }
        #expect(byToken.map(\.0) == [true, false])
        #expect(byToken[0].1 == "cancelled" && byToken[0].2 == "the device token moved to another user")
        #expect(byToken[1].1 == "pending", "her other phone still gets it")
        #expect(try f.inbox(kari).count == 1, "still in her inbox")
        let queued: Int = try f.connection.query("""
            SELECT count(*) FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id WHERE d.device_token_id = \(phone)
            """).first!.decode(0)
        #expect(queued == 0)
    }

    @Test func aPushAlreadySentIsLeftAsItIs() throws {
        let kari = try remindedWithAPushWaiting()
        try f.connection.execute("""
            WITH d AS (UPDATE deliveries SET state = 'sent', sent_at = now() RETURNING id) DELETE FROM delivery_queue q USING d WHERE q.delivery_id = d.id
            """)
        try f.preferences(kari, master: false)
        #expect(try states(of: kari) == ["sent"])
        #expect(try cancelledBecause(kari) == nil)
    }
}
