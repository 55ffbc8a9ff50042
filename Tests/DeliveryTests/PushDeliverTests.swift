import FakePush
import Foundation
import Postgres
import Testing
import TestSupport

/// Delivery end to end: the built jobs send over real HTTP/2 + TLS (libcurl) to the local fake
/// APNs/FCM/OAuth server, and the tests read what the fake received and what the outbox recorded.
@Suite struct PushDeliverTests {
    let db: TestDatabase
    let f: Fixtures
    let push: PushEnvironment

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        push = try PushEnvironment()
    }

    /// Notifications with pending deliveries, made by inactivity-check without push configured.
    func pendingNotifications(_ mentors: [(String, Int)]) throws -> [(user: UUID, devices: [Fixtures.Device])] {
        let org = try f.organization("Org")
        var made: [(UUID, [Fixtures.Device])] = []
        for (name, devices) in mentors {
            let user = try f.mentor(org, name, lastActivityDaysAgo: 20, devices: 0)
            var list: [Fixtures.Device] = []
            for i in 0..<devices { list.append(try f.device(user, provider: i % 2 == 0 ? "apns" : "fcm")) }
            made.append((user, list))
        }
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return made
    }

    func states() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try f.connection.query("SELECT state, count(*) FROM deliveries GROUP BY state") {
            counts[try row.decode(0)] = try row.decode(1)
        }
        return counts
    }

    func delivery(token: String) throws -> (state: String, attempts: Int, error: String?, nextIn: Double, messageID: String?) {
        let row = try #require(try f.connection.query("""
            SELECT d.state, d.attempts, d.last_error, coalesce(extract(epoch FROM q.next_attempt_at - now()), 0)::float8, d.provider_message_id
              FROM deliveries d JOIN device_tokens t ON t.id = d.device_token_id LEFT JOIN delivery_queue q ON q.delivery_id = d.id
             WHERE t.token = \(token)
            """).first)
        return (try row.decode(0), try row.decode(1), try row.decode(2, as: String?.self), try row.decode(3), try row.decode(4, as: String?.self))
    }

    func pushes(_ provider: FakePush.Provider) -> [RecordedRequest] {
        push.server.requests().filter { $0.provider == provider }
    }

    /// `count` pending deliveries, the fake answering each after `seconds`, and push-deliver started with
    /// `concurrency` pushes in flight (and `extra` arguments).
    func deliverSlowly(_ count: Int, answersAfter seconds: Double, concurrency: Int, _ extra: [String] = []) throws -> ProcessRunner.Running {
        _ = try pendingNotifications((0..<count).map { ("Mentor \($0)", 1) })
        push.server.inject(.slow(seconds: seconds), count: 1_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "\(concurrency)"
        return try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url] + extra, environment: environment)
    }

    /// inactivity-check started for 40 inactive mentors with a device each, delivering in line after its commit,
    /// the fake answering each push after `seconds`, `concurrency` pushes in flight.
    func inactivityCheckDeliveringSlowly(answersAfter seconds: Double, concurrency: Int) throws -> ProcessRunner.Running {
        let org = try f.organization("Org")
        for i in 0..<40 { _ = try f.mentor(org, "Mentor \(i)", lastActivityDaysAgo: 20, devices: 1) }
        push.server.inject(.slow(seconds: seconds), count: 1_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "\(concurrency)"
        return try ProcessRunner.start(Paths.executable("inactivity-check"), ["--database-url", db.url, "--now", Jobs.iso(f.now)], environment: environment)
    }

    /// Waits (up to 20 s) until `count` deliveries are recorded as sent, then ends the database sessions of `job`
    /// (as an admin's `pg_terminate_backend`, a failover or a restart would), and waits for `running` to end.
    func breakConnections(of job: String, _ running: ProcessRunner.Running, onceSent count: Int) throws -> ProcessRunner.Result {
        let deadline = Date().addingTimeInterval(20)
        while (try states()["sent"] ?? 0) < count && Date() < deadline { usleep(20_000) }
        try f.connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(job) AND datname = current_database()")
        return try running.wait(timeout: 30)
    }

    /// After a run whose connections broke: no sent push went unrecorded (every one the fake took is `sent`), and
    /// none stays claimed.
    func expectNothingLostOrHeld(_ result: ProcessRunner.Result) throws {
        #expect(!result.stderr.contains("pushes that were sent"), "\(result.stderr)")
        let answered = pushes(.apns).filter { $0.status == 200 }.count
        let after = try states()
        #expect(after["sent"] == answered, "every push the provider took is recorded: \(after), \(answered) answered")
        let leased: Int = try f.connection.query("SELECT count(*) FROM delivery_queue WHERE lease_until > now()").first!.decode(0)
        #expect(leased == 0, "the claimed pushes not sent are given back")
    }

    /// Waits (up to 20 s) until `count` deliveries are recorded as sent, then sends `signal` to `running`.
    func signal(_ running: ProcessRunner.Running, _ signal: Int32, onceSent count: Int) throws {
        let deadline = Date().addingTimeInterval(20)
        while (try states()["sent"] ?? 0) < count && Date() < deadline { usleep(20_000) }
        kill(running.pid, signal)
    }

    @Test func inactivityCheckDeliversRightAfterItsCommit() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        let iphone = try f.device(kari, provider: "apns")
        let android = try f.device(kari, provider: "fcm")
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect((result.summary?["push"] as? [String: Any])?["sent"] as? Int == 2)

        let apns = try #require(pushes(.apns).first)
        #expect(apns.deviceToken == iphone.token)
        #expect(apns.header("apns-topic") == "no.likeperson.app")
        #expect(apns.header("apns-push-type") == "alert")
        let payload = try #require(apns.json as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Har du noe å registrere?")
        #expect(aps["badge"] as? Int == 1, "badge is the unread inbox count")
        #expect(payload["route"] as? String == "/activities/new")
        let notificationID = try #require(payload["notification_id"] as? String)
        #expect(apns.header("apns-collapse-id") == notificationID)

        let fcm = try #require(pushes(.fcm).first)
        #expect(fcm.deviceToken == android.token)
        let message = try #require((fcm.json as? [String: Any])?["message"] as? [String: Any])
        #expect((message["notification"] as? [String: Any])?["title"] as? String == "Har du noe å registrere?")
        #expect((message["data"] as? [String: Any])?["notification_id"] as? String == notificationID)
        #expect(pushes(.oauth).count == 1, "one access token for the whole run")

        #expect(try states() == ["sent": 2])
        #expect(try delivery(token: iphone.token).messageID == notificationID)
        #expect(try delivery(token: android.token).messageID?.hasPrefix("projects/demo-project/messages/") == true)
        let events: Int = try f.connection.query("SELECT count(*) FROM delivery_events WHERE event = 'sent'").first!.decode(0)
        #expect(events == 2)
    }

    @Test func pushDeliverDrainsPendingDeliveriesOverOneConnectionAndOnlyOnce() throws {
        _ = try pendingNotifications((0..<40).map { ("Mentor \($0)", 2) })
        #expect(try states() == ["pending": 80])
        let first = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(try states() == ["sent": 80])
        let apns = pushes(.apns)
        #expect(apns.count == 40)
        #expect(Set(apns.map(\.connectionID)).count == 1, "multiplexed over one connection")
        #expect(Set(apns.compactMap(\.jwtIssuedAt)).count == 1, "one provider token, reused")
        let second = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(second.status == 0)
        #expect(push.server.requests().filter { $0.provider != .oauth }.count == 80, "nothing is sent twice")
    }

    @Test func theDebugLogSaysWhereTheRunsTimeWent() throws {
        _ = try pendingNotifications((0..<5).map { ("Mentor \($0)", 2) })
        let result = try Jobs.pushDeliver(db, ["--log-level", "debug"], environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 10])
        let line = try #require(result.stderr.split(separator: "\n").first { $0.contains("database time off the engine's thread") })
        #expect(line.contains("the pushes waited for a claim"))
        // Whether the pushes were starved of CPU (a busy host), beside the database's share.
        #expect(line.contains("the pushing thread was on a core ") && line.contains(" for one"), "\(line)")
    }

    // The arguments are made when the run starts, and the suite takes over a minute: the 410's time is an hour
    // ahead, so it is later than the token's registration (made when the test runs) whenever the test runs.
    @Test(arguments: [
        (TokenState.unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000), "apns", "Unregistered"),
        (TokenState.fcmUnregistered, "fcm", "UNREGISTERED"),
    ])
    func aDeadTokenIsRetiredAndNeverSentToAgain(state: TokenState, provider: String, reason: String) throws {
        let org = try f.organization("Org")
        let user = try f.mentor(org, "Gone", lastActivityDaysAgo: 20, devices: 0)
        let device = try f.device(user, provider: provider)
        push.server.setToken(device.token, state)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        // A second notification for the same token, still pending when the token dies.
        try f.connection.execute("""
            WITH n AS (INSERT INTO notifications (user_id, category, title, body, dedupe_key) VALUES (\(user), 'inactivity', 't', 'b', 'extra') RETURNING id),
                 d AS (INSERT INTO deliveries (notification_id, device_token_id) SELECT id, \(device.id) FROM n RETURNING id)
            INSERT INTO delivery_queue (delivery_id, provider, next_attempt_at) SELECT id, 'apns', now() + interval '1 hour' FROM d
            """)

        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let token = try #require(try f.connection.query("SELECT retired_at IS NOT NULL, retired_reason FROM device_tokens WHERE id = \(device.id)").first)
        #expect(try token.decode(0, as: Bool.self))
        #expect(try token.decode(1, as: String.self) == reason)
        #expect(try states() == ["failed": 2], "this delivery and the token's other pending one are settled")

        // Later runs never send to it again.
        try f.reopen()
        let sentBefore = push.server.requests().filter { $0.provider != .oauth }.count
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(push.server.requests().filter { $0.provider != .oauth }.count == sentBefore)
        // A new notification for the user (a coordinator dispatches an assignment) is decided, and gets no
        // delivery to the retired token: the user has no device left, so it is in the inbox only.
        let coordinator = try f.user(org, "Coordinator", role: "coordinator")
        _ = try f.assignment(org, mentor: user, coordinator: coordinator, dispatchedDaysAgo: 0)
        let deliveriesBefore = try f.count("deliveries")
        let decided = try Jobs.run("event-notify", ["--once"], database: db, environment: push.variables)
        #expect(decided.status == 0, "stderr: \(decided.stderr)")
        let decisions = try f.decisions(user)
        #expect(decisions.last == "notified:inbox_only_no_device", "\(decisions)")
        #expect(try f.count("deliveries") == deliveriesBefore, "a new notification gets no delivery to a retired token")
        #expect(push.server.requests().filter { $0.provider != .oauth }.count == sentBefore)
    }

    /// `BadDeviceToken`, `DeviceTokenNotForTopic` and `SENDER_ID_MISMATCH` also answer a wrong topic,
    /// environment or project, for every token. A run in which no push to the token's provider and
    /// environment succeeded cannot tell, so it keeps the token and tries the delivery again later (the
    /// fact sheet: drop only when the setup is known to be good); the first run with such a success retires it.
    @Test(arguments: [
        (TokenState.badDeviceToken, "apns", "BadDeviceToken"),
        (TokenState.wrongTopic, "apns", "DeviceTokenNotForTopic"),
        (TokenState.senderIDMismatch, "fcm", "SENDER_ID_MISMATCH"),
    ])
    func aSuspectTokenIsKeptUntilAPushToItsEnvironmentSucceeds(state: TokenState, provider: String, reason: String) throws {
        let org = try f.organization("Org")
        let lone = try f.mentor(org, "Lone", lastActivityDaysAgo: 20, devices: 0)
        let suspect = try f.device(lone, provider: provider)
        push.server.setToken(suspect.token, state)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)

        let first = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(first.stderr.contains("not retired"), "\(first.stderr)")
        let kept: Bool = try f.connection.query("SELECT retired_at IS NULL FROM device_tokens WHERE id = \(suspect.id)").first!.decode(0)
        #expect(kept, "no success beside it: the token is kept")
        let held = try delivery(token: suspect.token)
        #expect(held.state == "retrying" && held.attempts == 1, "\(held)")
        #expect(held.error?.contains(reason) == true && held.nextIn > 0, "\(held)")

        // A later run sends to a good token of the same provider first: the setup is shown to work.
        let other = try f.mentor(org, "Other", lastActivityDaysAgo: 20, devices: 0)
        let good = try f.device(other, provider: provider)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        try f.makeDue()
        try f.makeDue(where: "d.device_token_id = \(good.id)", secondsAgo: 60)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0)
        let token = try #require(try f.connection.query("SELECT retired_at IS NOT NULL, retired_reason FROM device_tokens WHERE id = \(suspect.id)").first)
        #expect(try token.decode(0, as: Bool.self))
        #expect(try token.decode(1, as: String?.self) == reason)
        #expect(try states() == ["sent": 1, "failed": 1])
    }

    /// A success proves its setup for later runs (0035): a retry that ran alone, in a minute with no other push,
    /// never had a success beside it, so its BadDeviceToken token was never retired, and every later
    /// notification to it spent PUSH_MAX_ATTEMPTS requests. Another setup (a changed topic or host) is proven
    /// afresh.
    @Test func aSetupProvenInAnEarlierRunRetiresALoneSuspectAtOnce() throws {
        _ = try pendingNotifications([("Kari", 1)])
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        let proven: [String] = try f.connection.query("SELECT endpoint || ' ' || setup FROM confirmed_setups").map { try $0.decode(0) }
        #expect(proven.count == 1 && proven[0].hasPrefix("apns/production https://") && proven[0].hasSuffix(" topic \(PushEnvironment.topic)"), "\(proven)")

        let org = try f.organization("Org 2")
        let lone = try f.device(try f.mentor(org, "Lone", lastActivityDaysAgo: 20, devices: 0), provider: "apns")
        push.server.setToken(lone.token, .badDeviceToken)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let run = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(run.status == 0, "\(run.stderr)")
        let retired: String? = try f.connection.query("SELECT retired_reason FROM device_tokens WHERE id = \(lone.id)").first!.decode(0)
        #expect(retired == "BadDeviceToken", "retired at once (before: kept, retried until dead)")
        #expect(try delivery(token: lone.token).state == "failed")

        // The setup proven was another one: this token is kept, as with no proof at all.
        try f.connection.execute("UPDATE confirmed_setups SET setup = 'https://elsewhere.example topic com.example.other'")
        let other = try f.device(try f.mentor(org, "Other", lastActivityDaysAgo: 20, devices: 0), provider: "apns")
        push.server.setToken(other.token, .badDeviceToken)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        let kept: Bool = try f.connection.query("SELECT retired_at IS NULL FROM device_tokens WHERE id = \(other.id)").first!.decode(0)
        #expect(kept)
        #expect(try delivery(token: other.token).state == "retrying")
    }

    /// An earlier run's proof vouches for a few suspects, not for a run in which every answer says the setup is
    /// wrong (an app release with another topic, an incident): past the suspect limit with no success of its own,
    /// the run withdraws the proof and holds the rest. With the proof taken as it was, every token was retired.
    @Test func anEarlierProofRetiresNoMoreThanTheSuspectLimitAndIsWithdrawn() throws {
        _ = try pendingNotifications([("Kari", 1)])
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        let org = try f.organization("Org 2")
        var bad: [Fixtures.Device] = []
        for i in 0..<25 {
            let device = try f.device(try f.mentor(org, "Bad \(i)", lastActivityDaysAgo: 20, devices: 0), provider: "apns")
            push.server.setToken(device.token, .badDeviceToken)
            bad.append(device)
        }
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.stderr.contains("no longer taken as proven"), "\(result.stderr)")
        let retired: Int = try f.connection.query("SELECT count(*)::int FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 19, "no more than the limit on an earlier proof: \(retired)")
        let proofs: Int = try f.connection.query("SELECT count(*)::int FROM confirmed_setups").first!.decode(0)
        #expect(proofs == 0, "the proof is withdrawn")
    }

    /// Twenty suspects answered before the successes on their way: the endpoint stopped as misconfigured (78),
    /// the suspects were released unretired and headed the next run's claim, which stopped again, run after
    /// run, though pushes had just succeeded. A success still on its way now retires the suspects held and
    /// lets the endpoint's pushes go on.
    @Test func aSuccessAfterTheSuspectLimitRetiresTheSuspectsAndTheRunGoesOn() throws {
        let made = try pendingNotifications((0..<35).map { ("Mentor \($0)", 1) })
        let bad = made.prefix(25).flatMap(\.devices)
        for device in bad { push.server.setToken(device.token, .badDeviceToken) }
        // The bad ones are due first, so their answers come before the good ones'.
        try f.makeDue(where: "d.device_token_id = ANY(\(PostgresArray(bad.map(\.id)))::bigint[])", secondsAgo: 60)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let retired: Int = try f.connection.query("SELECT count(*) FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 25)
        #expect(try states() == ["sent": 10, "failed": 25])
        #expect(pushes(.apns).count == 35, "each sent once")
    }

    /// Suspects are held to the end of the run; a run that failed before its end left them leased for the
    /// lease's length, and the next claim counted each as an attempt. A failed run gives them back.
    @Test func aRunThatFailsGivesBackTheSuspectsItHeld() throws {
        let made = try pendingNotifications((0..<4).map { ("Mentor \($0)", 1) })
        let suspects = made.prefix(3).flatMap(\.devices), last = made[3].devices[0]
        for device in suspects { push.server.setToken(device.token, .badDeviceToken) }
        push.server.setToken(last.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 60_000))
        try f.makeDue(where: "d.device_token_id = ANY(\(PostgresArray(suspects.map(\.id)))::bigint[])", secondsAgo: 60)
        // The last push's outcome cannot be written: the run fails after the suspects were held.
        try f.connection.execute("""
            CREATE FUNCTION refuse_failed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.event IN ('failed', 'retired') THEN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '55P03'; END IF; RETURN NEW; END $$
            """)
        try f.connection.execute("CREATE TRIGGER refuse_failed BEFORE INSERT ON delivery_events FOR EACH ROW EXECUTE FUNCTION refuse_failed()")
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(pushes(.apns).count == 4)
        let leased: [Int] = try f.connection.query("""
            SELECT d.device_token_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id WHERE q.lease_until > now() ORDER BY 1
            """).map { try $0.decode(0) }
        #expect(leased == [last.id], "only the push whose outcome could not be written stays claimed: \(leased)")
        let attempts: Int = try f.connection.query("SELECT sum(attempts)::int FROM deliveries WHERE device_token_id = ANY(\(PostgresArray(suspects.map(\.id)))::bigint[])").first!.decode(0)
        #expect(attempts == 0)
    }

    /// Production's tokens all answer BadDeviceToken: production's setup is suspect and only its pushes stop
    /// (78), none retired. The one sandbox suspect held beside them is no reason to retire its token either:
    /// with no sandbox push succeeding in the run, it is tried again later, as any lone suspect is.
    @Test func suspectsOfAnotherEnvironmentAreNotRetiredWhenOneEnvironmentIsStoppedAsMisconfigured() throws {
        let made = try pendingNotifications((0..<22).map { ("Mentor \($0)", 1) })
        for device in made.flatMap(\.devices) { push.server.setToken(device.token, .badDeviceToken) }
        let org = try f.organization("Dev")
        let developer = try f.mentor(org, "Developer", lastActivityDaysAgo: 20, devices: 0)
        let sandbox = try f.device(developer, provider: "apns", environment: "sandbox")
        push.server.setToken(sandbox.token, .badDeviceToken)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        // The sandbox push goes first, then the 22 production ones.
        try f.makeDue(where: "d.device_token_id = \(sandbox.id)", secondsAgo: 60)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        let retired: Int = try f.connection.query("SELECT count(*) FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 0)
        #expect(try states() == ["pending": 22, "retrying": 1])
        #expect(try delivery(token: sandbox.token).state == "retrying")
    }

    /// A TestFlight build registers its tokens as sandbox while they are production's: twenty of them answer
    /// BadDeviceToken. That stops the sandbox pushes as misconfigured (78), not production's, run after run.
    @Test func aSuspectSandboxSetupDoesNotStopProductionPushes() throws {
        let org = try f.organization("Testers")
        var sandbox: [Fixtures.Device] = []
        for i in 0..<22 {
            let tester = try f.mentor(org, "Tester \(i)", lastActivityDaysAgo: 20, devices: 0)
            let device = try f.device(tester, provider: "apns", environment: "sandbox")
            push.server.setToken(device.token, .badDeviceToken)
            sandbox.append(device)
        }
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        _ = try pendingNotifications((0..<10).map { ("Mentor \($0)", 1) })
        try f.makeDue(where: "d.device_token_id = ANY(\(PostgresArray(sandbox.map(\.id)))::bigint[])", secondsAgo: 60)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1" // the sandbox pushes first, one by one
        for run in 1...2 {
            let result = try Jobs.pushDeliver(db, environment: environment)
            #expect(result.status == 78, "run \(run): \(result.stderr)")
            #expect(result.stderr.contains("apns/sandbox"), "\(result.stderr)")
            #expect(try states() == ["sent": 10, "pending": 22], "run \(run)")
        }
        let retired: Int = try f.connection.query("SELECT count(*) FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 0)
        #expect(pushes(.apns).filter { $0.status == 200 }.count == 10, "each production push sent once")
    }

    /// A fake sandbox host (its own server: production is `push`'s), optionally refusing the key as restricted
    /// to production, and a developer with a sandbox token whose reminder is stored with its push waiting.
    func developersSandboxToken(keyRestrictedToProduction: Bool) throws -> (FakePushServer, Fixtures.Device) {
        var configuration = push.server.configuration
        configuration.apnsDevelopment = true
        if keyRestrictedToProduction {
            configuration.apnsKeys = configuration.apnsKeys.map { var key = $0; key.environment = .production; return key }
        }
        let sandboxServer = try FakePushServer(configuration: configuration)
        try sandboxServer.start()
        let org = try f.organization("Dev")
        let developer = try f.mentor(org, "Developer", lastActivityDaysAgo: 20, devices: 0)
        let sandbox = try f.device(developer, provider: "apns", environment: "sandbox")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        return (sandboxServer, sandbox)
    }

    /// A key restricted to production (Apple allows it) meets a developer's sandbox token: the sandbox answers
    /// 403 BadEnvironmentKeyInToken. Only the sandbox pushes stop (78); production's go on, run after run.
    /// Before, the answer stopped APNs altogether, and the sandbox row, first due, did it again every run.
    @Test func aKeyForTheOtherEnvironmentStopsOnlyThatEnvironmentsPushes() throws {
        let (sandboxServer, sandbox) = try developersSandboxToken(keyRestrictedToProduction: true)
        defer { sandboxServer.stop() }
        _ = try pendingNotifications((0..<10).map { ("Mentor \($0)", 1) })
        try f.makeDue(where: "d.device_token_id = \(sandbox.id)", secondsAgo: 60)
        var environment = push.variables
        environment["APNS_SANDBOX_ENDPOINT"] = sandboxServer.baseURL
        environment["PUSH_CONCURRENCY"] = "1" // the sandbox push first
        for run in 1...2 {
            let result = try Jobs.pushDeliver(db, environment: environment)
            #expect(result.status == 78, "run \(run): \(result.stderr)")
            #expect(result.stderr.contains("apns/sandbox") && result.stderr.contains("BadEnvironmentKeyInToken"), "\(result.stderr)")
            #expect(result.stderr.contains("APNS_ENVIRONMENTS"), "the way out is named: \(result.stderr)")
            #expect(try states() == ["sent": 10, "pending": 1], "run \(run)")
            #expect(try delivery(token: sandbox.token).attempts == 0, "no attempt counted")
        }
        #expect(sandboxServer.requests().count == 2, "one sandbox push tried per run")
        #expect(pushes(.apns).filter { $0.status == 200 }.count == 10, "each production push sent once")
    }

    /// The same key with `APNS_ENVIRONMENTS=production`: the developer's sandbox token is never pushed to, its
    /// delivery fails saying why, and the run ends 0 (it exited 78 every run, paging for a token nobody can
    /// serve). The dry run says FAIL for it beforehand. A value naming no environment is refused (78).
    @Test func anEnvironmentTheKeyDoesNotServeFailsItsTokensWithoutStoppingTheRun() throws {
        let (sandboxServer, sandbox) = try developersSandboxToken(keyRestrictedToProduction: false)
        defer { sandboxServer.stop() }
        _ = try pendingNotifications((0..<3).map { ("Mentor \($0)", 1) })
        var environment = push.variables
        environment["APNS_SANDBOX_ENDPOINT"] = sandboxServer.baseURL
        environment["APNS_ENVIRONMENTS"] = "production"

        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: environment)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.split(separator: "\n").contains { $0.hasPrefix("FAIL") && $0.contains("(sandbox)") && $0.contains("APNS_ENVIRONMENTS=production") },
                "\(plan.stdout)")

        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["sent": 3, "failed": 1])
        let failed = try delivery(token: sandbox.token)
        #expect(failed.attempts == 0, "never sent")
        #expect(failed.error == "APNs sandbox is not pushed to by this deployment (APNS_ENVIRONMENTS=production): the token of a development build")
        let events: [String] = try f.connection.query("""
            SELECT e.event FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id WHERE d.device_token_id = \(sandbox.id)
            """).map { try $0.decode(0) }
        #expect(events == ["failed"])
        #expect(sandboxServer.requests().isEmpty, "nothing sent to the sandbox")
        #expect(pushes(.apns).filter { $0.status == 200 }.count == 3)

        for bad in ["production,", "prod", "sandbox, staging"] {
            environment["APNS_ENVIRONMENTS"] = bad
            let refused = try Jobs.pushDeliver(db, environment: environment)
            #expect(refused.status == 78, "\(bad): \(refused.stderr)")
            #expect(refused.stderr.contains("APNS_ENVIRONMENTS: must be production, sandbox, or both"), "\(refused.stderr)")
        }
        environment["APNS_ENVIRONMENTS"] = " sandbox , production "
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0, "spaces around the names are fine")
    }

    /// A 410 for a token the app is changing at that moment (registering it again, moving it to another user):
    /// the retirement waited for the app's lock while holding queue rows the app's change wanted next (a
    /// deadlock when the token moves), or ran into the statement timeout. The token is left as it is; the
    /// delivery is settled all the same.
    @Test func aTokenTheAppIsChangingIsNotWaitedForToRetireIt() throws {
        let made = try pendingNotifications([("Kari", 1)])
        let device = made[0].devices[0]
        push.server.setToken(device.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000)))
        let app = try db.connect()
        try app.execute("BEGIN")
        try app.execute("UPDATE device_tokens SET app_id = app_id WHERE id = \(device.id)")
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.run("push-deliver", ["--statement-timeout", "2"], database: db, environment: environment)
        try app.execute("COMMIT")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try delivery(token: device.token).state == "failed")
        #expect(try f.connection.query("SELECT retired_at IS NULL FROM device_tokens WHERE id = \(device.id)").first!.decode(0, as: Bool.self),
                "left as it is")
    }

    /// The retirement settles the token's other queued pushes, locking their queue rows after the outcome
    /// write locked its own: a second pass, out of id order. The app cancelling those very pushes at that moment
    /// (pushes switched off: it locks them in id order, and the write's next) closed a circle, and the app's
    /// statement was the one aborted (40P01). The retirement now skips a row someone holds: the holder settles
    /// it, or the next claim finds its token retired.
    @Test func aRetirementDoesNotWaitForAQueuedPushTheAppIsCancelling() throws {
        let made = try pendingNotifications([("Kari", 1)])
        let device = made[0].devices[0]
        let later: Int = try f.connection.query("""
            WITH n AS (INSERT INTO notifications (user_id, category, title, body, dedupe_key) VALUES (\(made[0].user), 'inactivity', 't', 'b', 'later') RETURNING id),
                 d AS (INSERT INTO deliveries (notification_id, device_token_id) SELECT id, \(device.id) FROM n RETURNING id)
            INSERT INTO delivery_queue (delivery_id, provider, next_attempt_at) SELECT id, 'apns', now() + interval '1 hour' FROM d RETURNING delivery_id
            """).first!.decode(0)
        push.server.setToken(device.token, .unregistered(timestampMilliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 60_000))
        let app = try db.connect()
        try app.execute("BEGIN")
        try app.execute("SELECT delivery_id FROM delivery_queue WHERE delivery_id = \(later) FOR UPDATE")
        let result = try Jobs.run("push-deliver", ["--statement-timeout", "2"], database: db, environment: push.variables)
        try app.execute("COMMIT")
        #expect(result.status == 0, "\(result.stderr)")
        let states: [String] = try f.connection.query("SELECT state FROM deliveries ORDER BY id").map { try $0.decode(0) }
        #expect(states == ["failed", "pending"], "the pushed one settled; the one the app held left to its holder")
        #expect(try f.connection.query("SELECT retired_at IS NOT NULL FROM device_tokens WHERE id = \(device.id)").first!.decode(0, as: Bool.self))
        // Due now, it meets the retired token at the next claim: settled, never sent.
        try f.makeDue(where: "d.id = \(later)")
        let sent = pushes(.apns).count
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(pushes(.apns).count == sent)
        #expect(try f.connection.query("SELECT state FROM deliveries WHERE id = \(later)").first!.decode(0, as: String.self) == "failed")
    }

    @Test func aTokenReRegisteredAfterThe410TimestampIsKept() throws {
        let org = try f.organization("Org")
        let user = try f.mentor(org, "Back again", lastActivityDaysAgo: 20, devices: 0)
        let device = try f.device(user, provider: "apns")
        // APNs says the token stopped working long ago; the app has registered it again since.
        push.server.setToken(device.token, .unregistered(timestampMilliseconds: 1_700_000_000_000))
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0)
        let retired: Bool = try f.connection.query("SELECT retired_at IS NOT NULL FROM device_tokens WHERE id = \(device.id)").first!.decode(0)
        #expect(!retired)
        let d = try delivery(token: device.token)
        #expect(d.state == "failed")
        #expect(d.error?.contains("registered the token again since") == true, "\(String(describing: d.error))")
        let events: [String] = try f.connection.query("SELECT event FROM delivery_events ORDER BY id").map { try $0.decode(0) }
        #expect(events == ["failed"], "no 'retired' event for a token that was kept")
        #expect(!result.stderr.contains("retired: Unregistered"), "the log does not say it was retired: \(result.stderr)")
        #expect(result.stderr.contains("kept"))
    }

    @Test func whenEveryTokenIsBadDeviceTokenTheConfigurationIsSuspectedAndNoTokenIsRetired() throws {
        // As when production tokens are sent to the sandbox host: APNs calls every one of them bad.
        let made = try pendingNotifications((0..<25).map { ("Mentor \($0)", 1) })
        for device in made.flatMap(\.devices) { push.server.setToken(device.token, .badDeviceToken) }
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 78)
        #expect(result.stderr.contains("answered BadDeviceToken and none succeeded"))
        let retired: Int = try f.connection.query("SELECT count(*) FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 0)
        #expect(try states() == ["pending": 25])
        let attempts: Int = try f.connection.query("SELECT sum(attempts) FROM deliveries").first!.decode(0)
        #expect(attempts == 0)
    }

    @Test func badTokensAmongGoodOnesAreRetired() throws {
        let made = try pendingNotifications((0..<30).map { ("Mentor \($0)", 1) })
        let good = made.prefix(5).flatMap(\.devices)
        let bad = made.dropFirst(5).flatMap(\.devices)
        for device in bad { push.server.setToken(device.token, .badDeviceToken) }
        // The good ones go first, so the setup is proven before the bad answers arrive.
        try f.makeDue(where: "d.device_token_id = ANY(\(PostgresArray(good.map(\.id)))::bigint[])", secondsAgo: 60)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let retired: Int = try f.connection.query("SELECT count(*) FROM device_tokens WHERE retired_at IS NOT NULL").first!.decode(0)
        #expect(retired == 25)
        #expect(try states() == ["sent": 5, "failed": 25])
    }

    @Test func retryAfterDecidesTheNextAttempt() throws {
        let made = try pendingNotifications([("Busy", 1)])
        push.server.inject(.status503(retryAfter: 120))
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 69, "the provider asked us to wait: \(result.stderr)")
        let d = try delivery(token: made[0].devices[0].token)
        #expect(d.state == "retrying")
        #expect(d.attempts == 1)
        #expect(d.nextIn > 110 && d.nextIn <= 120)
        #expect(d.error == "ServiceUnavailable")
        let events: [String] = try f.connection.query("SELECT event FROM delivery_events ORDER BY id").map { try $0.decode(0) }
        #expect(events == ["retried"])
    }

    /// An outage: the provider answers 503 to everything. Each due push burned an attempt, run after run, and
    /// in an hour or two all were dead (and Google warns that senders who do not back off may be denylisted).
    /// A Retry-After stops the endpoint for the run at the first answer; five answers in a row from the
    /// provider's side without one do it too, sent one at a time once the first came (the window the first
    /// answer opens would put a hundred in at once). Its other pushes go back with no attempt counted.
    @Test func anOutageStopsTheProviderInsteadOfBurningEveryPushsAttempts() throws {
        _ = try pendingNotifications((0..<40).map { ("Mentor \($0)", 1) })
        push.server.inject(.status503(retryAfter: 120), count: 1000)
        let told = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(told.status == 69, "\(told.stderr)")
        #expect(told.stderr.contains("Retry-After 120"), "\(told.stderr)")
        #expect(pushes(.apns).count == 1, "one request, then it waited as asked")
        #expect(try states() == ["retrying": 1, "pending": 39])
        #expect(try f.connection.query("SELECT count(*) FROM deliveries WHERE attempts = 0").first!.decode(0, as: Int.self) == 39)

        push.server.clearFaults()
        push.server.clearRecorded()
        try f.connection.execute("DELETE FROM endpoint_holds") // the 120 s asked for are over
        try f.makeDue()
        push.server.inject(.status500, count: 1000)
        let failing = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(failing.status == 69, "\(failing.stderr)")
        #expect(pushes(.apns).count == 5, "five in a row, one at a time, then it stopped")
        #expect(try f.connection.query("SELECT sum(attempts)::int FROM deliveries").first!.decode(0, as: Int.self) == 6, "one attempt per request")

        // A Retry-After of 0 is no pause; one answer from the provider's side among successes stops nothing.
        push.server.clearFaults()
        try f.makeDue()
        push.server.inject(.status503(retryAfter: 0), count: 1)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        try f.makeDue()
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(try states() == ["sent": 40])
    }

    /// A Retry-After holds its endpoint in the runs after too, until then (an hour at most): push-deliver runs
    /// every minute, and the next run sent again a minute later, whatever the provider had asked (Google: honour
    /// it, or risk being denylisted). The dry run says so, and the hold over, the pushes go.
    @Test func aRetryAfterHoldsTheEndpointInLaterRunsUntilThen() throws {
        _ = try pendingNotifications((0..<3).map { ("Mentor \($0)", 1) })
        push.server.inject(.status503(retryAfter: 7200), count: 1)
        let told = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(told.status == 69, "\(told.stderr)")
        let heldFor: Double = try f.connection.query("""
            SELECT extract(epoch FROM held_until - now())::float8 FROM endpoint_holds WHERE endpoint = 'apns/production'
            """).first?.decode(0) ?? 0
        #expect(heldFor > 3500 && heldFor <= 3600, "asked for two hours, held for one at most: \(heldFor)")
        #expect(try states() == ["retrying": 1, "pending": 2])
        // The push answered so waits as long as the others, not the two hours (a day, at most, before).
        let waits: Double = try f.connection.query("""
            SELECT extract(epoch FROM max(q.next_attempt_at) - now())::float8
              FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.state = 'retrying'
            """).first!.decode(0)
        #expect(waits > 1700 && waits <= 3600, "its backoff is capped at an hour too: \(waits)")

        push.server.clearRecorded()
        try f.makeDue()
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("apns/production: held until "), "\(plan.stdout)")
        let planned = plan.stdout.split(separator: "\n").filter { $0.contains("delivery ") }
        #expect(planned.count == 3 && planned.allSatisfy { $0.hasPrefix("WAIT") && $0.contains("apns/production held") }, "\(planned)")
        let held = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(held.status == 69, "\(held.stderr)")
        #expect(held.stderr.contains("held until") && held.stderr.contains("Retry-After 7200 s"), "\(held.stderr)")
        #expect(pushes(.apns).isEmpty, "the run a minute later asks nothing")
        #expect(try states() == ["retrying": 1, "pending": 2])
        #expect(try f.connection.query("SELECT sum(attempts)::int FROM deliveries").first!.decode(0, as: Int.self) == 1)
        // With nothing of its due, a held endpoint is no trouble of the run's (it paged for the hour).
        try f.connection.execute("UPDATE delivery_queue SET next_attempt_at = now() + interval '1 hour'")
        let quiet = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(quiet.status == 0, "\(quiet.stderr)")

        try f.connection.execute("UPDATE endpoint_holds SET held_until = now() - interval '1 second'")
        try f.makeDue()
        let after = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try states() == ["sent": 3])
    }

    /// The claim and the fold of its lost claims into the deliveries' attempts commit together. The fold ran as a
    /// statement of its own: when it failed (a missing grant, a lock, a timeout), the rows stayed leased with one
    /// more lost claim each and were never sent, run after run; once the fault was fixed they were given up as
    /// dead, "claimed 10 time(s) … each of which may have sent it", never having been sent at all.
    @Test func aClaimWhoseLostClaimsCannotBeRecordedLeavesItsRowsAsTheyWere() throws {
        let made = try pendingNotifications([("Kari", 1)])
        let kari = made[0].devices[0].token
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second'")
        // The fold's history row cannot be written (standing in for a missing grant, a lock held, a timeout).
        try f.connection.execute("""
            CREATE FUNCTION refuse_retried() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.event = 'retried' THEN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '55P03'; END IF; RETURN NEW; END $$
            """)
        try f.connection.execute("""
            CREATE TRIGGER refuse_retried BEFORE INSERT ON delivery_events FOR EACH ROW EXECUTE FUNCTION refuse_retried();
            """)
        for _ in 0..<3 {
            let result = try Jobs.pushDeliver(db, environment: push.variables)
            #expect(result.status == 75, "\(result.stderr)")
            try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second' WHERE lease_until > now()")
        }
        let queued: [Int] = try f.connection.query("SELECT lost_claims FROM delivery_queue").map { try $0.decode(0) }
        #expect(queued == [0], "each failed claim left a lost claim behind: \(queued)")
        #expect(pushes(.apns).isEmpty)

        try f.connection.execute("DROP TRIGGER refuse_retried ON delivery_events")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let sent = try delivery(token: kari)
        #expect(sent.state == "sent" && sent.attempts == 2, "the one lost claim before the fault, and this one: \(sent)")
    }

    /// A run that dies after sending (killed, out of memory, the host down, a crash on one answer) leaves its
    /// lease behind, and the push goes again once the lease runs out, as it must: nothing says it arrived. But
    /// no attempt was written, so a run that died the same way each time sent the same pushes every lease, for
    /// ever. Each claim that ended without an outcome counts as an attempt (0031): at PUSH_MAX_ATTEMPTS the push
    /// is given up, dead, and not sent again. The dry run says so.
    @Test func claimsThatEndedWithoutAnOutcomeCountAsAttempts() throws {
        let made = try pendingNotifications([("Kari", 1), ("Ola", 1)])
        let kari = made[0].devices[0].token, ola = made[1].devices[0].token
        // What a run killed after sending leaves: its lease, run out. Kari's push had been tried 7 times before.
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second'")
        try f.connection.execute("UPDATE deliveries d SET attempts = 7 FROM device_tokens t WHERE t.id = d.device_token_id AND t.token = \(kari)")
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        let lines = plan.stdout.split(separator: "\n").filter { $0.contains("delivery ") }
        #expect(lines.contains { $0.hasPrefix("DEAD") && $0.contains("attempt 9") && $0.contains("ended without recording an answer") }, "\(plan.stdout)")
        #expect(lines.contains { $0.hasPrefix("SEND") && $0.contains("attempt 2") }, "\(plan.stdout)")

        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let given = try delivery(token: kari)
        #expect(given.state == "dead" && given.attempts == 8, "\(given)")
        #expect(given.error?.contains("claimed 1 time(s) by runs that ended without recording an answer") == true, "\(given)")
        #expect(pushes(.apns).map(\.deviceToken) == [ola], "Kari's push is not sent a ninth time")
        let sent = try delivery(token: ola)
        #expect(sent.state == "sent" && sent.attempts == 2, "the lost claim and this one: \(sent)")
        let history: [String] = try f.connection.query("""
            SELECT e.event || ' ' || e.attempt || ' ' || coalesce(e.detail, '') FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
              JOIN device_tokens t ON t.id = d.device_token_id WHERE t.token = \(ola) ORDER BY e.id
            """).map { try $0.decode(0) }
        #expect(history.first?.hasPrefix("retried 1 claimed by a run that ended without recording an answer") == true, "\(history)")
        #expect(history.last?.hasPrefix("sent 2") == true, "\(history)")

        // The lost claim is counted once, whatever the outcome (here a retry).
        let more = try pendingNotifications([("Per", 1)])
        let per = more[0].devices[0].token
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second'")
        push.server.inject(.status500, count: 1)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        let retried = try delivery(token: per)
        #expect(retried.state == "retrying" && retried.attempts == 2, "\(retried)")
        #expect(try f.connection.query("SELECT lost_claims FROM delivery_queue").map { try $0.decode(0, as: Int.self) } == [0])
        try f.makeDue()
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(try delivery(token: per).attempts == 3)
    }

    /// A run that dies on the same push every time (here: killed as that push reaches the provider, its answer
    /// unrecorded) charged a lost claim to every delivery of its claim, sent or not, on every run, and after
    /// PUSH_MAX_ATTEMPTS of them gave them all up, dead, most never sent (stop 28's concurrency review: 70 dead
    /// after 8 kills in a row). Deliveries in doubt now go out a few at a time (0045): the one it dies on is
    /// given up alone, and the others are sent.
    /// With workers, a crash kills them all: one claims deliveries in doubt at a time, or every crash left the
    /// other worker's few in doubt too (a review saw the push a run died on sent 40 times before it was given up).
    @Test(arguments: ["1", "2"]) func aRunThatDiesOnOnePushEveryTimeGivesUpThatPushAlone(workers: String) throws {
        _ = try pendingNotifications((0..<12).map { ("Mentor \($0)", 1) })
        let tokens: [String] = try f.connection.query("""
            SELECT t.token FROM deliveries d JOIN device_tokens t ON t.id = d.device_token_id ORDER BY d.id
            """).map { try $0.decode(0) }
        let poison = tokens[5]
        push.server.inject(.slow(seconds: 0.3), count: 1_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "4"
        // Four: a push claimed beside the one the runs die on may be charged three times (in the claim a run
        // died in, then in its careful batches of pushes lost once and twice) and must still go out.
        environment["PUSH_MAX_ATTEMPTS"] = "4"
        environment["PUSH_WORKERS"] = workers
        var killed = 0
        var last: ProcessRunner.Result?
        for _ in 0..<8 {
            let before = pushes(.apns).filter { $0.deviceToken == poison }.count
            let running = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url], environment: environment)
            let deadline = Date().addingTimeInterval(30)
            var exited = false
            while Date() < deadline {
                if pushes(.apns).filter({ $0.deviceToken == poison }).count > before { kill(running.pid, SIGKILL); killed += 1; break }
                let stat = (try? String(contentsOfFile: "/proc/\(running.pid)/stat", encoding: .utf8)) ?? ""
                if stat.contains(") Z ") { exited = true; break }
                usleep(5_000)
            }
            let result = try running.wait()
            if exited { last = result; break }
            // What the dead run leaves: its lease, run out.
            try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second' WHERE lease_until > now()")
        }
        let result = try #require(last, "a run ended by itself")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(killed == 4, "each run died on the push until it was given up: \(killed)")
        #expect(result.stderr.contains("are in doubt") && result.stderr.contains("go out before the others, a few at a time"), "\(result.stderr)")
        #expect(try states() == ["sent": 11, "dead": 1], "only the push the runs died on is given up")
        let summary = result.summary?["push"] as? [String: Any]
        #expect(summary?["dead_after_lost_claims"] as? Int == 1 && (summary?["lost_claims_counted"] as? Int ?? 0) >= 1,
                "the summary says why it is dead: \(result.stdout)")
        #expect(result.stderr.contains("of the dead given up after such claims"), "\(result.stderr)")
        let given = try delivery(token: poison)
        #expect(given.state == "dead" && given.error?.contains("ended without recording an answer") == true, "\(given)")
        for token in tokens where token != poison {
            #expect(pushes(.apns).contains { $0.deviceToken == token && $0.status == 200 }, "\(token.suffix(6)) went out")
        }
        #expect(try f.connection.query("SELECT count(*) FROM delivery_queue").first!.decode(0, as: Int.self) == 0)
    }

    /// While one worker sends the deliveries in doubt, the others wait, then go on: they ended their runs at once
    /// (their claim came back empty), and a few rows in doubt halved a whole run (review of 0c52969).
    @Test func theOtherWorkersWaitWhileOneSendsThePushesInDoubt() throws {
        try bulkDeliveries(1_500)
        try f.connection.execute("UPDATE delivery_queue SET lost_in_a_row = 1 WHERE delivery_id % 300 = 7")
        push.server.inject(.slow(seconds: 0.05), count: 10_000)
        var environment = push.variables
        environment["PUSH_WORKERS"] = "2"
        environment["PUSH_CONCURRENCY"] = "10"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["sent": 1_500])
        let requests = pushes(.apns)
        let lastQuarter = requests.suffix(requests.count / 4)
        #expect(Set(lastQuarter.map(\.connectionID)).count == 2, "both workers send to the end: \(Set(requests.map(\.connectionID)))")
    }

    /// A job's own engine claims its run's rows in id order from a floor; a careful claim takes rows in doubt
    /// only, and moved the floor past the run's other rows: they waited for push-deliver (294 of 300 in a review).
    @Test func aJobsOwnPushesInDoubtLeaveNoneOfItsOthersBehind() throws {
        let org = try f.organization("Org")
        for i in 0..<60 { _ = try f.mentor(org, "Mentor \(i)", lastActivityDaysAgo: 20, devices: 1) }
        // Some of the run's own rows in doubt as they are queued (standing in for an engine replaced mid-run).
        try f.connection.execute("""
            CREATE FUNCTION doubt_some() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.delivery_id % 20 = 7 THEN NEW.lost_in_a_row := 1; END IF; RETURN NEW; END $$
            """)
        try f.connection.execute("CREATE TRIGGER doubt_some BEFORE INSERT ON delivery_queue FOR EACH ROW EXECUTE FUNCTION doubt_some()")
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["sent": 60], "the job sends all of its pushes")
    }

    /// A claim that counts a lost claim on deliveries in doubt and gives most of them back (they go out a few at
    /// a time) must not forget it: one whose attempts that claim spent was sent again by a later claim (which
    /// found no lost claim of its own on the row), recorded with more attempts than PUSH_MAX_ATTEMPTS.
    @Test func aPushWhoseLostClaimSpentItsAttemptsIsGivenUpEvenIfGivenBack() throws {
        _ = try pendingNotifications((0..<6).map { ("Mentor \($0)", 1) })
        try f.connection.execute("UPDATE deliveries SET attempts = 2")
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() - interval '1 second'")
        var environment = push.variables
        environment["PUSH_MAX_ATTEMPTS"] = "3"
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: environment)
        #expect(plan.stdout.split(separator: "\n").filter { $0.hasPrefix("DEAD") }.count == 6, "\(plan.stdout)")
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["dead": 6], "each was tried three times")
        #expect(pushes(.apns).isEmpty, "none sent a fourth time")
    }

    /// A run that fails part way (here its database connections end) says in its summary (and its job_runs row,
    /// when that can still be written) what went out before: it said nothing, and an operator could not tell
    /// whether any push had gone.
    @Test func aRunThatFailsPartWaySaysWhatWentOutBefore() throws {
        let running = try deliverSlowly(40, answersAfter: 0.1, concurrency: 1)
        defer { kill(running.pid, SIGKILL) }
        let result = try breakConnections(of: "push-deliver", running, onceSent: 5)
        #expect(result.status != 0, "\(result.stderr)")
        let sent = (result.summary?["push"] as? [String: Any])?["sent"] as? Int ?? 0
        #expect(sent >= 5, "the pushes that went out are in the summary: \(result.stdout)")
        #expect(sent <= pushes(.apns).count)
    }

    /// The connections end under a run (an admin, a failover, a server restart): the outcomes of the pushes
    /// already sent are written on a new connection, and the pushes claimed but not sent are given back. Before,
    /// one dropped connection left every push sent since the last write unrecorded, to be sent again once its
    /// lease ran out, and the claimed ones leased for the lease's length, each then counted as an attempt.
    @Test func aBrokenConnectionLosesNoOutcomeAndHoldsNoClaim() throws {
        let running = try deliverSlowly(60, answersAfter: 0.1, concurrency: 4)
        defer { kill(running.pid, SIGKILL) }
        let result = try breakConnections(of: "push-deliver", running, onceSent: 8)
        try expectNothingLostOrHeld(result)
        // The run's own row says how it ended, written on a new connection (it stayed "running").
        let ended: [String] = try f.connection.query("SELECT coalesce(error, '') FROM job_runs WHERE job = 'push-deliver' AND finished_at IS NOT NULL").map { try $0.decode(0) }
        #expect(ended.count == 1 && ended[0].contains("connection"), "\(ended)")

        // The next run sends the rest, and none of them twice.
        let next = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try states() == ["sent": 60])
        #expect(Set(pushes(.apns).compactMap(\.deviceToken)).count == pushes(.apns).count, "no push sent twice")
    }

    /// The same in a scenario job, which delivers on its own connection, in line: the outcomes of the pushes it
    /// sent are written on a new connection when that one breaks (they were lost, and sent again once their
    /// lease ran out), and the claimed ones not sent are given back.
    @Test func aScenarioJobWhoseConnectionBreaksWhileItDeliversLosesNoOutcome() throws {
        let running = try inactivityCheckDeliveringSlowly(answersAfter: 0.1, concurrency: 2)
        defer { kill(running.pid, SIGKILL) }
        let result = try breakConnections(of: "inactivity-check", running, onceSent: 6)
        #expect(result.status == 69, "\(result.stderr)")
        try expectNothingLostOrHeld(result)
        let answered = pushes(.apns).filter { $0.status == 200 }.count
        #expect((result.summary?["push"] as? [String: Any])?["sent"] as? Int == answered, "the summary says what went out: \(result.stdout)")
    }

    /// The answers of a window came together and one is slow: those answered are recorded within a second, not
    /// when the slow one comes (up to the request timeout; a crash meanwhile sent them all again).
    @Test func whatWasAnsweredIsRecordedWhileASlowAnswerIsAwaited() throws {
        _ = try pendingNotifications((0..<40).map { ("Mentor \($0)", 1) })
        push.server.inject(.slow(seconds: 0), count: 1) // the connection's first request, answered at once
        push.server.inject(.slow(seconds: 6), count: 1) // then one of the window is slow
        let running = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url], environment: push.variables)
        defer { kill(running.pid, SIGKILL) }
        let deadline = Date().addingTimeInterval(20)
        while pushes(.apns).count < 40 && Date() < deadline { usleep(10_000) }
        #expect(pushes(.apns).count == 40)
        usleep(2_000_000)
        #expect(try states() == ["sent": 39, "pending": 1], "recorded while the slow answer is awaited")
        let result = try running.wait(timeout: 20)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["sent": 40])
    }

    @Test func withoutRetryAfterTheBackoffIsExponentialWithJitterThenDead() throws {
        let made = try pendingNotifications([("Flaky", 1)])
        let token = made[0].devices[0].token
        var environment = push.variables
        environment["PUSH_MAX_ATTEMPTS"] = "2"
        push.server.inject(.status500, count: 2)
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0)
        let first = try delivery(token: token)
        #expect(first.state == "retrying")
        #expect(first.nextIn > 10 && first.nextIn <= 30)
        try f.makeDue()
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0)
        let second = try delivery(token: token)
        #expect(second.state == "dead")
        #expect(second.attempts == 2)
        #expect(second.error?.contains("gave up after 2 attempts") == true)
    }

    /// Google asks for exponential backoff from one minute on a quota: the minute is the first step, and
    /// the steps double (a fixed minute killed a device over its quota in about 7 minutes).
    @Test func fcmQuotaExceededBacksOffFromAMinuteAndKeepsGrowing() throws {
        let made = try pendingNotifications([("Chatty", 2)])
        let android = made[0].devices[1]
        push.server.setToken(android.token, .throttled)
        var floors: [Double] = []
        for attempt in 1...4 {
            #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
            let d = try delivery(token: android.token)
            #expect(d.state == "retrying" && d.attempts == attempt)
            #expect(d.error?.hasPrefix("QUOTA_EXCEEDED") == true, "\(String(describing: d.error))")
            floors.append(d.nextIn)
            try f.makeDue(where: "d.state = 'retrying'")
        }
        // Full jitter within each step: [60, 60], [60, 120], [120, 240], [240, 480] seconds.
        for (wait, range) in zip(floors, [55.0...60, 55.0...120, 115.0...240, 235.0...480]) {
            #expect(range.contains(wait), "waits \(floors)")
        }
    }

    /// Over the project's quota (messages per minute) every push is refused until it refills: each cost its
    /// delivery an attempt while the window kept sending into the refusal. The pushes stop for the run, none
    /// counted, and the next run sends them.
    @Test func fcmOverTheProjectsQuotaStopsForTheRunWithoutBurningAttempts() throws {
        let push = try PushEnvironment { $0.fcmQuotaPerMinute = 3 }
        try bulkDeliveries(20, provider: "fcm")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("the project's message quota"), "\(result.stderr)")
        let rows: [(String, Int)] = try f.connection.query("SELECT state, attempts FROM deliveries ORDER BY id").map { (try $0.decode(0), try $0.decode(1)) }
        #expect(rows.filter { $0.0 == "sent" }.count == 3, "\(rows)")
        #expect(rows.filter { $0.0 == "pending" && $0.1 == 0 }.count == 17, "waiting, no attempt counted: \(rows)")

        // FCM is held for the quota's Retry-After, a minute at least (Google's ask): the next run, a minute later,
        // sent into the quota again, and so did every scenario job in between.
        let heldFor: Double = try f.connection.query("""
            SELECT extract(epoch FROM held_until - now())::float8 FROM endpoint_holds WHERE endpoint = 'fcm/-'
            """).first?.decode(0) ?? 0
        #expect(heldFor > 50 && heldFor <= 60, "held for a minute: \(heldFor)")
        push.server.clearRecorded()
        let next = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(next.status == 69 && next.stderr.contains("held until"), "\(next.stderr)")
        #expect(push.server.requests().filter { $0.provider == .fcm }.isEmpty, "the next run asks nothing while the quota refills")
    }

    @Test func theMetricsCountPushesByProviderAndOutcome() throws {
        _ = try pendingNotifications([("Kari", 2), ("Ola", 1)])
        let directory = push.directory.appendingPathComponent("metrics")
        var environment = push.variables
        environment["METRICS_DIR"] = directory.path
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0)
        let text = try String(contentsOf: directory.appendingPathComponent("mentor-push-push-deliver.prom"), encoding: .utf8)
        #expect(text.contains(#"mentor_push_last_run_pushes{mentor_push_job="push-deliver",provider="apns",outcome="sent"} 2"#), "\(text)")
        #expect(text.contains(#"mentor_push_last_run_pushes{mentor_push_job="push-deliver",provider="fcm",outcome="sent"} 1"#))
        #expect(text.contains(#"mentor_push_delivery_backlog_due{mentor_push_job="push-deliver"} 0"#))
        #expect(text.contains("# TYPE mentor_push_last_success_timestamp_seconds gauge"))
    }

    @Test func aRejectedMessageIsDeadWithoutRetry() throws {
        let made = try pendingNotifications([("Big", 1)])
        push.server.inject(.payloadTooLarge)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        let d = try delivery(token: made[0].devices[0].token)
        #expect(d.state == "dead")
        #expect(d.error == "rejected: PayloadTooLarge")
    }

    @Test func brokenAPNsCredentialsExit78WithNoAttemptBurnedAndNothingSent() throws {
        _ = try pendingNotifications([("A", 1), ("B", 1), ("C", 1)])
        // A key the fake does not know: every provider token is InvalidProviderToken.
        let other = TestCertificates.apnsKey()
        let keyFile = push.directory.appendingPathComponent("other.p8").path
        try other.pkcs8PEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
        var environment = push.variables
        environment["APNS_KEY_FILE"] = keyFile
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78)
        #expect(result.stderr.contains("InvalidProviderToken"))
        #expect(result.stderr.contains("check APNS_KEY_FILE, APNS_KEY_ID and APNS_TEAM_ID"), "names the settings to check")
        #expect(try states() == ["pending": 3])
        let attempts: Int = try f.connection.query("SELECT sum(attempts) FROM deliveries").first!.decode(0)
        #expect(attempts == 0)
        #expect(!pushes(.apns).isEmpty)
        #expect(pushes(.apns).allSatisfy { $0.status == 403 }, "nothing was delivered")
    }

    /// A provider token minted moments ago and called expired: none is minted again (at most every 20 minutes, Apple's
    /// floor), and the message says what that points to, the clock. It said "fresh credentials did not cure it", though
    /// none had been tried, which sent the operator to the key.
    @Test func expiredProviderTokenMomentsAfterMintingIsAConfigurationProblemOfTheClock() throws {
        _ = try pendingNotifications([("A", 1)])
        push.server.inject(.expiredProviderToken, count: 5)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 78)
        #expect(result.stderr.contains("ExpiredProviderToken for credentials made less than 20 minutes ago") && result.stderr.contains("check NTP"), "\(result.stderr)")
        #expect(!result.stderr.contains("did not cure it"), "\(result.stderr)")
        #expect(pushes(.apns).count == 1, "asked once: no fresh token was made")
        #expect(try states() == ["pending": 1])
    }

    @Test func anFCM401GetsOneFreshAccessTokenAndTheMessageIsSentAgain() throws {
        let made = try pendingNotifications([("Android", 2)])
        let android = made[0].devices[1]
        // FCM answers 401 UNAUTHENTICATED (no FcmError detail) once, as for an access token revoked early.
        push.server.inject(.expiredProviderToken, count: 1, provider: .fcm)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let d = try delivery(token: android.token)
        #expect(d.state == "sent", "\(d) \(result.stderr)")
        #expect(d.attempts == 1, "the resend after a refresh is not a new attempt")
        #expect(pushes(.oauth).count == 2, "one fresh token after the 401")
        #expect(pushes(.fcm).map(\.status) == [401, 200])
    }

    @Test func anFCM401ThatAFreshTokenDoesNotCureStopsFCMWith78() throws {
        let made = try pendingNotifications([("Android", 2)])
        push.server.inject(.expiredProviderToken, count: 10, provider: .fcm)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 78)
        #expect(result.stderr.contains("UNAUTHENTICATED"))
        let fcm = try delivery(token: made[0].devices[1].token)
        #expect(fcm.state == "pending")
        #expect(fcm.attempts == 0)
    }

    /// FCM's THIRD_PARTY_AUTH_ERROR is about the APNs (or Web Push) key in the Firebase project, for iOS and web
    /// targets only. It stopped FCM for the run, and the refused push, released as it was, headed the next
    /// run's claim and stopped FCM again: no Android push went out, run after run. Now it is an alarm (78) and
    /// that push is tried again in an hour (an attempt each time: dead after PUSH_MAX_ATTEMPTS, not waiting for
    /// ever), while the provider's others go on.
    @Test func fcmThirdPartyAuthErrorHoldsThatPushAndTheOtherFCMPushesGoOn() throws {
        let made = try pendingNotifications([("Kari", 2), ("Ola", 2)])
        let iphoneViaFCM = made[0].devices[1].token, android = made[1].devices[1].token
        push.server.setToken(iphoneViaFCM, .thirdPartyAuthError)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("THIRD_PARTY_AUTH_ERROR") && result.stderr.contains("Firebase"), "\(result.stderr)")
        #expect((result.summary?["push"] as? [String: Any])?["waiting_for_setup"] as? Int == 1, "\(result.stdout)")
        #expect(try states() == ["sent": 3, "retrying": 1], "both APNs pushes and the Android one went")
        #expect(pushes(.fcm).compactMap(\.deviceToken).sorted() == [android, iphoneViaFCM].sorted())
        let held = try delivery(token: iphoneViaFCM)
        #expect(held.attempts == 1, "\(held)")
        #expect(held.nextIn > 3500 && held.nextIn <= 3600, "due again in an hour: \(held)")
        let history: [String] = try f.connection.query("""
            SELECT e.event || ' ' || e.attempt || ' ' || e.detail FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
              JOIN device_tokens t ON t.id = d.device_token_id WHERE t.token = \(iphoneViaFCM) ORDER BY e.id
            """).map { try $0.decode(0) }
        #expect(history.count == 1 && history[0].hasPrefix("retried 1 THIRD_PARTY_AUTH_ERROR"), "\(history)")

        // The next run does not send it again, nor raise the alarm.
        let next = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(pushes(.fcm).count == 2)
    }

    @Test func aDeliveryPastItsExpiryIsMarkedExpiredNotSent() throws {
        _ = try pendingNotifications([("Late", 1)])
        try f.connection.execute("UPDATE notifications SET expires_at = now() - interval '1 minute'")
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(try states() == ["expired": 1])
        #expect(pushes(.apns).isEmpty)
    }

    @Test func aDroppedConnectionIsRetriedAndSentOnTheNextRun() throws {
        let made = try pendingNotifications([("Dropped", 1)])
        push.server.inject(.dropConnection)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(try delivery(token: made[0].devices[0].token).state == "retrying")
        try f.makeDue()
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0)
        #expect(try delivery(token: made[0].devices[0].token).state == "sent")
    }

    /// One connection that breaks takes every push on it down at once: each of them is retried (it may have
    /// arrived), but they are one failure of the provider's side, not one each. Counted one each, a window of
    /// 20 in flight made "5 answers in a row from the provider's side" and stopped the endpoint for the run (69)
    /// while the provider was up.
    @Test func onePushesWindowLostWithItsConnectionIsOneFailureNotOneEach() throws {
        _ = try pendingNotifications((0..<40).map { ("Mentor \($0)", 1) })
        push.server.inject(.slow(seconds: 0.3), count: 10)
        push.server.inject(.dropConnection)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "20"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("in a row from the provider's side"), "\(result.stderr)")
        let states = try states()
        #expect(states["pending"] == nil, "none held back for the next run: \(states)")
        #expect((states["retrying"] ?? 0) >= 5, "the pushes on the broken connection are retried: \(states)")
        #expect((states["sent"] ?? 0) + (states["retrying"] ?? 0) == 40, "\(states)")
    }

    /// A TLS server on loopback that speaks HTTP/1.1 only (Python's), with the fake's certificate, answering every
    /// POST with `status` and `body` (`{n}` numbered from 1); its URL, once it listens.
    func http1Server(status: Int, contentType: String, body: String) throws -> (url: String, process: ProcessRunner.Running) {
        let script = """
        import http.server, ssl, sys
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def do_POST(self):
                self.rfile.read(int(self.headers.get('content-length', 0)))
                body = sys.argv[6].replace('{n}', str(H.n)).encode(); H.n += 1
                self.send_response(int(sys.argv[4])); self.send_header('content-type', sys.argv[5])
                self.send_header('content-length', str(len(body))); self.end_headers(); self.wfile.write(body)
            def log_message(self, *a): pass
        H.n = 1
        s = http.server.HTTPServer(('127.0.0.1', 0), H)
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[1], sys.argv[2])
        c.set_alpn_protocols(['http/1.1'])
        s.socket = c.wrap_socket(s.socket, server_side=True)
        open(sys.argv[3] + '.tmp', 'w').write(str(s.server_address[1])); __import__('os').rename(sys.argv[3] + '.tmp', sys.argv[3])
        s.timeout = 20
        for _ in range(5): s.handle_request()
        """
        let dir = push.directory
        let name = "h1-\(UUID().uuidString.prefix(8))"
        let pem = dir.appendingPathComponent("\(name).pem"), key = dir.appendingPathComponent("\(name).key"), portFile = dir.appendingPathComponent("\(name).port")
        try push.server.configuration.certificateChainPEM.write(to: pem, atomically: true, encoding: .utf8)
        try push.server.configuration.privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        let process = try ProcessRunner.start("/usr/bin/python3", ["-c", script, pem.path, key.path, portFile.path, String(status), contentType, body])
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: portFile.path) && Date() < deadline { usleep(20_000) }
        let port = try String(contentsOf: portFile, encoding: .utf8)
        return ("https://127.0.0.1:\(port)", process)
    }

    /// An FCM endpoint answering over HTTP/1.1 (a TLS-intercepting proxy trusted through PUSH_CA_FILE): the
    /// push was sent and accepted, but its answer was thrown away and the delivery released, so every run sent
    /// it again. The answer is recorded now, and FCM stops for the run (78), as the fact sheet asks.
    @Test func anAnswerWithoutHTTP2IsRecordedAndTheProviderStops() throws {
        let made = try pendingNotifications([("Android", 2)])
        let server = try http1Server(status: 200, contentType: "application/json", body: #"{"name": "projects/p/messages/h1-{n}"}"#)
        defer { kill(server.process.pid, SIGKILL); _ = try? server.process.wait() }
        var environment = push.variables
        environment["FCM_ENDPOINT"] = server.url
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("answered without HTTP/2"), "\(result.stderr)")
        let fcm = try delivery(token: made[0].devices[1].token)
        #expect(fcm.state == "sent" && fcm.messageID == "projects/p/messages/h1-1", "recorded as the answer said: \(fcm)")
        #expect(try delivery(token: made[0].devices[0].token).state == "sent", "APNs goes on")
        let again = try Jobs.pushDeliver(db, environment: environment)
        #expect(again.status == 0, "nothing left to send again: \(again.stderr)")
    }

    /// A proxy's own answer over HTTP/1.1 (a 502 page) is not the provider's: the push waits, no attempt counted
    /// (taken as a provider's 5xx, it cost an attempt every run until the push was dead).
    @Test func aProxysAnswerWithoutHTTP2CostsNoAttempt() throws {
        let made = try pendingNotifications([("Android", 2)])
        let server = try http1Server(status: 502, contentType: "text/html", body: "<html>Bad Gateway</html>")
        defer { kill(server.process.pid, SIGKILL); _ = try? server.process.wait() }
        var environment = push.variables
        environment["FCM_ENDPOINT"] = server.url
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "\(result.stderr)")
        let fcm = try delivery(token: made[0].devices[1].token)
        #expect(fcm.state == "pending" && fcm.attempts == 0, "\(fcm)")
    }

    @Test func dryRunListsWhatItWouldSendAndSendsNothing() throws {
        let made = try pendingNotifications([("Kari", 2)])
        let before = try f.fingerprint()
        let result = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(result.status == 0)
        #expect(try f.fingerprint() == before)
        #expect(push.server.requests().isEmpty)
        #expect(result.stdout.contains("SEND"))
        #expect(result.stdout.contains("apns …\(made[0].devices[0].token.suffix(6))"))
        #expect(!result.stdout.contains(made[0].devices[0].token))
        // JSON: every line an object (a text header first broke `| jq`).
        let json = try Jobs.pushDeliver(db, ["--dry-run", "--format", "json"], environment: push.variables)
        #expect(json.status == 0)
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 3, "two deliveries and the summary: \(json.stdout)")
        for line in lines { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "\(line)") }
        // The text's verb and attempt, for tools to filter on (the JSON had only the sentence of the action).
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(first["verb"] as? String == "SEND" && first["attempt"] as? Int == 1, "\(first)")
    }

    @Test func missingOrMalformedConfigurationExits78NamingTheVariable() throws {
        var environment = push.variables
        environment.removeValue(forKey: "APNS_KEY_ID")
        let missing = try Jobs.pushDeliver(db, environment: environment)
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("APNS_KEY_ID is not set"))

        environment = push.variables
        environment["APNS_KEY_FILE"] = "/nonexistent/AuthKey.p8"
        let noFile = try Jobs.pushDeliver(db, environment: environment)
        #expect(noFile.status == 78)
        #expect(noFile.stderr.contains("APNS_KEY_FILE: no such file: /nonexistent/AuthKey.p8"))

        environment = push.variables
        let broken = push.directory.appendingPathComponent("broken.json").path
        try "{ not json".write(toFile: broken, atomically: true, encoding: .utf8)
        environment["FCM_SERVICE_ACCOUNT_FILE"] = broken
        let badJSON = try Jobs.pushDeliver(db, environment: environment)
        #expect(badJSON.status == 78)
        #expect(badJSON.stderr.contains("FCM_SERVICE_ACCOUNT_FILE: \(broken) is not a JSON object"))
        // Given by the flag, the message names the flag (it named FCM_SERVICE_ACCOUNT_FILE, which was not set).
        environment.removeValue(forKey: "FCM_SERVICE_ACCOUNT_FILE")
        let flag = try Jobs.pushDeliver(db, ["--fcm-service-account-file", broken], environment: environment)
        #expect(flag.status == 78)
        #expect(flag.stderr.contains("--fcm-service-account-file: \(broken) is not a JSON object"), "\(flag.stderr)")

        let none = try Jobs.pushDeliver(db, environment: ["APNS_KEY_FILE": "", "APNS_KEY_ID": "", "APNS_TEAM_ID": "", "APNS_TOPIC": "", "FCM_SERVICE_ACCOUNT_FILE": "", "GOOGLE_APPLICATION_CREDENTIALS": ""])
        #expect(none.status == 78)
        #expect(none.stderr.contains("no push provider is configured"))
    }

    /// Without FCM's settings (the README's advice for a provider you do not use) while FCM devices are
    /// registered, push-deliver sent APNs's pushes, exited 0 and said nothing of FCM's, which wait: it now warns,
    /// naming the setting.
    @Test func pushesForAProviderThatIsNotConfiguredAreSaidToWait() throws {
        _ = try pendingNotifications([("Kari", 2), ("Ola", 2)])
        var environment = push.variables
        environment["FCM_SERVICE_ACCOUNT_FILE"] = ""
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = ""
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("2 push(es) to fcm devices are due and wait: fcm is not configured (FCM_SERVICE_ACCOUNT_FILE)"), "\(result.stderr)")
        #expect(!result.stderr.contains("apns devices are due"), "\(result.stderr)")
        #expect(try states() == ["sent": 2, "pending": 2])
    }

    @Test func noKeyAndNoWholeTokenInAnyLogLine() throws {
        let made = try pendingNotifications([("Kari", 2), ("Ola", 2)])
        for device in made.flatMap(\.devices) { push.server.setToken(device.token, .badDeviceToken) }
        let result = try Jobs.pushDeliver(db, ["--log-level", "trace"], environment: push.variables)
        let output = result.stdout + result.stderr
        #expect(output.contains("retired"))
        for device in made.flatMap(\.devices) { #expect(!output.contains(device.token)) }
        let keyLines = (push.apnsKeyPEM + push.serviceAccountPrivateKeyPEM).split(separator: "\n").filter { !$0.hasPrefix("-----") }
        for line in keyLines { #expect(!output.contains(line)) }
        #expect(!output.contains("ya29."), "no access token")
    }

    /// `count` mentors with one APNs token and one pending delivery each, made in one statement.
    func bulkDeliveries(_ count: Int, provider: String = "apns") throws {
        let org = try f.organization("Org")
        try f.connection.execute("""
            WITH u AS (
                INSERT INTO users (organization_id, role, display_name, joined_at)
                SELECT \(org), 'peer_mentor', 'Mentor ' || g, now() - interval '100 days' FROM generate_series(1, \(count)) g RETURNING id
            ), t AS (
                INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id)
                SELECT id, \(provider), CASE \(provider) WHEN 'apns' THEN md5(id::text) || md5(id::text || 'x') ELSE repeat(md5(id::text), 4) END,
                       CASE \(provider) WHEN 'apns' THEN 'production' END, 'no.likeperson.app' FROM u RETURNING id, user_id
            ), n AS (
                INSERT INTO notifications (user_id, category, title, body, dedupe_key)
                SELECT user_id, 'inactivity', 'Title', 'Body', 'bulk:' || user_id FROM t RETURNING id, user_id
            ), d AS (
                INSERT INTO deliveries (notification_id, device_token_id) SELECT n.id, t.id FROM n JOIN t USING (user_id) RETURNING id
            )
            INSERT INTO delivery_queue (delivery_id, provider) SELECT id, \(provider) FROM d
            """)
    }

    @Test func workersInOneProcessAskForOneFCMAccessToken() throws {
        try bulkDeliveries(300, provider: "fcm")
        let result = try Jobs.pushDeliver(db, ["--workers", "3"], environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 300])
        #expect(pushes(.fcm).filter { $0.status == 200 }.count == 300)
        #expect(Set(pushes(.fcm).map(\.connectionID)).count > 1, "the workers' own connections")
        #expect(pushes(.oauth).count == 1, "one access token for the three workers: \(pushes(.oauth).count)")
    }

    @Test func workersInOneProcessSendEachDeliveryOnceOverTheirOwnConnections() throws {
        try bulkDeliveries(900)
        let result = try Jobs.pushDeliver(db, ["--workers", "3"], environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 900])
        let sent = pushes(.apns).filter { $0.status == 200 }
        #expect(sent.count == 900)
        #expect(Set(sent.compactMap(\.deviceToken)).count == 900, "no delivery sent twice")
        #expect(Set(sent.map(\.connectionID)).count <= 3)
        #expect((result.summary?["push"] as? [String: Any])?["sent"] as? Int == 900)
    }

    @Test func workersShareTheDeliveriesAtAProvidersRoundTrip() throws {
        // At 300 ms a push, each connection sends at most 333/s: claims of a fixed 2,000 rows let the first
        // worker take two thirds of these and send them alone while the others ran dry. Claims sized by the
        // pace (two windows first, then a quarter second's worth) keep every worker busy to the end (about
        // 3 s: a worker starting up to 2 s late still gets its share).
        try bulkDeliveries(3000)
        push.server.inject(.slow(seconds: 0.3), count: 10_000)
        let result = try Jobs.pushDeliver(db, ["--workers", "3"], environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 3000])
        let sent = pushes(.apns).filter { $0.status == 200 }
        #expect(Set(sent.compactMap(\.deviceToken)).count == 3000, "no delivery sent twice")
        let perConnection = Dictionary(grouping: sent, by: \.connectionID).mapValues(\.count)
        #expect(perConnection.count == 3, "\(perConnection)")
        #expect(perConnection.values.allSatisfy { $0 <= 1500 }, "no worker sends half of them: \(perConnection)")
    }

    func authorizations() -> Set<String> {
        Set(pushes(.apns).compactMap { request in request.headers.first { $0.0 == "authorization" }?.1 })
    }

    @Test func pushDeliverRunsShareOneProviderTokenSealedInTheDatabase() throws {
        // push-deliver runs every minute: a token minted by each run would show APNs a new one every minute
        // (TooManyProviderTokenUpdates past one per 20 minutes).
        try bulkDeliveries(10)
        let first = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        try bulkDeliveries(10)
        let second = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(try states() == ["sent": 20])
        #expect(pushes(.apns).count == 20)
        let sent = authorizations()
        #expect(sent.count == 1, "one provider token for both runs, not one each: \(sent.count)")
        // Stored sealed: the table holds nothing that can send a push.
        let token = try #require(sent.first).replacingOccurrences(of: "bearer ", with: "")
        let stored = try f.connection.query("""
            SELECT count(*), count(*) FILTER (WHERE position(convert_to(\(String(token.prefix(24))), 'UTF8') IN sealed) > 0)
              FROM apns_provider_tokens WHERE team_id = \(PushEnvironment.teamID) AND key_id = \(PushEnvironment.keyID)
            """).first!
        #expect(try stored.decode(0, as: Int.self) == 1)
        #expect(try stored.decode(1, as: Int.self) == 0, "the token is not readable in the database")
    }

    @Test func aScenarioJobAndPushDeliverSendTheSameProviderToken() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        _ = try f.device(kari, provider: "apns")
        let job = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(job.status == 0, "stderr: \(job.stderr)")
        try bulkDeliveries(3)
        let deliver = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(deliver.status == 0, "stderr: \(deliver.stderr)")
        #expect(pushes(.apns).count == 4)
        #expect(authorizations().count == 1, "the job's token is the one push-deliver sends")
    }

    @Test func aDamagedSharedTokenRowIsReplacedAndDeliveryGoesOn() throws {
        try bulkDeliveries(5)
        try f.connection.execute("""
            INSERT INTO apns_provider_tokens (team_id, key_id, issued_at, sealed)
            VALUES (\(PushEnvironment.teamID), \(PushEnvironment.keyID), now() - interval '1 minute', decode('00ff00ff', 'hex'))
            """)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 5])
        #expect(pushes(.apns).count == 5 && pushes(.apns).allSatisfy { $0.status == 200 })
        let replaced = try f.connection.query("SELECT length(sealed) > 4 FROM apns_provider_tokens").first!
        #expect(try replaced.decode(0, as: Bool.self), "the damaged row was replaced by the token sent")
    }

    /// A server recycling its connections (GOAWAY after 50 requests, then closing once their answers are out:
    /// fact sheet §1.8 item 9), one push in flight at a time. libcurl 7.88 put the next push on the connection
    /// whose GOAWAY it had just read, nghttp2 refused to open the stream, and the push failed with curl 16 and
    /// waited for a retry with an attempt counted (2 or 3 in 300). It now goes again at once on a new connection.
    /// Every push arrives once, none burns an attempt. (With a full window, see the closing note: libcurl itself
    /// sends the refused ones again, all at once, into the new connection's one-stream start.)
    @Test func aServerThatRecyclesItsConnectionsGetsEveryPushOnce() throws {
        let recycling = try PushEnvironment { $0.goAwayAfterStreams = 50 }
        try bulkDeliveries(300)
        var environment = recycling.variables
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let errors: [String] = try f.connection.query("SELECT state || ': ' || coalesce(last_error, '-') FROM deliveries WHERE state <> 'sent'").map { try $0.decode(0) }
        #expect(try states() == ["sent": 300], "\(errors)")
        let apns = recycling.server.requests().filter { $0.provider == .apns }
        #expect(apns.count == 300 && apns.allSatisfy { $0.status == 200 }, "each push taken in hand once, and answered")
        #expect(Set(apns.compactMap(\.deviceToken)).count == 300)
        #expect(recycling.server.connectionCount >= 6, "a connection per 50: \(recycling.server.connectionCount)")
        let attempts: [Int] = try f.connection.query("SELECT DISTINCT attempts FROM deliveries").map { try $0.decode(0) }
        #expect(attempts == [1], "no attempt burned by a recycled connection")
    }

    /// A connection left idle gets GOAWAY `{"reason":"IdleTimeout"}` (fact sheet §1.8 item 9; Google's front ends
    /// close idle connections so too): event-notify, which keeps its client for its whole life, pushes the next
    /// event on a new connection. It put it on the closed one, libcurl failed it ("Error in the HTTP2 framing
    /// layer", curl 16), and the push waited for a retry with an attempt counted.
    @Test func aPushAfterTheProviderClosedAnIdleConnectionGoesOut() throws {
        let idle = try PushEnvironment { $0.idleTimeout = 0.3 }
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        let linda = try f.user(org, "Linda", role: "coordinator")
        try f.device(linda)
        try f.scope(org, coordinator: linda, mentor: kari)
        try f.scope(org, coordinator: linda, mentor: ola)
        let running = try ProcessRunner.start(Paths.executable("event-notify"), ["--database-url", db.url, "--poll-interval", "0.2"],
                                              environment: idle.variables)
        defer { kill(running.pid, SIGKILL) }
        for (index, mentor) in [kari, ola].enumerated() {
            try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at, reason) VALUES (\(mentor), now(), 'ferie')")
            let deadline = Date().addingTimeInterval(15)
            while try f.deliveryStates(linda).filter({ $0 == "sent" }).count < index + 1 && Date() < deadline { usleep(20_000) }
            #expect(try f.deliveryStates(linda).filter { $0 == "sent" }.count == index + 1, "push \(index + 1) sent")
            usleep(1_500_000) // idle past the timeout: the provider closes the connection
        }
        kill(running.pid, SIGTERM)
        let result = try running.wait(timeout: 20)
        #expect(result.summary?["exit_code"] as? Int == 0 || result.signal == SIGTERM, "\(result.stderr)")
        let errors: [String] = try f.connection.query("SELECT state || ': ' || coalesce(last_error, '-') FROM deliveries ORDER BY id").map { try $0.decode(0) }
        #expect(try f.deliveryStates(linda) == ["sent", "sent"], "\(errors)")
        let apns = idle.server.requests().filter { $0.provider == .apns }
        #expect(apns.count == 2 && Set(apns.map(\.connectionID)).count == 2, "the second on a new connection")
    }

    @Test func fourConcurrentPushDeliverProcessesSendEachDeliveryExactlyOnce() throws {
        try bulkDeliveries(2000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "50"
        let running = try (0..<4).map { _ in
            try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url], environment: environment)
        }
        let results = try running.map { try $0.wait() }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(try states() == ["sent": 2000])
        let sent = pushes(.apns).filter { $0.status == 200 }
        #expect(sent.count == 2000)
        #expect(Set(sent.compactMap(\.deviceToken)).count == 2000, "no delivery sent twice")
        let perProcess = results.compactMap { ($0.summary?["push"] as? [String: Any])?["sent"] as? Int }
        #expect(perProcess.reduce(0, +) == 2000)
        #expect(perProcess.count == 4, "each of the four reported what it sent")
        #expect(authorizations().count == 1, "the four processes send one provider token")
    }

    /// The jobs defer a push they decide inside the recipient's quiet hours; a retry (or a push released in an
    /// outage) comes due later on its own, and may then fall in them: it waits for the window to end, with no
    /// attempt counted. A first push on time goes out (the job already judged it); a critical one always does.
    /// A catch-up run (`--now` three hours back, the timer was down) decides as of then, outside the
    /// recipient's quiet hours, but sends now, inside them: its pushes were queued due at the database's now,
    /// not late, and went out at once. They are now due as of the run, so late, and wait for the window to
    /// end like any late push.
    @Test func aCatchUpRunDoesNotPushInsideTheQuietHoursOfTheRealTime() throws {
        let org = try f.organization("Org")
        try f.connection.execute("UPDATE organizations SET time_zone = 'UTC'")
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end)
            VALUES (\(org), (now() AT TIME ZONE 'UTC' - interval '1 hour')::time, (now() AT TIME ZONE 'UTC' + interval '1 hour')::time)
            """)
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        try f.device(kari, provider: "apns")
        // The dry run says so (it planned a push at once).
        let plan = try Jobs.inactivityCheck(db, now: Date().addingTimeInterval(-3 * 3_600), ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("DEFER the push until") && plan.stdout.contains("(quiet hours)"), "\(plan.stdout)")
        let result = try Jobs.inactivityCheck(db, now: Date().addingTimeInterval(-3 * 3_600), environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try f.decisions(kari) == ["notified:notified"], "outside the window as of the run")
        #expect(pushes(.apns).isEmpty, "not pushed inside the window of the real time")
        let waiting = try #require(try f.connection.query("""
            SELECT extract(epoch FROM q.next_attempt_at - now())::int FROM delivery_queue q
            """).first)
        #expect((3000...3700).contains(try waiting.decode(0, as: Int.self)), "due when the window ends, in about an hour")
    }

    /// A push the job deferred for the quiet hours is judged again when it comes due. Meanwhile one recipient
    /// moved her quiet hours over the present, and another mentor's pause, saved in advance, began (a trigger
    /// runs when a pause is saved, none when it starts). Both went out all the same; now the first waits for her
    /// new window to end and the second is cancelled as a pause cancels reminders, in the dry run's plan too. A
    /// third, nothing changed, goes; and a push on time is not looked at again.
    @Test func aDeferredPushIsJudgedAgainWhenItComesDue() throws {
        try bulkDeliveries(4)
        let rows: [(Int, UUID)] = try f.connection.query("""
            SELECT d.id, n.user_id FROM deliveries d JOIN notifications n ON n.id = d.notification_id ORDER BY d.id
            """).map { (try $0.decode(0), try $0.decode(1)) }
        // The first three were deferred overnight: queued eight hours ago, due a minute ago.
        try f.connection.execute("""
            UPDATE deliveries SET created_at = now() - interval '8 hours' WHERE id = ANY(\(PostgresArray(rows[0...2].map(\.0)))::bigint[])
            """)
        try f.connection.execute("UPDATE delivery_queue SET next_attempt_at = now() - interval '1 minute'")
        try f.connection.execute("UPDATE users SET time_zone = 'UTC' WHERE id = \(rows[0].1)")
        try f.connection.execute("""
            INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end)
            VALUES (\(rows[0].1), (now() AT TIME ZONE 'UTC' - interval '1 hour')::time, (now() AT TIME ZONE 'UTC' + interval '1 hour')::time)
            """)
        // Saved in advance, its start has come: written here without its triggers, as its start passing runs none.
        try f.connection.transaction {
            try f.connection.execute("SET LOCAL session_replication_role = replica")
            try f.connection.execute("""
                INSERT INTO availability_pauses (mentor_id, starts_at, ends_at, reason) VALUES (\(rows[1].1), now() - interval '1 hour', NULL, 'Ferie')
                """)
        }
        // The fourth is on time, for a mentor paused the same way: the job judged it moments ago (the triggers
        // cancel what a pause saved now would), so it is not looked at again.
        try f.connection.transaction {
            try f.connection.execute("SET LOCAL session_replication_role = replica")
            try f.connection.execute("INSERT INTO availability_pauses (mentor_id, starts_at, ends_at) VALUES (\(rows[3].1), now() - interval '1 hour', NULL)")
        }
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("LATER  delivery \(rows[0].0) "), "\(plan.stdout)")
        #expect(plan.stdout.contains("CANCEL delivery \(rows[1].0) ") && plan.stdout.contains("a pause of the mentor started before the push went out"), "\(plan.stdout)")
        #expect(plan.stdout.contains("SEND   delivery \(rows[2].0) ") && plan.stdout.contains("SEND   delivery \(rows[3].0) "), "\(plan.stdout)")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = result.summary?["push"] as? [String: Any]
        #expect(summary?["postponed_for_quiet_hours"] as? Int == 1 && summary?["cancelled_paused"] as? Int == 1, "\(result.stdout)")
        #expect(pushes(.apns).count == 2, "the third and the fourth")
        let states: [String] = try f.connection.query("SELECT state FROM deliveries ORDER BY id").map { try $0.decode(0) }
        #expect(states == ["pending", "cancelled", "sent", "sent"], "\(states)")
        let waiting: Int = try f.connection.query("""
            SELECT extract(epoch FROM next_attempt_at - now())::int FROM delivery_queue WHERE delivery_id = \(rows[0].0)
            """).first!.decode(0)
        #expect((3000...3700).contains(waiting), "due when her new window ends, in about an hour")
        let event: String = try f.connection.query("""
            SELECT event || ': ' || detail FROM delivery_events WHERE delivery_id = \(rows[1].0) ORDER BY id DESC LIMIT 1
            """).first!.decode(0)
        #expect(event == "cancelled: a pause of the mentor started before the push went out", "\(event)")
    }

    /// Three pending deliveries (ids in order) whose recipients' organization keeps quiet hours from an hour ago
    /// to an hour on (UTC).
    func threeDeliveriesInsideAnHoursQuietWindow() throws -> [Int] {
        try bulkDeliveries(3)
        try f.connection.execute("UPDATE organizations SET time_zone = 'UTC'")
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end)
            SELECT id, (now() AT TIME ZONE 'UTC' - interval '1 hour')::time, (now() AT TIME ZONE 'UTC' + interval '1 hour')::time FROM organizations
            """)
        let ids: [Int] = try f.connection.query("SELECT id FROM deliveries ORDER BY id").map { try $0.decode(0) }
        return ids
    }

    @Test func aRetryInsideItsRecipientsQuietHoursWaitsForTheWindowToEnd() throws {
        let ids = try threeDeliveriesInsideAnHoursQuietWindow()
        try f.connection.execute("UPDATE deliveries SET attempts = 1 WHERE id = ANY(\(PostgresArray([ids[0], ids[1]]))::bigint[])")
        try f.connection.execute("UPDATE notifications SET critical = true WHERE id = (SELECT notification_id FROM deliveries WHERE id = \(ids[1]))")
        // The dry run says so too (it listed the retry as SEND).
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("LATER  delivery \(ids[0]) ") && plan.stdout.contains("quiet hours"), "\(plan.stdout)")
        #expect(plan.stdout.contains("SEND   delivery \(ids[1]) ") && plan.stdout.contains("SEND   delivery \(ids[2]) "), "\(plan.stdout)")
        #expect(plan.stdout.contains("nothing is sent or written"), "\(plan.stdout)")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect((result.summary?["push"] as? [String: Any])?["postponed_for_quiet_hours"] as? Int == 1, "\(result.stdout)")
        #expect(pushes(.apns).count == 2, "the first push and the critical retry")
        let retry = try f.connection.query("""
            SELECT d.state, d.attempts, extract(epoch FROM q.next_attempt_at - now())::int FROM deliveries d
              JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.id = \(ids[0])
            """).first
        let row = try #require(retry, "the retry is still queued")
        #expect(try row.decode(0, as: String.self) == "pending" && row.decode(1, as: Int.self) == 1, "no attempt counted")
        #expect((3000...3700).contains(try row.decode(2, as: Int.self)), "due when the window ends, in about an hour")
        // Its history says so (migration 0027): `why` showed a push due later than it had been, with no word.
        let events: [(String, Int, String?)] = try f.connection.query("""
            SELECT event, attempt, detail FROM delivery_events WHERE delivery_id = \(ids[0]) ORDER BY id
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2)) }
        #expect(events.count == 1 && events[0].0 == "postponed" && events[0].1 == 1, "\(events)")
        #expect(events.first?.2?.hasPrefix("inside its recipient's quiet hours: due when they end, ") == true, "\(events)")
    }

    /// One retry whose organization's zone is about noon now, inside quiet hours that end two hours before now
    /// tomorrow, with its notification's daily slot taken today. Returns the zone.
    func aRetryInsideQuietHoursTillTomorrowWithTodaysSlot() throws -> String {
        try bulkDeliveries(1)
        let offset = 12 - Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date()).hour!
        let zone = offset > 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
        try f.connection.execute("UPDATE organizations SET time_zone = \(zone)")
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end)
            SELECT id, (now() AT TIME ZONE \(zone) - interval '1 hour')::time, (now() AT TIME ZONE \(zone) - interval '2 hours')::time FROM organizations
            """)
        try f.connection.execute("UPDATE deliveries SET attempts = 1")
        try f.connection.execute("""
            INSERT INTO daily_push_slots (notification_id, user_id, local_day, priority, scenario)
            SELECT id, user_id, (now() AT TIME ZONE \(zone))::date, 2, 'inactivity_check' FROM notifications
            """)
        return zone
    }

    /// The slot's day, in days from today in `zone`, and the day it was moved from (likewise).
    func slotDays(_ zone: String) throws -> [[Int?]] {
        try f.connection.query("""
            SELECT s.local_day - (now() AT TIME ZONE \(zone))::date, s.moved_from - (now() AT TIME ZONE \(zone))::date FROM daily_push_slots s
            """).map { [try $0.decode(0), try $0.decode(1)] }
    }

    /// A retry postponed by quiet hours past its recipient's midnight goes on the next local day, and counts there
    /// against the daily cap (before: its slot stayed on the day it was decided, and the next day let the whole
    /// cap go out beside it). Read in the inbox before it went (the app cancels it), its slot goes back to today,
    /// where its first attempt may have reached the phone (before 0052: it stayed on tomorrow, where nothing went).
    @Test func aPushPostponedPastMidnightTakesItsDailySlotToTheDayItGoes() throws {
        let zone = try aRetryInsideQuietHoursTillTomorrowWithTodaysSlot()
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect((result.summary?["push"] as? [String: Any])?["postponed_for_quiet_hours"] as? Int == 1, "\(result.stdout)")
        #expect(pushes(.apns).isEmpty)
        #expect(try slotDays(zone) == [[1, 0]], "the slot is tomorrow's, the day the push goes, moved from today")
        let due: Int = try f.connection.query("""
            SELECT (q.next_attempt_at AT TIME ZONE \(zone))::date - (now() AT TIME ZONE \(zone))::date FROM delivery_queue q
            """).first!.decode(0)
        #expect(due == 1, "due tomorrow, when the quiet hours end")
        try f.connection.execute("SELECT cancel_deliveries(array(SELECT id FROM deliveries), 'read in the inbox')")
        #expect(try slotDays(zone) == [[0, nil]], "back on today, where its first attempt was made")
    }

    /// A job allocating the user's slots for tomorrow at that moment holds the day's lock: the move waits for it
    /// (before: it only tried the lock, and the slot stayed on today without a word).
    @Test func aSlotMoveWaitsForAJobAllocatingThatDay() throws {
        let zone = try aRetryInsideQuietHoursTillTomorrowWithTodaysSlot()
        let job = try db.connect()
        try job.execute("""
            SELECT pg_advisory_lock(hashtextextended('daily_push_slots:' || user_id || ':' || to_char(local_day + 1, 'YYYY-MM-DD'), 0))
              FROM daily_push_slots
            """)
        let running = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url], environment: push.variables)
        usleep(3_000_000)
        #expect(try slotDays(zone) == [[0, nil]], "not moved while the job holds tomorrow")
        _ = try job.execute("SELECT pg_advisory_unlock_all()")
        let result = try running.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try slotDays(zone) == [[1, 0]], "moved once the job let go")
    }

    /// A push that waited, found inside quiet hours that last past its expiry, is not postponed to expire unsent:
    /// a push-only notification (out of the inbox) was then lost without a trace, as the jobs never lose one they
    /// would defer past its expiry (`inbox_only_quiet_hours`). It is cancelled and joins the inbox now.
    @Test func aWaitingPushWhoseQuietHoursOutlastItsExpiryJoinsTheInboxInsteadOfExpiringUnseen() throws {
        let ids = try threeDeliveriesInsideAnHoursQuietWindow()
        // Three retries: a push-only one and an inbox one that expire before the window ends, one that expires after.
        try f.connection.execute("UPDATE deliveries SET attempts = 1")
        try f.connection.execute("""
            UPDATE notifications n SET expires_at = now() + CASE WHEN d.id = \(ids[2]) THEN interval '3 hours' ELSE interval '30 minutes' END,
                                       in_inbox = d.id <> \(ids[0])
              FROM deliveries d WHERE d.notification_id = n.id
            """)
        let plan = try Jobs.pushDeliver(db, ["--dry-run"], environment: push.variables)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("CANCEL delivery \(ids[0]) ") && plan.stdout.contains("past its expiry"), "\(plan.stdout)")
        #expect(plan.stdout.contains("LATER  delivery \(ids[2]) "), "\(plan.stdout)")
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = result.summary?["push"] as? [String: Any]
        #expect(summary?["cancelled_quiet_hours_past_expiry"] as? Int == 2 && summary?["postponed_for_quiet_hours"] as? Int == 1, "\(result.stdout)")
        #expect(pushes(.apns).isEmpty, "nothing is pushed inside the quiet hours")
        let rows: [(Int, String, Bool, Bool)] = try f.connection.query("""
            SELECT d.id, d.state, n.in_inbox, EXISTS (SELECT 1 FROM delivery_queue q WHERE q.delivery_id = d.id)
              FROM deliveries d JOIN notifications n ON n.id = d.notification_id ORDER BY d.id
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2), try $0.decode(3)) }
        #expect(rows.map(\.1) == ["cancelled", "cancelled", "pending"], "\(rows)")
        #expect(rows.map(\.2) == [true, true, true], "the push-only notification joined the inbox: \(rows)")
        #expect(rows.map(\.3) == [false, false, true], "only the postponed push is still queued: \(rows)")
        let event: String = try f.connection.query("""
            SELECT event || ': ' || detail FROM delivery_events WHERE delivery_id = \(ids[0]) ORDER BY id DESC LIMIT 1
            """).first!.decode(0)
        #expect(event == "cancelled: the recipient's quiet hours last past its expiry: a push-only notification joins the inbox instead", "\(event)")
    }

    @Test func aLongDrainSendsEachDeliveryOnceAsItsQueueIsCompacted() throws {
        // One run claims batch after batch; what was sent leaves its in-memory queue every 4,096 pushes.
        try bulkDeliveries(6000)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try states() == ["sent": 6000])
        let sent = pushes(.apns)
        #expect(sent.count == 6000)
        #expect(Set(sent.compactMap(\.deviceToken)).count == 6000, "no delivery sent twice, none left out")
    }

    /// The app cancels, while `running` sends slowly, the last `count` of the pushes claimed and not yet started
    /// (once `started` requests reached the provider): the first half of them as their users switch pushes off, the
    /// rest as their phones are signed in as somebody else of another organization. Returns their tokens.
    func cancelClaimedPushes(_ count: Int, onceStarted started: Int) throws -> Set<String> {
        let deadline = Date().addingTimeInterval(20)
        while push.server.requests().count < started && Date() < deadline { usleep(5_000) }
        let claimed: [(Int, UUID, Int, String)] = try f.connection.query("""
            SELECT d.id, n.user_id, d.device_token_id, t.token FROM deliveries d JOIN notifications n ON n.id = d.notification_id
              JOIN device_tokens t ON t.id = d.device_token_id
              JOIN delivery_queue q ON q.delivery_id = d.id WHERE q.lease_until IS NOT NULL ORDER BY d.id DESC LIMIT \(count)
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2), try $0.decode(3)) }
        #expect(claimed.count == count, "claimed and not yet started: \(claimed.map(\.0))")
        let stranger = try f.mentor(try f.organization("Other"), "Stranger", lastActivityDaysAgo: 1, devices: 0)
        for (_, user, _, _) in claimed.prefix(count / 2) {
            try f.connection.execute("INSERT INTO push_notification_configs (user_id, enabled) VALUES (\(user), false)")
        }
        let moved = PostgresArray(claimed.dropFirst(count / 2).map(\.2))
        try f.connection.execute("UPDATE device_tokens SET user_id = \(stranger) WHERE id = ANY(\(moved)::bigint[])")
        return Set(claimed.map(\.3))
    }

    /// The app cancels pushes push-deliver has claimed and not yet started (pushes switched off, a device token
    /// moved to somebody else): they went out all the same, any time until their claim's start-by, while their
    /// deliveries said "cancelled before the push went out". The cancel's NOTIFY (0038) reaches the engine's
    /// listener, and none of them is started.
    @Test func aPushTheAppCancelsAfterItsClaimIsNotSent() throws {
        // Ten in flight, answered after a second; the next ten claimed, waiting for them.
        let running = try deliverSlowly(40, answersAfter: 1, concurrency: 10)
        let tokens = try cancelClaimedPushes(5, onceStarted: 10)
        try expectNoneSent(of: tokens, by: running, sent: 35)
    }

    /// `running` ends well, the provider received none of `tokens` (cancelled after their claim), and the run
    /// says so; the others were sent.
    func expectNoneSent(of tokens: Set<String>, by running: ProcessRunner.Running, sent: Int) throws {
        let result = try running.wait(timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        let reached = pushes(.apns).compactMap(\.deviceToken).filter(tokens.contains)
        #expect(reached.isEmpty, "none of the cancelled pushes was sent: \(reached.count)")
        #expect(try states() == ["sent": sent, "cancelled": tokens.count])
        #expect((result.summary?["push"] as? [String: Any])?["cancelled_after_claim"] as? Int == tokens.count, "\(result.stdout)")
    }

    /// A push already on the wire when the app cancels its delivery cannot be called back: it reaches the phone.
    /// Its delivery stays cancelled, but its history says it went out (a `sent` event, `sent_at`): it said
    /// "cancelled before the push went out" and nothing of the push the phone showed.
    @Test func aPushOnTheWireWhenTheAppCancelsItIsInItsHistory() throws {
        let running = try deliverSlowly(1, answersAfter: 1.5, concurrency: 1)
        let deadline = Date().addingTimeInterval(20)
        while pushes(.apns).isEmpty && Date() < deadline { usleep(5_000) }
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, enabled) SELECT user_id, false FROM notifications")
        let result = try running.wait(timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(pushes(.apns).filter { $0.status == 200 }.count == 1, "it reached the phone: \(pushes(.apns).map(\.status)) \(result.stdout) \(result.stderr)")
        let row = try #require(try f.connection.query("""
            SELECT state, sent_at IS NOT NULL, provider_message_id IS NOT NULL, attempts, updated_at < sent_at FROM deliveries
            """).first)
        #expect(try row.decode(0, as: String.self) == "cancelled")
        #expect(try row.decode(1, as: Bool.self) && row.decode(2, as: Bool.self), "when it went out, and the provider's id")
        #expect(try row.decode(3, as: Int.self) == 1 && row.decode(4, as: Bool.self), "its attempt; the state's time is the cancel's")
        let user: UUID = try f.connection.query("SELECT user_id FROM notifications").first!.decode(0)
        let why = try Jobs.run("why", [user.uuidString], database: db)
        #expect(why.stdout.contains("CANCELLED") && why.stdout.contains(", but the push went out at "), "\(why.stdout)")
        let history: [String] = try f.connection.query("SELECT event || ': ' || coalesce(detail, '') FROM delivery_events ORDER BY id").map { try $0.decode(0) }
        #expect(history == ["cancelled: the user switched push notifications off before the push went out",
                            "sent: the push went out after the delivery was cancelled: it was already on its way"], "\(history)")
    }

    /// The same in a scenario job's own push phase, whose engine claims the whole run's pushes at once: the
    /// window was the whole phase.
    @Test func aPushTheAppCancelsDuringAJobsPushPhaseIsNotSent() throws {
        let running = try inactivityCheckDeliveringSlowly(answersAfter: 0.3, concurrency: 2)
        let tokens = try cancelClaimedPushes(10, onceStarted: 4)
        try expectNoneSent(of: tokens, by: running, sent: 30)
    }

    @Test func aPushDeliverKilledMidRunLosesNothingWhenRunAgain() throws {
        let running = try deliverSlowly(60, answersAfter: 0.2, concurrency: 5, ["--lease", "2"])
        // Let some pushes through, then kill it without warning.
        try signal(running, SIGKILL, onceSent: 10)
        _ = try? running.wait()
        let sentBeforeKill = try states()["sent"] ?? 0
        #expect(sentBeforeKill >= 10 && sentBeforeKill < 60, "killed mid-run, after some were recorded")

        push.server.clearRecorded()
        sleep(3) // the lease runs out
        let again = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(again.status == 0, "stderr: \(again.stderr)")
        #expect(try states() == ["sent": 60], "nothing lost")
        // Only what was in flight at the kill (5), plus completions not yet recorded (under 32), can go out twice.
        #expect(pushes(.apns).count <= 60 - sentBeforeKill + 5 + 32)
        #expect(pushes(.apns).count >= 60 - sentBeforeKill)
    }

    @Test func aClaimThatFailsMidRunStillRecordsWhatWasSent() throws {
        // The next batch is claimed ahead on the engine's connection while the outcomes are written on another.
        // A claim that fails (here it waits for a lock past the statement timeout) stops the run, but the pushes
        // already sent must still be recorded: unrecorded, their rows would be sent again once the lease ran out.
        try bulkDeliveries(300)
        // Answers take 2 s: the claim ahead, asked for as the first window is answered, fails a second later,
        // with the second window still in flight.
        push.server.inject(.slow(seconds: 2), count: 10_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "20"
        let running = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url, "--statement-timeout", "1"],
                                              environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while push.server.receivedCount < 5 && Date() < deadline { usleep(5_000) }
        // Claims read the notifications; outcome writes do not.
        let locker = try db.connect()
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE")
        let result = try running.wait()
        try locker.execute("ROLLBACK")

        #expect(result.status != 0, "the failed claim stops the run: \(result.stderr)")
        #expect(result.stderr.contains("statement timeout"), "\(result.stderr)")
        #expect(!result.stderr.contains("pushes that were sent"), "\(result.stderr)")
        let accepted = pushes(.apns).filter { $0.status == 200 }.count
        #expect(accepted > 0 && accepted < 300)
        #expect(try states() == ["sent": accepted, "pending": 300 - accepted], "every push that went out is recorded")
    }

    @Test func thePushesPauseWhileTheOutcomeWritesAreBehind() throws {
        // A database slower than the pushes (here the event log is locked, so every outcome write waits) must
        // not let sent-but-unrecorded pushes pile up: a crash would send them again, and so would another
        // engine once their lease ran out. Past two writes waiting, the pushes pause until the writer catches up.
        try bulkDeliveries(1500)
        push.server.inject(.slow(seconds: 0.02), count: 10_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "10"
        let locker = try db.connect()
        let running = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url], environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while push.server.receivedCount < 20 && Date() < deadline { usleep(2_000) }
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE delivery_events IN EXCLUSIVE MODE")
        sleep(1)
        let paused = push.server.receivedCount
        sleep(2)
        let later = push.server.receivedCount
        try locker.execute("ROLLBACK")
        let result = try running.wait()

        #expect(later - paused <= 10, "no new push while the writes were stuck (\(paused) → \(later); the window is 10)")
        #expect(paused < 1500)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try states() == ["sent": 1500])
        #expect(pushes(.apns).count == 1500)
    }

    @Test func sigtermFinishesWhatIsInFlightReleasesTheRestAndEndsBySIGTERM() throws {
        let running = try deliverSlowly(60, answersAfter: 1, concurrency: 5)
        // The first five answers are recorded, the next five are in flight: systemd stops the unit.
        try signal(running, SIGTERM, onceSent: 5)
        let result = try running.wait()

        #expect(result.signal == SIGTERM, "ends by the signal that stopped it, not by exit(143): \(result.stderr)")
        #expect(result.summary?["exit_code"] as? Int == 143)
        #expect(result.stderr.contains("SIGTERM: stopping after what is in flight"))
        #expect(result.summary?["outcome"] as? String == "stopped")
        let report = try #require(result.summary?["push"] as? [String: Any])
        #expect(report["stopped_by"] as? String == "SIGTERM")
        let sent = try #require(report["sent"] as? Int)
        #expect(sent >= 5 && sent < 60)
        // The first claim took two windows (10); a claim ahead may have taken more. Those not sent are released;
        // the rest were never claimed. Either way every one not sent is due again at once (below).
        let claimed = try #require(report["claimed"] as? Int)
        #expect(claimed >= 10 && claimed <= 60)
        #expect(report["released"] as? Int == claimed - sent, "every claimed delivery not sent is released")
        #expect(try states() == ["sent": sent, "pending": 60 - sent])
        #expect(pushes(.apns).count == sent, "what was in flight finished and was recorded; nothing else went out")
        let waiting = try f.connection.query("""
            SELECT count(*) FILTER (WHERE d.attempts = 0 AND q.next_attempt_at <= now() AND q.lease_until IS NULL)
              FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.state = 'pending'
            """).first!.decode(0, as: Int.self)
        #expect(waiting == 60 - sent, "due again at once, no attempt burned, no lease to wait out")

        push.server.clearFaults()
        let again = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(again.status == 0, "stderr: \(again.stderr)")
        #expect(try states() == ["sent": 60])
        #expect(Set(pushes(.apns).compactMap(\.deviceToken)).count == 60)
        #expect(pushes(.apns).count == 60, "each sent once")
    }

    @Test func inactivityCheckStoppedWhileDeliveringRecordsTheRunAsStoppedAndLeavesTheRestToPushDeliver() throws {
        let running = try inactivityCheckDeliveringSlowly(answersAfter: 1, concurrency: 5)
        try signal(running, SIGINT, onceSent: 5)
        let result = try running.wait()

        #expect(result.signal == SIGINT, "stderr: \(result.stderr)")
        #expect(result.summary?["exit_code"] as? Int == 130)
        #expect(result.summary?["outcome"] as? String == "stopped")
        #expect(result.summary?["stopped_by"] as? String == "SIGINT")
        #expect(result.summary?["inbox_rows"] as? Int == 40, "every decision was recorded before delivery began")
        let run = try #require(try f.connection.query("SELECT outcome, finished_at IS NOT NULL FROM job_runs").first)
        #expect(try run.decode(0, as: String.self) == "stopped")
        #expect(try run.decode(1, as: Bool.self))
        let sent = try states()["sent"] ?? 0
        #expect(sent >= 5 && sent < 40)
        #expect(try states()["pending"] == 40 - sent)

        push.server.clearFaults()
        let again = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(again.status == 0, "stderr: \(again.stderr)")
        #expect(try states() == ["sent": 40])
        #expect(pushes(.apns).count + pushes(.fcm).count == 40, "each sent once")
    }

    @Test func aProxyFromTheEnvironmentIsHonoured() throws {
        _ = try pendingNotifications([("A", 1)])
        var environment = push.variables
        environment["https_proxy"] = "http://127.0.0.1:1" // nothing listens there
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 69, "FCM's token endpoint is behind the dead proxy too, so FCM is unreachable: \(result.stderr)")
        #expect(pushes(.apns).isEmpty, "nothing went around the proxy")
        #expect(try states() == ["pending": 1], "a push that never left burns no attempt")
        environment["no_proxy"] = "127.0.0.1"
        // no_proxy names the fake's host: straight there.
        #expect(try Jobs.pushDeliver(db, environment: environment).status == 0)
        #expect(try states() == ["sent": 1])
    }

    @Test(arguments: ["http://user:secret@proxy.example", "https://user:secret@api.push.apple.com", "https://user:secret@[::1"])
    func anEndpointWithAPasswordIsRefusedWithoutShowingIt(endpoint: String) throws {
        var environment = push.variables
        environment["APNS_ENDPOINT"] = endpoint
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("APNS_ENDPOINT: must be an https URL of a host"), "\(result.stderr)")
        #expect(!result.stderr.contains("secret") && !result.stdout.contains("secret"), "\(result.stderr)")
    }

    /// A flag out of range exited 78 named as its variable (`PUSH_CONCURRENCY: must be…`): a bad flag is a usage
    /// error (64) named as the flag; the variable keeps its 78.
    @Test(arguments: [(["--push-concurrency", "0"], "--push-concurrency must be from 1 to 1000"),
                      (["--push-max-attempts", "1000"], "--push-max-attempts must be from 1 to 100")])
    func aPushFlagOutOfRangeIsABadFlag(arguments: [String], message: String) throws {
        let result = try Jobs.pushDeliver(db, ["--dry-run"] + arguments, environment: push.variables)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        var environment = push.variables
        environment["PUSH_MAX_ATTEMPTS"] = "1000"
        let variable = try Jobs.pushDeliver(db, ["--dry-run"], environment: environment)
        #expect(variable.status == 78 && variable.stderr.contains("PUSH_MAX_ATTEMPTS: must be a number from 1 to 100"), "\(variable.stderr)")
    }

    /// A port out of range passed the check, and every push failed with a curl error (3, a malformed URL) taken
    /// for the provider's trouble: an attempt each, run after run, until the pushes were dead.
    @Test(arguments: ["https://127.0.0.1:99999", "https://127.0.0.1:0", "https://127.0.0.1?x=1"])
    func anEndpointWithAPortOutOfRangeIsRefusedBeforeAnyAttempt(endpoint: String) throws {
        _ = try pendingNotifications([("A", 1)])
        var environment = push.variables
        environment["APNS_ENDPOINT"] = endpoint
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("APNS_ENDPOINT: must be an https URL of a host (a port from 1 to 65535"), "\(result.stderr)")
        #expect(try states() == ["pending": 1], "no attempt spent")
    }

    /// A path prefix on Apple's host (APNs answers 404 `BadPath`), or another service's host (Google's 404 page).
    @Test(arguments: [(false, "BadPath"), (true, "HTTP 404")])
    func aWrongEndpointStopsTheProviderWith78AndLosesNothing(googlesHost: Bool, said: String) throws {
        _ = try pendingNotifications([("A", 1), ("B", 1)])
        var environment = push.variables
        environment["APNS_ENDPOINT"] = googlesHost ? push.server.googleBaseURL : push.server.baseURL + "/apns"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(said) && result.stderr.contains("APNS_ENDPOINT"), "\(result.stderr)")
        #expect(try states() == ["pending": 2], "no delivery marked dead for our mistake")
        let attempts: Int = try f.connection.query("SELECT sum(attempts) FROM deliveries").first!.decode(0)
        #expect(attempts == 0)
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0, "fixed, everything goes")
        #expect(try states() == ["sent": 2])
    }

    /// A provider nobody can connect to (a typo in the endpoint, a firewall, an outage on our side) is no
    /// fault of the deliveries: the provider stops for the run with 69 and no attempt is burned, so an
    /// hour of it does not turn every due notification dead.
    @Test func anUnreachableProviderExits69AndBurnsNoAttempt() throws {
        _ = try pendingNotifications([("A", 1), ("B", 1), ("C", 1)])
        var environment = push.variables
        environment["APNS_ENDPOINT"] = "https://127.0.0.1:1" // nothing listens there
        environment["PUSH_MAX_ATTEMPTS"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 69, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("apns unavailable") && result.stderr.contains("cannot connect"), "\(result.stderr)")
        #expect(try states() == ["pending": 3])
        let attempts: Int = try f.connection.query("SELECT sum(attempts) FROM deliveries").first!.decode(0)
        #expect(attempts == 0)
        let queued: Int = try f.connection.query("SELECT count(*) FROM delivery_queue WHERE lease_until IS NULL OR lease_until <= now()").first!.decode(0)
        #expect(queued == 3, "released for the next run at once")
        #expect(try Jobs.pushDeliver(db, environment: push.variables).status == 0, "reachable again, everything goes")
        #expect(try states() == ["sent": 3])
    }

    /// APNs's sandbox and production are two hosts. A developer's sandbox token whose host cannot be reached
    /// (a firewall that lets only production through) stops only the sandbox pushes: production's go out in
    /// the same run, and the sandbox push, first in line every time, waits without an attempt instead of
    /// stopping APNs for every run.
    @Test func anUnreachableSandboxHostStopsOnlyTheSandboxPushes() throws {
        // The sandbox push first in line (its row first in the table, and due first), then 40 production ones.
        let org = try f.organization("Dev")
        let developer = try f.mentor(org, "Developer", lastActivityDaysAgo: 20, devices: 0)
        let sandbox = try f.device(developer, provider: "apns", environment: "sandbox")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        _ = try pendingNotifications((0..<40).map { ("Mentor \($0)", 1) })
        try f.makeDue(where: "d.device_token_id = \(sandbox.id)", secondsAgo: 60)
        var environment = push.variables
        environment["APNS_SANDBOX_ENDPOINT"] = "https://127.0.0.1:1" // nothing listens there
        environment["PUSH_CONCURRENCY"] = "1" // one at a time: the production pushes start after the sandbox one failed
        for run in 1...2 {
            let result = try Jobs.pushDeliver(db, environment: environment)
            #expect(result.status == 69, "run \(run): \(result.stderr)")
            #expect(result.stderr.contains("apns/sandbox") && result.stderr.contains("cannot connect"), "\(result.stderr)")
            #expect(try states() == ["sent": 40, "pending": 1], "run \(run)")
            let waiting = try delivery(token: sandbox.token)
            #expect(waiting.state == "pending" && waiting.attempts == 0, "run \(run): \(waiting)")
            #expect(waiting.nextIn <= 0, "due again at once: \(waiting)")
        }
        #expect(pushes(.apns).count == 40, "each production push sent once")
    }

    /// A CA file that is not one, or one that does not trust the provider's certificate, is our setting: 78
    /// naming PUSH_CA_FILE, not 69 (a wrapper would retry it forever), and no attempt is burned.
    @Test func aCAFileThatCannotVerifyTheProviderIsAConfigurationProblem() throws {
        _ = try pendingNotifications([("A", 1)])
        let garbage = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-ca-\(UUID().uuidString).pem")
        try "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n".write(to: garbage, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: garbage) }
        var environment = push.variables
        environment["PUSH_CA_FILE"] = garbage.path
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("PUSH_CA_FILE"), "\(result.stderr)")
        #expect(try states() == ["pending": 1])
        #expect(try delivery(token: try #require(try f.connection.query("SELECT token FROM device_tokens").first).decode(0)).attempts == 0)
        #expect(push.server.requests().isEmpty)
        // FCM alone: its first word with Google is the token endpoint's, refused the same way (78, not 69).
        var fcmOnly = environment
        for key in ["APNS_KEY_FILE", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "APNS_ENDPOINT", "APNS_SANDBOX_ENDPOINT"] { fcmOnly.removeValue(forKey: key) }
        let fcm = try Jobs.pushDeliver(db, environment: fcmOnly)
        #expect(fcm.status == 78, "stderr: \(fcm.stderr)")
        #expect(fcm.stderr.contains("PUSH_CA_FILE"), "\(fcm.stderr)")
    }

    /// A host our TLS setup cannot verify is that endpoint's problem alone: APNs's sandbox host behind a proxy
    /// whose certificate PUSH_CA_FILE does not trust stopped production's pushes too. 78, naming the endpoint.
    @Test func aSandboxHostTheCAFileCannotVerifyStopsOnlyTheSandbox() throws {
        let org = try f.organization("Org")
        let tester = try f.mentor(org, "Tester", lastActivityDaysAgo: 20, devices: 0)
        let sandbox = try f.device(tester, provider: "apns", environment: "sandbox")
        var production: [String] = []
        for i in 0..<3 {
            let user = try f.mentor(org, "Mentor \(i)", lastActivityDaysAgo: 20, devices: 0)
            production.append(try f.device(user, provider: "apns").token)
        }
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let untrusted = try PushEnvironment(ownCA: true) // which PUSH_CA_FILE does not trust
        var environment = push.variables
        environment["APNS_SANDBOX_ENDPOINT"] = untrusted.server.baseURL
        environment["PUSH_CONCURRENCY"] = "1"
        let result = try Jobs.pushDeliver(db, environment: environment)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("apns/sandbox") && result.stderr.contains("PUSH_CA_FILE"), "\(result.stderr)")
        #expect(Set(pushes(.apns).compactMap(\.deviceToken)) == Set(production), "production's pushes go out")
        #expect(try delivery(token: sandbox.token).state == "pending" && delivery(token: sandbox.token).attempts == 0)
        #expect(try states() == ["sent": 3, "pending": 1])
    }

    /// FCM answers 401 and the token endpoint is down when a fresh access token is asked for: FCM is
    /// unavailable for now (69), not misconfigured (78), and the delivery waits without an attempt.
    @Test func anFCM401WhileTheTokenEndpointIsDownIsUnavailableNotMisconfigured() throws {
        let made = try pendingNotifications([("Android", 2)])
        push.server.inject(.expiredProviderToken, count: 1, provider: .fcm)
        // The run's first token request gets through; the refresh after the 401 meets a 500.
        push.server.inject(.slow(seconds: 0), count: 1, provider: .oauth)
        push.server.inject(.oauthServerError, count: 5)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 69, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("fcm unavailable"), "\(result.stderr)")
        let fcm = try delivery(token: made[0].devices[1].token)
        #expect(fcm.state == "pending")
        #expect(fcm.attempts == 0)
        #expect(try delivery(token: made[0].devices[0].token).state == "sent", "APNs is unaffected")
    }

    /// A window of FCM 401s while the token endpoint is down asks that endpoint for a fresh token once, not
    /// once per 401: each ask is a blocking request, and a hundred of them would stall the run for minutes.
    @Test func aWindowOf401sAsksTheDownTokenEndpointOnce() throws {
        _ = try pendingNotifications((0..<20).map { ("Mentor \($0)", 2) })
        // The first FCM push goes through: its answer opens the connection's window, so the others go out together.
        push.server.inject(.slow(seconds: 0), count: 1, provider: .fcm)
        push.server.inject(.expiredProviderToken, count: 20, provider: .fcm)
        push.server.inject(.slow(seconds: 0), count: 1, provider: .oauth) // the run's first token gets through
        push.server.inject(.oauthServerError, count: 50)
        let result = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(result.status == 69, "stderr: \(result.stderr)")
        #expect(pushes(.fcm).count > 1, "the test needs several 401s in flight at once")
        #expect(pushes(.oauth).count == 2, "the run's token and one refresh: \(pushes(.oauth).count)")
        let fcm: [(String, Int)] = try f.connection.query("""
            SELECT d.state, d.attempts FROM deliveries d JOIN device_tokens t ON t.id = d.device_token_id WHERE t.provider = 'fcm'
            """).map { (try $0.decode(0), try $0.decode(1)) }
        #expect(fcm.filter { $0 == ("pending", 0) }.count == 19 && fcm.filter { $0.0 == "sent" }.count == 1,
                "every FCM push answered 401 waits, no attempt counted: \(fcm)")
        #expect(try states()["sent"] == 21, "APNs is unaffected")
    }

    @Test func noPushStartsThatCouldOutliveItsClaim() throws {
        // Slow answers and a short lease: the first engine could not send its whole batch within the lease.
        _ = try pendingNotifications((0..<24).map { ("Mentor \($0)", 1) })
        push.server.inject(.slow(seconds: 1), count: 1_000)
        var environment = push.variables
        environment["PUSH_CONCURRENCY"] = "2"
        let first = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url, "--lease", "4"], environment: environment)
        // A second engine arrives once the first one's original claim would have run out.
        usleep(4_500_000)
        let second = try ProcessRunner.start(Paths.executable("push-deliver"), ["--database-url", db.url, "--lease", "4"], environment: environment)
        let results = [try first.wait(), try second.wait()]
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(try states() == ["sent": 24])
        #expect(pushes(.apns).count == 24, "no push sent twice")
        #expect(Set(pushes(.apns).compactMap(\.deviceToken)).count == 24)
        // Each summary adds up: what a run claimed it sent or released (`released` was said only after a stop).
        let summaries = results.compactMap { $0.summary?["push"] as? [String: Any] }
        #expect(summaries.count == 2, "\(results.map(\.stdout))")
        for summary in summaries {
            #expect(summary["claimed"] as? Int == (summary["sent"] as? Int ?? -1) + (summary["released"] as? Int ?? -1), "\(summary)")
        }
        #expect(summaries.reduce(0) { $0 + ($1["released"] as? Int ?? 0) } > 0, "the first run released what it could not start in time: \(summaries)")
    }
}
