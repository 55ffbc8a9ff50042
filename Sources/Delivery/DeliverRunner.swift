import Foundation
import HTTP2
import JobKit
import TextCoding
import Logging
import Postgres
import Push
import ScenarioEngine

/// The `push-deliver` job: drain every due delivery (new ones, retries, rows a crashed run left),
/// or with `--dry-run` list what it would send.
public enum DeliverRunner {
    public struct Options: Sendable {
        public var databaseURL: String?
        public var dryRun: Bool
        public var format: OutputFormat
        public var lease: Int
        public var statementTimeout: Int
        public var logLevel: LogLevelOption
        public var delivery: DeliveryOptions
        /// Engines running side by side, each on its own thread with its own database connection and
        /// its own HTTP/2 connection per provider (Apple: "open several connections" for throughput).
        public var workers: Int

        /// `--workers`, else `PUSH_WORKERS`, else 1. A malformed or out-of-range `PUSH_WORKERS` is a
        /// configuration error (78) naming the variable, never silently one worker.
        public static func workers(flag: Int?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Int {
            if let flag { return flag }
            guard let text = environment["PUSH_WORKERS"], !text.isEmpty else { return 1 }
            guard let n = Int(text), (1...32).contains(n) else {
                throw JobFailure(.config, "PUSH_WORKERS must be a whole number from 1 to 32, found \"\(text)\"")
            }
            return n
        }

        public init(databaseURL: String?, dryRun: Bool, format: OutputFormat, lease: Int, statementTimeout: Int,
                    logLevel: LogLevelOption, delivery: DeliveryOptions, workers: Int = 1) {
            self.workers = workers
            self.databaseURL = databaseURL
            self.dryRun = dryRun
            self.format = format
            self.lease = lease
            self.statementTimeout = statementTimeout
            self.logLevel = logLevel
            self.delivery = delivery
        }
    }

    /// Returns the exit status. After SIGTERM or SIGINT it stops early (see `StopRequest`), prints its
    /// summary, and then ends the process by that signal.
    public static func run(_ options: Options) -> ExitStatus {
        JobEnvelope.run("push-deliver", dryRun: options.dryRun, logLevel: options.logLevel, writes: !options.dryRun) { run in
            let url = JobDatabase.url(flag: options.databaseURL)
            let connection = try JobDatabase.connect(url: url, name: "push-deliver", statementTimeout: options.statementTimeout)
            try forBatches(connection)
            try Schema.check(connection)
            // A real run is on record before its settings are read: one they stop (78) says so in job_runs, where
            // `why` and the alert on the last run look, not only on stderr.
            if !options.dryRun { try run.record(on: connection) }
            let settings = try PushSettings.load(options.delivery)
            for warning in settings.warnings { run.logger.warning("\(warning)") }
            if options.dryRun {
                let due = try plan(connection, settings: settings, format: options.format)
                run.counts = { var writer = JSONWriter(); writer.add("due", json: due); return writer }
                return
            }
            guard settings.isConfigured else {
                throw JobFailure(.config, "no push provider is configured: set APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC, and/or FCM_SERVICE_ACCOUNT_FILE (see push-deliver --help)")
            }
            settings.apnsTokens?.share(through: PostgresAPNsTokenStore(siblingOf: connection, logger: run.logger))
            let report: DeliveryReport
            let results = WorkerResults()
            // One listener for the process's engines: the app's cancels of pushes they have claimed (0038).
            let cancels = try CancelListener(siblingOf: connection, logger: run.logger)
            defer { cancels.stop() }
            do {
                if options.workers <= 1 {
                    report = try drain(connection, url: url, settings: settings, options: options, logger: run.logger, results: results, cancels: cancels)
                } else {
                    report = try drainInParallel(settings: settings, url: url, options: options, logger: run.logger, results: results, cancels: cancels)
                }
            } catch {
                // A failed run's summary and job_runs row still say what went out before (they said nothing).
                let partial = results.soFar
                run.counts = { var writer = JSONWriter(); writer.add("push", json: partial.json); return writer }
                throw error
            }
            run.logger.info("\(report.sentence)")
            run.counts = { var writer = JSONWriter(); writer.add("push", json: report.json); return writer }
            listUnpushed(connection, logger: run.logger)
            warnOfUnconfigured(connection, settings: settings, logger: run.logger)
            if report.exitStatus != .ok { run.degrade(report.exitStatus, report.sentence) }
            if let stoppedBy = report.stoppedBy {
                run.stoppedBy = stoppedBy
                run.message = "stopped by \(stoppedBy); \(report.sentence)"
            }
        }
    }

