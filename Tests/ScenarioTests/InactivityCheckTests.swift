import Foundation
import Testing
import TestSupport

/// inactivity-check end to end: the built executable against a real PostgreSQL, asserting the inbox
/// rows, deliveries and decisions a user would see.
@Suite struct InactivityCheckTests {
    let db: TestDatabase
    let f: Fixtures

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
    }

    func run(daysLater: Double = 0, _ extra: [String] = []) throws -> ProcessRunner.Result {
        let result = try Jobs.inactivityCheck(db, now: f.now.addingTimeInterval(daysLater * 86_400), extra)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return result
    }

    /// A device no job sends to (a Web Push or Expo token) is no device to push to: the reminder is in the
    /// inbox without a push, and no delivery waits for ever.
    @Test func aTokenNoJobSendsToIsNoDevice() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 0)
        try f.connection.execute("INSERT INTO device_tokens (user_id, provider, token, app_id) VALUES (\(kari), 'webpush', 'https://push.example/abc', 'web')")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.decisions(kari) == ["notified:inbox_only_no_device"])
        #expect(try f.count("deliveries") == 0)
    }

    @Test func eachOrganizationUsesItsOwnThreshold() throws {
        let defaultOrg = try f.organization("Default org")
        let strictOrg = try f.organization("Strict org")
        try f.rule(strictOrg, settings: #"{"threshold_days": 7}"#)
        let quietTenDaysDefault = try f.mentor(defaultOrg, "Ten days, default", lastActivityDaysAgo: 10)
        let quietTenDaysStrict = try f.mentor(strictOrg, "Ten days, strict", lastActivityDaysAgo: 10)
        let quietTwentyDefault = try f.mentor(defaultOrg, "Twenty days, default", lastActivityDaysAgo: 20)

        let result = try run()

        #expect(try f.inbox(quietTenDaysDefault).isEmpty)
        #expect(try f.inbox(quietTenDaysStrict).count == 1)
        #expect(try f.inbox(quietTwentyDefault).count == 1)
        #expect(result.summary?["notified"] as? Int == 2)
        #expect(result.summary?["inbox_rows"] as? Int == 2)
    }

    @Test func recentlyActiveMentorIsNotACandidate() throws {
        let org = try f.organization("Org")
        let active = try f.mentor(org, "Active", lastActivityDaysAgo: 3)
        let result = try run()
        #expect(try f.inbox(active).isEmpty)
        #expect(try f.decisions(active).isEmpty)
        #expect(result.summary?["candidates"] as? Int == 0)
    }

    @Test func neverActiveMentorCountsFromJoining() throws {
        let org = try f.organization("Org")
        let longAgo = try f.mentor(org, "Joined long ago", lastActivityDaysAgo: nil, joinedDaysAgo: 30)
        let newcomer = try f.mentor(org, "Newcomer", lastActivityDaysAgo: nil, joinedDaysAgo: 2)
        _ = try run()
        let inbox = try f.inbox(longAgo)
        #expect(inbox.count == 1)
        #expect(inbox.first?.body.contains("ikke registrert noen aktiviteter ennå") == true)
        #expect(try f.inbox(newcomer).isEmpty)
    }

    @Test(arguments: [nil, 5.0] as [Double?])
    func pausedMentorGetsNoReminder(pauseEndsInDays: Double?) throws {
        let org = try f.organization("Org")
        let paused = try f.mentor(org, "Paused", lastActivityDaysAgo: 40)
        try f.pause(paused, startedDaysAgo: 30, endsDaysAgo: pauseEndsInDays.map { -$0 }, reason: "Ferie til 15. mars")
        let result = try run()
        #expect(try f.inbox(paused).isEmpty)
        #expect(try f.decisions(paused) == ["suppressed:paused"])
        #expect((result.summary?["suppressed"] as? [String: Int])?["paused"] == 1)
    }

    @Test func liftedPauseCountsFromTheDayItWasLifted() throws {
        let org = try f.organization("Org")
        let recentlyBack = try f.mentor(org, "Back three days", lastActivityDaysAgo: 60)
        try f.pause(recentlyBack, startedDaysAgo: 50, endsDaysAgo: 3)
        let longBack = try f.mentor(org, "Back twenty days", lastActivityDaysAgo: 60)
        try f.pause(longBack, startedDaysAgo: 50, endsDaysAgo: 20)
        _ = try run()
        #expect(try f.inbox(recentlyBack).isEmpty)
        #expect(try f.decisions(recentlyBack).isEmpty)
        #expect(try f.inbox(longBack).count == 1)
        // The stretch counts from the lift; the text says how long since the last activity, as it reads.
        let body = try f.inbox(longBack).first?.body ?? ""
        #expect(body.contains("Det er 60 dager siden du sist registrerte en aktivitet"), "\(body)")
    }

    @Test func remindedOncePerStretchThenAgainAfterAnotherFullThreshold() throws {
        let org = try f.organization("Org")
        let quiet = try f.mentor(org, "Still quiet", lastActivityDaysAgo: 20)

        _ = try run()
        #expect(try f.inbox(quiet).count == 1)
        _ = try run(daysLater: 5)
        #expect(try f.inbox(quiet).count == 1)
        #expect(try f.decisions(quiet) == ["notified:notified", "suppressed:already_notified"])
        _ = try run(daysLater: 14)
        #expect(try f.inbox(quiet).count == 2)
        // Logging an activity ends the stretch: no reminder until a full threshold after it.
        try f.activity(quiet, daysAgo: -15)
        _ = try run(daysLater: 20)
        #expect(try f.inbox(quiet).count == 2)
        _ = try run(daysLater: 29)
        #expect(try f.inbox(quiet).count == 3)
    }

    /// The daily run starts a little earlier or later each day (the timer's randomized delay), and a threshold
    /// holding the spring clock change is an hour short: the repeat still comes on the threshold's day.
    @Test func aRepeatReminderComesOnItsDayEvenIfTheRunStartsAMinuteOrAnHourEarlier() throws {
        let org = try f.organization("Org")
        let quiet = try f.mentor(org, "Still quiet", lastActivityDaysAgo: 20)
        _ = try run()
        _ = try run(daysLater: 13)
        #expect(try f.inbox(quiet).count == 1, "not a day early")
        _ = try run(daysLater: 14 - 60.0 / 86_400)
        #expect(try f.inbox(quiet).count == 2, "a minute early is the same day")
        _ = try run(daysLater: 28 - 3_600.0 / 86_400)
        #expect(try f.inbox(quiet).count == 3, "an hour early (spring forward) too")
    }

    @Test func preferencesAndOrganizationSwitchSuppressWithReasons() throws {
        let org = try f.organization("Org")
        let masterOff = try f.mentor(org, "Master off", lastActivityDaysAgo: 20)
        try f.preferences(masterOff, master: false)
        let categoryOff = try f.mentor(org, "Category off", lastActivityDaysAgo: 20)
        try f.preferences(categoryOff, inactivity: false)
        let offOrg = try f.organization("Org with scenario off")
        try f.rule(offOrg, enabled: false)
        let inOffOrg = try f.mentor(offOrg, "In an org that turned it off", lastActivityDaysAgo: 20)
        try f.preferences(inOffOrg, master: true, inactivity: true)

        let result = try run()

        for user in [masterOff, categoryOff, inOffOrg] {
            #expect(try f.inbox(user).isEmpty)
        }
        #expect(try f.decisions(masterOff) == ["suppressed:push_disabled"])
        #expect(try f.decisions(categoryOff) == ["suppressed:category_disabled"])
        #expect(try f.decisions(inOffOrg) == ["suppressed:organization_scenario_off"])
        #expect(result.summary?["notified"] as? Int == 0)
        #expect(try f.count("notifications") == 0)
    }

    @Test func organizationSwitchOffBeatsEveryUserPreference() throws {
        let org = try f.organization("Org")
        try f.rule(org, enabled: false)
        let both = try f.mentor(org, "Prefs off too", lastActivityDaysAgo: 20)
        try f.preferences(both, master: false, inactivity: false)
        _ = try run()
        #expect(try f.decisions(both) == ["suppressed:organization_scenario_off"])
    }

    @Test func mentorWithoutDeviceStillGetsTheInboxRow() throws {
        let org = try f.organization("Org")
        let noDevice = try f.mentor(org, "No phone", lastActivityDaysAgo: 20, devices: 0)
        let result = try run()
        #expect(try f.inbox(noDevice).count == 1)
        #expect(try f.deliveries(noDevice) == 0)
        #expect(try f.decisions(noDevice) == ["notified:inbox_only_no_device"])
        #expect(result.summary?["deliveries"] as? Int == 0)
    }

    @Test func twoDevicesGetTwoDeliveriesAndRetiredTokensNone() throws {
        let org = try f.organization("Org")
        let twoPhones = try f.mentor(org, "Two phones", lastActivityDaysAgo: 20, devices: 2)
        try f.device(twoPhones, provider: "fcm", retired: true)
        let result = try run()
        #expect(try f.inbox(twoPhones).count == 1)
        #expect(try f.deliveries(twoPhones) == 2)
        #expect(result.summary?["deliveries"] as? Int == 2)
    }

    @Test func messageIsInTheUsersLanguageWithADeepLink() throws {
        let org = try f.organization("Org", locale: "nb")
        let english = try f.mentor(org, "Emma", lastActivityDaysAgo: 20, locale: "en-GB")
        let norwegian = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, locale: "nb-NO")
        let orgDefault = try f.mentor(org, "Ola", lastActivityDaysAgo: 20)
        let englishOrg = try f.organization("English org", locale: "en")
        let fromEnglishOrg = try f.mentor(englishOrg, "Sam", lastActivityDaysAgo: 20)
        _ = try run()

        let en = try #require(try f.inbox(english).first)
        #expect(en.title == "Anything to log?")
        #expect(en.body == "Hi Emma! It's been 20 days since you last logged an activity. Tap here to log your conversations and meetings so your statistics stay accurate.")
        #expect(en.data.contains(#""route": "/activities/new""#))
        #expect(en.category == "inactivity")
        let nb = try #require(try f.inbox(norwegian).first)
        #expect(nb.title == "Har du noe å registrere?")
        #expect(nb.body.hasPrefix("Hei Kari! Det er 20 dager siden"))
        #expect(try f.inbox(orgDefault).first?.title == "Har du noe å registrere?")
        #expect(try f.inbox(fromEnglishOrg).first?.title == "Anything to log?")
    }

    /// A user row with a date of `-infinity` (written before 0047, which refuses it now) stopped the whole job:
    /// "cannot convert infinity to bigint", exit 70, nobody in any organization reminded. It is skipped with the
    /// decision `invalid_data` naming the column, the others are reminded, and the run exits 65.
    @Test func aUserWithADateOfMinusInfinityIsSkippedAndTheOthersReminded() throws {
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: nil)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 20)
        try f.pause(per, startedDaysAgo: 40, endsDaysAgo: 30) // the stretch starts at the lift: Per was told of 739,948 days
        // Written before 0047.
        try f.connection.execute("ALTER TABLE users DISABLE TRIGGER users_dates_finite")
        try f.connection.execute("UPDATE users SET joined_at = '-infinity' WHERE id = \(ola)")
        try f.connection.execute("UPDATE users SET last_activity_logged_at = '-infinity' WHERE id = \(per)")
        try f.connection.execute("ALTER TABLE users ENABLE TRIGGER users_dates_finite")

        let plan = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"])
        #expect(plan.status == 65, "\(plan.stderr)")
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("user \(ola.uuidString.lowercased()): users.joined_at is -infinity"), "\(result.stderr)")
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.inbox(ola).isEmpty && f.inbox(per).isEmpty)
        #expect(try f.decisions(ola) == ["suppressed:invalid_data"])
        let detail: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(per)").first!.decode(0)
        #expect(detail.contains("users.last_activity_logged_at is -infinity"), "\(detail)")
        #expect(result.summary?["suppressed"] as? [String: Int] == ["invalid_data": 2], "\(result.stdout)")

        // A new write of it is refused.
        #expect(throws: (any Error).self) { try f.connection.execute("UPDATE users SET last_activity_logged_at = 'infinity' WHERE id = \(kari)") }
        try f.connection.execute("UPDATE users SET display_name = 'Ola N.' WHERE id = \(ola)") // the row's other columns still change
        try f.activity(ola, daysAgo: 1) // and an activity logged moves last_activity_logged_at (the trigger refused it)
        #expect(try f.count("activities") == 3)
    }

    /// A mentor whose name is empty (the app stores what it is given) is greeted without one: "Hei!" ("Hei !"
    /// before), in both shipped languages.
    @Test func aMentorWithoutANameIsGreetedWithoutOne() throws {
        let org = try f.organization("Org", locale: "nb")
        let nameless = try f.mentor(org, "", lastActivityDaysAgo: 20, locale: "nb-NO")
        let spaces = try f.mentor(org, "  ", lastActivityDaysAgo: 20, locale: "en")
        _ = try run()
        let nb = try #require(try f.inbox(nameless).first?.body)
        #expect(nb.hasPrefix("Hei! Det er 20 dager siden du sist registrerte"), "\(nb)")
        let en = try #require(try f.inbox(spaces).first?.body)
        #expect(en.hasPrefix("Hi! It's been 20 days"), "\(en)")
    }

    /// The threshold is counted in days on the mentor's clock: last active at 14:00 on June 1st (Oslo), a mentor
    /// is 14 days inactive all through June 15th, and that morning's run reminds (in 24-hour periods it found 13
    /// days and 20 hours: a day late). Last active at 01:00 on June 2nd, 13 days: not yet.
    @Test func theThresholdsLastDayOnTheMentorsClockRemindsWhateverTheHour() throws {
        let org = try f.organization("Org", locale: "nb")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 13 + 20.0 / 24, locale: "nb-NO")
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 13 + 9.0 / 24, locale: "nb-NO")
        let result = try run()
        let body = try #require(try f.inbox(kari).first?.body)
        #expect(body.hasPrefix("Hei Kari! Det er 14 dager siden du sist registrerte"), "\(body)")
        #expect(try f.inbox(per).isEmpty)
        #expect(result.summary?["notified"] as? Int == 1, "\(result.stdout)")
        // Reminded at 10:00 today: the next reminder is due on June 29th, from its first hour (23:00 on the 28th
        // is too early, 01:00 on the 29th is not).
        _ = try run(daysLater: 13 + 13.0 / 24)
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.decisions(kari) == ["notified:notified", "suppressed:already_notified"])
        let detail: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(kari) ORDER BY id DESC LIMIT 1").first!.decode(0)
        #expect(detail.contains("next reminder from 2026-06-29 if still inactive"), "\(detail)")
        _ = try run(daysLater: 13 + 15.0 / 24)
        #expect(try f.inbox(kari).count == 2)
    }

    @Test func oneDayIsSaidInTheSingular() throws {
        // An organization may remind after a single day (thresholds from 1 are allowed).
        let org = try f.organization("Org", locale: "nb")
        try f.rule(org, settings: #"{"threshold_days": 1}"#)
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1, locale: "nb-NO")
        let emma = try f.mentor(org, "Emma", lastActivityDaysAgo: 1, locale: "en-GB")
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 2, locale: "nb-NO")
        _ = try run()
        let bodies = try [kari, emma, ola].map { try f.inbox($0).first?.body ?? "" }
        #expect(bodies[0].hasPrefix("Hei Kari! Det er 1 dag siden du sist registrerte"), "\(bodies[0])")
        #expect(bodies[1].hasPrefix("Hi Emma! It's been 1 day since you last logged"), "\(bodies[1])")
        #expect(bodies[2].hasPrefix("Hei Ola! Det er 2 dager siden"), "\(bodies[2])")
    }

    @Test func runningAgainCreatesNothingNew() throws {
        let org = try f.organization("Org")
        for i in 0..<5 { try f.mentor(org, "Quiet \(i)", lastActivityDaysAgo: 20, devices: 2) }
        let first = try run()
        #expect(first.summary?["inbox_rows"] as? Int == 5)
        let before = try f.fingerprint()
        let second = try run()
        #expect(second.summary?["inbox_rows"] as? Int == 0)
        #expect(second.summary?["deliveries"] as? Int == 0)
        let after = try f.fingerprint()
        #expect(before["notifications"] == after["notifications"])
        #expect(before["deliveries"] == after["deliveries"])
        #expect(try f.count("notifications") == 5)
        #expect(try f.count("deliveries") == 10)
    }

    @Test func twoConcurrentRunsNotifyEachMentorOnce() throws {
        let org = try f.organization("Org")
        var mentors: [UUID] = []
        for i in 0..<300 { mentors.append(try f.mentor(org, "Quiet \(i)", lastActivityDaysAgo: 20)) }
        let results = Locked<[ProcessRunner.Result]>([])
        let database = db, now = f.now
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            if let result = try? Jobs.inactivityCheck(database, now: now) { results.withLock { $0.append(result) } }
        }
        let both = results.withLock { $0 }
        #expect(both.count == 2)
        #expect(both.allSatisfy { $0.status == 0 })
        #expect(try f.count("notifications") == 300)
        #expect(try f.count("deliveries") == 300)
        let written = both.compactMap { $0.summary?["inbox_rows"] as? Int }.reduce(0, +)
        #expect(written == 300)
        let rows = try f.connection.query("SELECT count(*) FROM notifications GROUP BY user_id HAVING count(*) > 1")
        #expect(rows.count == 0)
    }

    @Test func aSecondRunWhileOneHoldsTheJobExitsZeroAndSaysSo() throws {
        let org = try f.organization("Org")
        try f.mentor(org, "Quiet", lastActivityDaysAgo: 20)
        // Hold the job's run lock from another session, as a long first run would.
        let holder = try db.connect()
        try holder.execute("SELECT pg_advisory_lock(hashtext('mentor-push:job:inactivity-check'))")
        let result = try run()
        #expect(result.summary?["outcome"] as? String == "skipped")
        #expect(result.stderr.contains("another inactivity-check run is in progress"))
        #expect(try f.count("notifications") == 0)
        let outcome: String = try f.connection.query("SELECT outcome FROM job_runs ORDER BY id DESC LIMIT 1").first!.decode(0)
        #expect(outcome == "skipped")
    }

    /// A run limited to some organizations (`--org`, by hand) holds the job only for them. A scheduled run of
    /// every organization that starts meanwhile waits for it to end: it skipped, exited 0 and sent nothing to
    /// any organization. Limited runs of other organizations go side by side; of the same one, or beside a full
    /// run, they skip.
    @Test func aRunLimitedToOneOrganizationMakesTheFullRunWaitNotSkip() throws {
        let first = try f.organization("First"), second = try f.organization("Second")
        let kari = try f.mentor(first, "Kari", lastActivityDaysAgo: 20)
        try f.mentor(second, "Ola", lastActivityDaysAgo: 20)
        // What `inactivity-check --org first` holds while it runs.
        let limited = try db.connect()
        try limited.execute("""
            SELECT pg_advisory_lock(hashtext('mentor-push:job:inactivity-check'), hashtext(\(first.uuidString.lowercased()))),
                   pg_advisory_lock_shared(hashtext('mentor-push:job:inactivity-check'))
            """)
        // Another organization's limited run goes beside it; the same organization's skips.
        let other = try run(["--org", second.uuidString])
        #expect(other.summary?["outcome"] as? String == "ok" && other.summary?["notified"] as? Int == 1, "\(other.stdout)")
        let same = try run(["--org", first.uuidString])
        #expect(same.summary?["outcome"] as? String == "skipped", "\(same.stdout)")
        #expect(same.stderr.contains("another inactivity-check run of every organization or of the same organization is in progress"))

        let full = Locked<ProcessRunner.Result?>(nil)
        let done = DispatchSemaphore(value: 0)
        // The scheduled run: as of the clock, no --now.
        let database = db
        Thread.detachNewThread {
            full.withLock { $0 = try? Jobs.run("inactivity-check", [], database: database) }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 3) == .timedOut, "the full run waits for the limited one")
        #expect(try f.count("notifications") == 1, "Ola's, from the limited run of Second")
        let waiting: Int = try f.connection.query("SELECT count(*) FROM job_runs WHERE job = 'inactivity-check' AND outcome = 'running'").first!.decode(0)
        #expect(waiting == 1, "the waiting run is on record")
        let released = Date()
        try limited.execute("SELECT pg_advisory_unlock_all()")
        #expect(done.wait(timeout: .now() + 60) == .success)
        let result = try #require(full.withLock { $0 })
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.summary?["outcome"] as? String == "ok", "\(result.stdout)")
        #expect(try f.inbox(kari).count == 1, "Kari's reminder, from the full run")
        #expect(result.stderr.contains("limited to some organizations (--org) are in progress: waiting"), "\(result.stderr)")
        // It decided as of when it got the job, not as of its start 3 s before (quiet hours may have begun since).
        let asOf = try #require((result.summary?["as_of"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(asOf >= released.addingTimeInterval(-1), "\(asOf) against \(released)")
        let runs: Int = try f.connection.query("SELECT count(*) FROM job_runs WHERE job = 'inactivity-check' AND outcome = 'ok' AND NOT dry_run").first!.decode(0)
        #expect(runs == 2, "the limited run's row and the full run's one row")

        // A limited run while a full run holds the job skips.
        let holder = try db.connect()
        try holder.execute("SELECT pg_advisory_lock(hashtext('mentor-push:job:inactivity-check'))")
        #expect(try run(["--org", second.uuidString]).summary?["outcome"] as? String == "skipped")
    }

    @Test func dryRunPrintsThePlanAndLeavesEveryTableAsItWas() throws {
        let org = try f.organization("Org")
        let quiet = try f.mentor(org, "Kari Nordmann", lastActivityDaysAgo: 20)
        let paused = try f.mentor(org, "Per Pause", lastActivityDaysAgo: 20)
        try f.pause(paused, startedDaysAgo: 10, endsDaysAgo: nil, reason: "Ferie")
        let before = try f.fingerprint()

        let text = try run(daysLater: 0, ["--dry-run"])
        let json = try run(daysLater: 0, ["--dry-run", "--format", "json"])

        #expect(try f.fingerprint() == before)
        #expect(text.stdout.contains("NOTIFY  Kari Nordmann"))
        #expect(text.stdout.contains("no activity logged for 20 days"))
        #expect(text.stdout.contains("Har du noe å registrere?"))
        #expect(text.stdout.contains("SKIP    Per Pause"))
        #expect(text.stdout.contains("paused: paused since"))
        #expect(text.stdout.contains("(Ferie)"))
        #expect(text.summary?["dry_run"] as? Bool == true)
        #expect(text.summary?["notified"] as? Int == 1)
        let lines = json.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let notify = try #require(lines.first { $0["decision"] as? String == "notify" })
        #expect(notify["user_id"] as? String == quiet.uuidString.lowercased())
        #expect(notify["title"] as? String == "Har du noe å registrere?")
        let skip = try #require(lines.first { $0["decision"] as? String == "suppress" })
        #expect(skip["reason"] as? String == "paused")
    }

    @Test func namesFullOfQuotesSQLAndEmojiComeOutIntact() throws {
        let org = try f.organization(#"Org "quoted" 'n' \ back"#)
        let name = #"Robert'); DROP TABLE users;-- "Bobby" 🎉👩‍👩‍👧 O'Brien \n $1"#
        let tricky = try f.mentor(org, name, lastActivityDaysAgo: 20, locale: "en")
        let dry = try run(daysLater: 0, ["--dry-run", "--format", "json"])
        #expect(dry.stdout.contains("🎉👩‍👩‍👧"))
        _ = try run()
        let inbox = try #require(try f.inbox(tricky).first)
        #expect(inbox.body.hasPrefix("Hi \(name)! It's been 20 days"))
        #expect(try f.count("users") == 1)
    }

    @Test func everyRunLeavesAJobRunRowAndEndsWithASummaryLine() throws {
        let org = try f.organization("Org")
        try f.mentor(org, "Quiet", lastActivityDaysAgo: 20)
        let result = try run()
        let summary = try #require(result.summary)
        #expect(summary["job"] as? String == "inactivity-check")
        #expect(summary["outcome"] as? String == "ok")
        #expect(summary["exit_code"] as? Int == 0)
        let runID = try #require(summary["run_id"] as? Int)
        let row = try #require(try f.connection.query("SELECT outcome, finished_at IS NOT NULL, counts->>'notified' FROM job_runs WHERE id = \(runID)").first)
        #expect(try row.decode(0, as: String.self) == "ok")
        #expect(try row.decode(1, as: Bool.self))
        #expect(try row.decode(2, as: String.self) == "1")
    }

    @Test func orgFlagLimitsTheRunToThoseOrganizations() throws {
        let a = try f.organization("A")
        let b = try f.organization("B")
        let inA = try f.mentor(a, "In A", lastActivityDaysAgo: 20)
        let inB = try f.mentor(b, "In B", lastActivityDaysAgo: 20)
        // The same organization twice (a wrapper's list, a paste) is one organization: the summary listed it twice.
        let result = try run(daysLater: 0, ["--org", a.uuidString, "--org", a.uuidString.uppercased()])
        #expect(try f.inbox(inA).count == 1)
        #expect(try f.inbox(inB).isEmpty)
        #expect(result.summary?["limited_to"] as? [String] == [a.uuidString.lowercased()], "\(result.stdout)")
    }

    /// A row written before the settings were checked that cannot even be read (a number past what a Double
    /// holds) passes over its organization like invalid settings; it stopped the whole job with 70.
    @Test func settingsThatCannotBeReadExit78AndTheOtherOrganizationsStillRun() throws {
        let good = try f.organization("Good org")
        let bad = try f.organization("Broken org")
        try f.ruleWrittenBeforeValidation(bad, settings: #"{"threshold_days": 1e400}"#)
        let inGood = try f.mentor(good, "In good", lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains(#"organization "Broken org""#) && result.stderr.contains("settings cannot be read"), "\(result.stderr)")
        #expect(try f.inbox(inGood).count == 1)
        #expect(result.summary?["outcome"] as? String == "partial")
    }

    @Test func invalidOrganizationSettingsExit78AndTheOtherOrganizationsStillRun() throws {
        let good = try f.organization("Good org")
        let bad = try f.organization("Broken org")
        try f.ruleWrittenBeforeValidation(bad, settings: #"{"threshold_days": "fourteen"}"#)
        let inGood = try f.mentor(good, "In good", lastActivityDaysAgo: 20)
        let inBad = try f.mentor(bad, "In broken", lastActivityDaysAgo: 20)
        // The plan says so in its own lines (the organization vanished from it; only stderr told).
        let plan = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"])
        #expect(plan.status == 78)
        #expect(plan.stdout.contains(#"SKIPPED organization "Broken org""#) && plan.stdout.contains("none of its people are decided"), "\(plan.stdout)")
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78)
        #expect(result.stderr.contains(#"organization "Broken org""#))
        #expect(result.stderr.contains(#"inactivity.threshold_days must be an integer from 1 to 365, found "fourteen""#))
        #expect(try f.inbox(inGood).count == 1)
        #expect(try f.inbox(inBad).isEmpty)
        #expect(result.summary?["outcome"] as? String == "partial")
    }
}
