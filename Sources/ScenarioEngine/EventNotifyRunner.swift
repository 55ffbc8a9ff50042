import Foundation
import JobKit
import Logging
import Postgres

/// `event-notify`: the long-running process that turns events into pushes seconds after their commit.
///
/// It LISTENs on `mentor_push_events` and drains what is pending whenever a notification arrives, and at
/// least every `pollInterval` (the backstop: a NOTIFY is only a hint, the `events` rows are the truth),
/// a batch per transaction (`EventProcessor`), pushing each batch right after its commit. When the
/// database goes away it reconnects with backoff (1 s doubling to 30 s) and catches up from the table.
/// `once` drains what is pending and exits (cron-only hosts, CI, tests). SIGTERM: the batch in progress
/// commits and is pushed, then the process ends by the signal. Processed events older than
/// `retentionDays` are deleted in bounded batches as it goes.
public struct EventNotifyRunner {
    public struct Settings: Sendable {
        public var once = false
        public var listen = true
        public var pollInterval: Duration = .seconds(5)
        public var retentionDays = 7
        public init() {}
    }

    public static let job = "event-notify"
    /// How long the drain waits for subjects another session holds before it lets them be (`SubjectOrder`).
    static let heldBackAtMost: Duration = .seconds(5)

    public let processor: EventProcessor
    public var options: JobOptions
    public var settings: Settings
    public var delivery: (any JobDelivery)?
    /// Where the plan of a dry run goes (stdout unless a test collects it).
    public var planOutput: (String) -> Void = Output.line

    public init(_ processor: EventProcessor, options: JobOptions, settings: Settings, delivery: (any JobDelivery)? = nil) {
        self.processor = processor
        self.options = options
        self.settings = settings
        self.delivery = delivery
    }

    public func runAsJob() -> ExitStatus {
        JobEnvelope.run(Self.job, dryRun: options.dryRun, asOf: options.now?.date ?? Date(), logLevel: options.logLevel,
                        writes: !options.dryRun) { run in
            try execute(in: run)
        }
    }