    /// Says how many pushes are due for a provider that is not configured: they wait (for the setting, or until
    /// they expire), and the run said nothing of them but the backlog in its metrics (the README's advice for a
    /// provider you do not use is to leave its settings out, while such tokens may be registered).
    static func warnOfUnconfigured(_ connection: Connection, settings: PushSettings, logger: Logger) {
        var unconfigured: [(provider: String, setting: String)] = []
        if settings.apns == nil { unconfigured.append(("apns", "APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC")) }
        if settings.fcm == nil { unconfigured.append(("fcm", "FCM_SERVICE_ACCOUNT_FILE")) }
        guard !unconfigured.isEmpty else { return }
        do {
            for (provider, setting) in unconfigured {
                let due: Int = try connection.query("""
                    SELECT count(*) FROM delivery_queue WHERE provider = \(provider) AND next_attempt_at <= now()
                    """).first!.decode(0)
                if due > 0 {
                    logger.warning("\(due) push(es) to \(provider) devices are due and wait: \(provider) is not configured (\(setting)); they go once it is, or expire")
                }
            }
        } catch {
            logger.warning("could not count the pushes waiting for a provider that is not configured: \(error)")
        }
    }

    /// Makes the push-only listings an outcome write had to skip (migration 0032): a notification whose pushes
    /// failed in two transactions at once, each of which saw the other's push still waiting or the row taken.
    /// A failure here is logged, not the run's: what it sent is recorded, and the next run sweeps again.
    static func listUnpushed(_ connection: Connection, logger: Logger) {
        do {
            let listed: Int = try connection.query("SELECT sweep_unpushed_checks(10000)").first!.decode(0)
            if listed > 0 {
                logger.info("listed \(listed) push-only notification(s) in the inbox whose pushes all failed in runs at the same moment")
            }
        } catch {
            logger.warning("could not make the push-only listings skipped earlier (the next run tries again): \(error)")
        }
    }

    /// The claim and the outcome statements run batch after batch: prepared once per connection, and
    /// planned once (their generic plans probe by primary key and walk the due index, whatever the
    /// parameters; planning the claim afresh each time cost more than running it).
    static func forBatches(_ connection: Connection) throws {
        connection.preparesStatements = true
        try connection.execute("SET plan_cache_mode = force_generic_plan")
    }

    /// One engine on this thread, with a second connection of its own on which a writer thread records
    /// outcomes while another claims the next batch on the engine's connection, and the pushes keep
    /// flowing (`OutboxWriter`).
    /// `results` gets what the engine did before it failed.
    /// `careful`: shared by the workers of the process (one of them claims deliveries in doubt at a time).
    static func drain(_ connection: Connection, url: String?, settings: PushSettings, options: Options, logger: Logger,
                      results: WorkerResults, cancels: CancelListener, careful: CarefulClaims = CarefulClaims()) throws -> DeliveryReport {
        let engine = try OutboxEngine(connection: connection, settings: settings, lease: TimeInterval(options.lease), logger: logger)
        engine.cancels = cancels
        engine.careful = careful
        let writer = try JobDatabase.connect(url: url, name: "push-deliver", statementTimeout: options.statementTimeout)
        try forBatches(writer)
        engine.writer = OutboxWriter(connection: writer, claimConnection: connection, reconnect: {
            let fresh = try JobDatabase.connect(url: url, name: "push-deliver", statementTimeout: options.statementTimeout)
            try forBatches(fresh)
            logger.notice("the connection the outcomes are written on broke: writing them on a new one")
            return fresh
        })
        do {
            return try engine.run(scope: .all)
        } catch {
            results.addPartial(engine.lastReport)
            throw error
        }
    }

    /// `options.workers` engines on their own threads, each with its own connections. They share the
    /// database, where row claiming keeps them apart, as it keeps separate processes apart, and the settings'
    /// provider credentials (one APNs provider token, one FCM access token).
    static func drainInParallel(settings: PushSettings, url: String?, options: Options, logger: Logger,
                                results: WorkerResults, cancels: CancelListener) throws -> DeliveryReport {
        let group = DispatchGroup()
        let careful = CarefulClaims()
        for index in 0..<options.workers {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                var workerLogger = logger
                workerLogger[metadataKey: "worker"] = "\(index + 1)"
                do {
                    let connection = try JobDatabase.connect(url: url, name: "push-deliver", statementTimeout: options.statementTimeout)
                    try forBatches(connection)
                    results.add(.success(try drain(connection, url: url, settings: settings, options: options, logger: workerLogger, results: results,
                                                   cancels: cancels, careful: careful)))
                } catch {
                    results.add(.failure(JobFailure(classifying: error)))
                }
            }
            thread.name = "push-deliver-\(index + 1)"
            thread.start()
        }
        group.wait()
        return try results.merged()
    }

    /// Lists the due deliveries, read-only, and returns counts per provider as JSON.
    static func plan(_ connection: Connection, settings: PushSettings, format: OutputFormat) throws -> String {
        var counts: [String: Int] = [:]
        try connection.transaction(.readOnly) {
            if format == .text {
                Output.line("push-deliver, as of \(Timestamp.iso8601(Date())): what a run would do now with the due deliveries (nothing is sent or written)")
            }
            let holds = try OutboxEngine.holds(on: connection)
            let heldEndpoints = Set(holds.map(\.endpoint))
            if format == .text {
                for hold in holds {
                    Output.line("\(hold.endpoint): held until \(Timestamp.iso8601(hold.until)) as its provider asked (\(OutsideText.printable(hold.reason))): its pushes wait")
                }
            }
            try connection.stream("""
                SELECT d.id, d.attempts, t.provider, t.token, t.apns_environment, n.title, n.expires_at, t.retired_at IS NOT NULL,
                       \(OutboxEngine.claimChecks), q.lost_claims + (q.lease_until IS NOT NULL)::int, q.lost_in_a_row
                  FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
                  JOIN device_tokens t ON t.id = d.device_token_id JOIN notifications n ON n.id = d.notification_id
                 WHERE \(DeliveryQueue.duePredicate)
                 ORDER BY q.next_attempt_at, d.id
                """) { row in
                let provider: String = try row.decode(2)
                let rawToken: String = try row.decode(3)
                let token = PushTarget.redact(rawToken)
                let environment = try row.decode(4, as: String?.self)
                let title: String = try row.decode(5)
                let configured = (provider == "apns" && settings.apns != nil) || (provider == "fcm" && settings.fcm != nil)
                let target = PushTarget.Provider(rawValue: provider).map {
                    PushTarget(provider: $0, token: rawToken, apnsEnvironment: environment.flatMap(PushTarget.APNsEnvironment.init(rawValue:)))
                }
                // As the claim counts them: its lease still on the row is one claim more that ended without an outcome.
                let lostClaims: Int = try row.decode(11)
                let attempts = try row.decode(1, as: Int.self) + lostClaims
                // Lost since its last answer (0045): those folded into its attempts before, and these.
                let lostInARow = try row.decode(12, as: Int.self) + lostClaims
                // The run's own checks (`OutboxEngine.verdict`), as of now.
                let verdict = OutboxEngine.verdict(moved: try row.decode(9), paused: try row.decode(10), retired: try row.decode(7), target: target,
                                                   serving: settings.apns == nil ? nil : settings.apnsEnvironments,
                                                   expiresAt: try row.decode(6, as: Date?.self),
                                                   quietHours: (try row.decode(8, as: String?.self)).flatMap(OutboxEngine.quietHours), now: Date(),
                                                   attempts: attempts, lostInARow: lostInARow, maxAttempts: settings.maxAttempts)
                let held = target.map(OutboxEngine.suspectKey).flatMap { heldEndpoints.contains($0) ? $0 : nil }
                let (verb, action): (String, String)
                switch verdict {
                case _ where configured && held != nil:
                    // The run claims none of a held endpoint's rows: each waits as it is.
                    (verb, action) = ("WAIT", "wait (\(held!) held as its provider asked)")
                case .cancelMoved: (verb, action) = ("CANCEL", "cancel (\(OutboxEngine.tokenMovedReason))")
                case .cancelPaused: (verb, action) = ("CANCEL", "cancel (\(OutboxEngine.pausedReason))")
                case .settleRetired: (verb, action) = ("SETTLE", "settle (token retired)")
                case .giveUpUnrecorded(let why): (verb, action) = ("DEAD", "dead: \(why)")
                case .fail(let why): (verb, action) = ("FAIL", "fail: \(why)")
                case .retireMalformed(let malformation): (verb, action) = ("RETIRE", "retire the token: malformed token: \(malformation)")
                case .expire: (verb, action) = ("EXPIRE", "expire")
                case .cancelQuietPastExpiry where !configured, .postpone where !configured, .send where !configured: (verb, action) = ("WAIT", "wait (provider not configured)")
                case .cancelQuietPastExpiry(let end):
                    (verb, action) = ("CANCEL", "cancel (quiet hours until \(Timestamp.iso8601(end)), past its expiry: a push-only notification joins the inbox)")
                case .postpone(let end): (verb, action) = ("LATER", "postpone to the end of the recipient's quiet hours, \(Timestamp.iso8601(end))")
                case .send: (verb, action) = ("SEND", "send")
                }
                counts[provider, default: 0] += 1
                switch format {
                case .text:
                    Output.line("\(verb.padding(toLength: 7, withPad: " ", startingAt: 0))delivery \(try row.decode(0, as: Int.self)) \(provider) \(OutsideText.printable(token))\(environment.map { " (\($0))" } ?? "") attempt \(attempts + 1): \(JSONWriter.string(title))\(action == "send" ? "" : " — \(action)")")
                case .json:
                    var line = JSONWriter()
                    line.add("delivery_id", try row.decode(0, as: Int.self))
                    line.add("verb", verb)
                    line.add("attempt", attempts + 1)
                    line.add("action", action)
                    switch verdict {
                    case .postpone(let until) where configured, .cancelQuietPastExpiry(let until) where configured: line.add("until", Timestamp.iso8601(until))
                    default: break
                    }
                    line.add("provider", provider)
                    line.add("token", token)
                    line.add("environment", environment)
                    line.add("title", title)
                    Output.line(line.json)
                }
            }
        }
        var writer = JSONWriter()
        for (provider, n) in counts.sorted(by: { $0.key < $1.key }) { writer.add(provider, n) }
        return writer.json
    }
}

/// What the parallel workers report, collected under a lock.
final class WorkerResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<DeliveryReport, JobFailure>] = []
    private var partials: [DeliveryReport] = []

    func add(_ result: Result<DeliveryReport, JobFailure>) {
        lock.withLock { results.append(result) }
    }

    /// What a worker's engine did before it failed.
    func addPartial(_ report: DeliveryReport) {
        lock.withLock { partials.append(report) }
    }

    /// What every worker did so far: the reports of those that finished and of those that failed.
    var soFar: DeliveryReport {
        lock.withLock {
            var total = DeliveryReport()
            for case .success(let report) in results { total.add(report) }
            for report in partials { total.add(report) }
            return total
        }
    }

    /// The sum of the workers' reports; the first failure if any worker failed.
    func merged() throws -> DeliveryReport {
        if case .failure(let failure)? = lock.withLock({ results.first { if case .failure = $0 { true } else { false } } }) { throw failure }
        return soFar
    }
}