    public func execute(in run: JobRun) throws {
        let logger = run.logger
        run.measuresEvents = true
        var summary = ScenarioSummary(job: Self.job, dryRun: options.dryRun, reasonOrder: processor.reasonOrder)
        /// The counts so far, for the run's record and its metrics: a service's run is the life of its process,
        /// and its metrics file, rewritten as it runs, showed none of them until it ended.
        func keepCounts() { run.counts = { [summary] in var writer = summary.members; writer.add("events", summary.events); return writer } }
        defer { keepCounts() }

        if options.dryRun {
            let connection = try connect()
            try Schema.check(connection)
            let printer = PlanPrinter(format: options.format, emit: planOutput)
            printer.header(job: Self.job, asOf: run.asOf)
            summary.events = try processor.plan(on: connection, now: run.asOf, printer: printer, logger: logger, summary: &summary)
            // The exit code the run would have, as the scheduled jobs' dry runs give it.
            _ = Self.degrade(run, for: summary, since: ScenarioSummary(job: Self.job, dryRun: true, reasonOrder: []), dryRun: true)
            printer.footer(summary)
            Output.flush()
            logger.info("\(summary.events) events: \(summary.sentence)")
            return
        }

        try delivery?.prepare()
        let stop = StopRequest.shared
        var connection: Connection? = nil
        var reconnectDelay = 1.0
        /// Whether it said that a subject has been held too long (`SubjectOrder`), and whether the last drain left
        /// only held subjects (it looks again in a moment).
        var heldTooLong = false
        var heldWaiting = false
        var lastPrune: ContinuousClock.Instant? = nil
        var lastMetrics: ContinuousClock.Instant? = nil
        /// Whether the last delivery went through, as the metrics last said: a change is published at once.
        var healthy = true
        /// Whether it is unwell only because deliveries failed (a provider stopped it), not for events set aside.
        var onlyDeliveriesFailed = false
        var publishedHealthy: Bool? = nil
        /// A connection was lost: the run's pushes that delivery had not sent yet (cut off, or claimed and given
        /// back) are sent once it is back, not left to push-deliver's next minute.
        var deliveryOwed = false
        /// The summary as the exit code and metrics last took it in (`degrade`): events taken one at a time and
        /// committed before a lost connection count, though their batch ended with the loss.
        var accounted = summary
        let started = ContinuousClock.now
        while !stop.isRequested {
            do {
                let database: Connection
                if let connection { database = connection } else {
                    database = try connect()
                    try Schema.check(database)
                    if run.runID == nil { try run.record(on: database) } else { try run.resume(on: database) }
                    if settings.listen && !settings.once { try database.listen("mentor_push_events") }
                    connection = database
                    if reconnectDelay > 1 { logger.notice("reconnected to the database; catching up from the events table") }
                    reconnectDelay = 1
                }
                // Drain: a batch per transaction, each pushed right after its commit. A drain that took events
                // says whether all went well; one that found none leaves the last word as it was.
                var drained = false
                heldWaiting = false
                var drainHealthy = true
                var setAside = false
                if deliveryOwed {
                    deliveryOwed = false
                    if try !deliver(run: run, connection: database, summary: &summary) { drainHealthy = false }
                }
                while !stop.isRequested {
                    let now = options.now?.date ?? Date()
                    let batch = try processor.processBatch(on: database, runID: run.runID!, now: now, logger: logger, summary: &summary)
                    let taken = batch.processed
                    if !Self.degrade(run, for: summary, since: accounted, dryRun: false) { drainHealthy = false; setAside = true }
                    accounted = summary
                    for (scenario, reason) in processor.suspended.reasons.sorted(by: { $0.key < $1.key }) {
                        run.degrade(.config, "\(scenario) cannot run (\(reason)): its events wait, pending, until it is fixed")
                        drainHealthy = false
                        setAside = true
                    }
                    // A subject another session has held for long (a batch stuck, a session idle in a transaction
                    // with some of its events locked) is said once; `--once` then ends with 75, leaving it pending.
                    if let held = processor.held.longest {
                        if held.waited >= Self.heldBackAtMost && !heldTooLong {
                            heldTooLong = true
                            let message = "the events of \(held.subjects.count) subject(s) (\(held.subjects.joined(separator: ", "))) stay pending: another session has held some of them locked for \(Self.heldBackAtMost) (another event-notify's batch, or a session idle in a transaction: see pg_stat_activity)"
                            logger.warning("\(message); tried again as they come free")
                            if settings.once { run.degrade(.tempFail, message) }
                        }
                    } else {
                        heldTooLong = false
                    }
                    if taken == 0 && batch.heldBack > 0 {
                        // Only held subjects are left: taken once the session that holds them commits. `--once` tries
                        // again in a moment; a service waits as after a drain (LISTEN, metrics), but only a moment.
                        if settings.once && !heldTooLong {
                            Thread.sleep(forTimeInterval: 0.02)
                            continue
                        }
                        heldWaiting = true
                        break
                    }
                    if taken == 0 { break }
                    drained = true
                    logger.debug("\(taken) events processed")
                    if try !deliver(run: run, connection: database, summary: &summary) { drainHealthy = false }
                }
                if drained || !drainHealthy {
                    healthy = drainHealthy
                    onlyDeliveriesFailed = !drainHealthy && !setAside
                }
                // Well again once what its failed deliveries left waiting has gone out (push-deliver sent it after
                // the outage): at night no event may come for hours to say so, and the alert stayed on till then.
                // Not after events set aside (invalid rules, unreadable rows): those leave no delivery to wait for,
                // and only a batch that goes well says they are over.
                if !healthy && !drained && onlyDeliveriesFailed, try Self.nothingLeftWaiting(of: run.runID!, on: database) { healthy = true }
                // A service never ends: its metrics say it is alive every 15 s, and well (last success: now)
                // while its last delivery went through; a provider that stopped it shows at once.
                if publishedHealthy != healthy || lastMetrics.map({ ContinuousClock.now - $0 > .seconds(15) }) ?? true {
                    run.measureBacklog()
                    keepCounts()
                    run.publishMetrics(duration: ContinuousClock.now - started, outcome: healthy ? "running" : "degraded", succeeded: healthy, well: healthy)
                    lastMetrics = ContinuousClock.now
                    publishedHealthy = healthy
                }
                if lastPrune.map({ ContinuousClock.now - $0 > .seconds(600) }) ?? true {
                    try prune(database, logger: logger)
                    lastPrune = ContinuousClock.now
                }
                if settings.once { break }
                // Woken for the next heartbeat too: a poll interval above 15 s (the demo's 30) wrote the file that
                // much less often, and an alert on its age would fire on a service that was well.
                let nextHeartbeat = lastMetrics.map { .seconds(15) - (ContinuousClock.now - $0) } ?? .zero
                let atMost = heldWaiting ? HeldSubjects.passOverFor : settings.pollInterval
                try wait(database, atMost: max(.milliseconds(50), min(atMost, nextHeartbeat)))
            } catch {
                if !Self.degrade(run, for: summary, since: accounted, dryRun: false) { healthy = false; onlyDeliveriesFailed = false }
                accounted = summary
                guard !settings.once, Self.isConnectionLoss(error) else { throw error }
                logger.warning("\(connection == nil ? "cannot connect to the database" : "database connection lost") (\(error)); reconnecting in \(Int(reconnectDelay)) s")
                // Said in the metrics too, as it goes: a service that never got a connection (a fresh install, a
                // database down at boot) wrote no file at all, and no alert could see it.
                if publishedHealthy != false || lastMetrics.map({ ContinuousClock.now - $0 > .seconds(15) }) ?? true {
                    keepCounts()
                    run.publishMetrics(duration: ContinuousClock.now - started, outcome: "reconnecting", succeeded: false, withBacklog: false,
                                       unwell: .unavailable)
                    lastMetrics = ContinuousClock.now
                    publishedHealthy = false
                }
                if connection != nil { deliveryOwed = true }
                connection = nil
                sleep(seconds: reconnectDelay)
                reconnectDelay = min(30, reconnectDelay * 2)
            }
        }
        if let signal = stop.requestedSignalName { run.stoppedBy = signal }
        Output.flush()
        logger.info("\(summary.events) events: \(summary.sentence)")
    }

    /// Waits for a notification or `atMost` (the poll interval, or less for the next heartbeat), whichever comes
    /// first, waking often enough to notice a stop signal.
    private func wait(_ connection: Connection, atMost: Duration) throws {
        let deadline = ContinuousClock.now + atMost
        while !StopRequest.shared.isRequested && ContinuousClock.now < deadline {
            let slice = min(.milliseconds(250), ContinuousClock.now.duration(to: deadline))
            if settings.listen {
                if try connection.waitForNotifications(timeout: slice) > 0 { return }
            } else {
                Thread.sleep(forTimeInterval: Double(slice.components.seconds) + Double(slice.components.attoseconds) / 1e18)
            }
        }
    }

    /// Delivers what the batch recorded; false when a provider could not be used (its deliveries wait).
    private func deliver(run: JobRun, connection: Connection, summary: inout ScenarioSummary) throws -> Bool {
        guard let delivery else { return true }
        let delivered: DeliveryResult?
        do {
            delivered = try delivery.deliver(runID: run.runID!, connection: connection, logger: run.logger)
        } catch {
            // Cut off (a lost connection): what went out before counts.
            if let soFar = delivery.failedSoFar { summary.push = soFar }
            throw error
        }
        guard let result = delivered else { return true }
        summary.push = result.json
        if result.status != .ok {
            run.logger.error("\(result.sentence): deliveries stay pending for push-deliver")
            run.degrade(result.status, result.sentence)
            return false
        }
        return true
    }

    /// Shows in the run's exit code and metrics what a batch (or a dry run's plan) met beyond `before`, as the
    /// scheduled jobs show it: events set aside for rows that cannot be read (65) or for their organization's
    /// invalid rules (78), users decided with their organization's zone (65). Returns false when events were set
    /// aside (the drain was not healthy).
    private static func degrade(_ run: JobRun, for summary: ScenarioSummary, since before: ScenarioSummary, dryRun: Bool) -> Bool {
        let were = dryRun ? "would be" : "were"
        var healthy = true
        if summary.failedEvents > before.failedEvents {
            run.degrade(.dataError, "events that could not be read \(were) set aside with the error (see the log and events.error)")
            healthy = false
        }
        if summary.invalidOrganizations > before.invalidOrganizations {
            run.degrade(.config, "events of organizations with invalid settings \(were) set aside with the error (see the log and events.error)")
            healthy = false
        }
        if summary.unknownTimeZones > before.unknownTimeZones {
            run.degrade(.dataError, "users with an unknown time zone \(were) decided with their organization's (see the log)")
        }
        return healthy
    }

    /// Deletes processed events older than the retention, 10,000 at a time (short transactions, no long locks).
    private func prune(_ connection: Connection, logger: Logger) throws {
        var deleted = 0
        while !StopRequest.shared.isRequested {
            let count = try connection.execute("""
                DELETE FROM events WHERE id IN (
                    SELECT id FROM events WHERE processed_at < now() - make_interval(days => \(settings.retentionDays)) AND error IS NULL
                     LIMIT 10000)
                """)
            deleted += count
            if count < 10_000 { break }
        }
        if deleted > 0 { logger.info("pruned \(deleted) events processed more than \(settings.retentionDays) days ago") }
    }

    private func sleep(seconds: Double) {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while !StopRequest.shared.isRequested && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.1) }
    }

    /// Whether none of the deliveries of run `runID`'s notifications is due and unsent (one deferred to the end of
    /// its recipient's quiet hours waits by design, not for a provider).
    /// From the queue's due rows (few), each row's run looked up by its keys, as the claim does: joined from the
    /// run's notifications, it read every notification the service ever stored, at every wake while unwell.
    static func nothingLeftWaiting(of runID: Int, on connection: Connection) throws -> Bool {
        try connection.query("""
            SELECT NOT EXISTS (SELECT 1 FROM delivery_queue q
                                WHERE \(DeliveryQueue.duePredicate)
                                  AND (SELECT n.job_run_id FROM deliveries d JOIN notifications n ON n.id = d.notification_id
                                        WHERE d.id = q.delivery_id) = \(runID)::bigint)
            """).first!.decode(0)
    }

    /// A database that went away or cannot be reached now (worth reconnecting to), not a bad query or URL.
    static func isConnectionLoss(_ error: Error) -> Bool {
        switch error {
        case let failure as JobFailure: return failure.status == .unavailable
        case let error as PostgresError: return error.isConnectionLoss
        default: return false
        }
    }

    /// The same few statements run for every batch: prepared once per connection (`preparesStatements`).
    private func connect() throws -> Connection {
        let connection = try JobDatabase.connect(url: options.resolvedDatabaseURL, name: Self.job, statementTimeout: options.statementTimeout)
        connection.preparesStatements = true
        return connection
    }
}
