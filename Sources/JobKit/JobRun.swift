import Foundation
import Logging
import Postgres
import TextCoding

/// One run of one executable, whatever the job: its outcome, exit status and message, its row in
/// `job_runs`, and the JSON summary line it ends with. `JobEnvelope` creates it and finishes it; the
/// job fills in what it did.
public final class JobRun {
    public let job: String
    public let dryRun: Bool
    /// The instant the run decides as of: its start, or (`claimExclusive` with `restartClock`) when it got the job
    /// after waiting for it.
    public private(set) var asOf: Date
    public let logger: Logger
    /// "ok", "partial", "failed", "skipped", "stopped", or a job's own word ("explained").
    public var outcome = "ok"
    public var status: ExitStatus = .ok
    public var message: String?
    /// The signal that stopped the run early ("SIGTERM"), if one did.
    public var stoppedBy: String?
    /// Limited to some organizations (`--org`): its success is not the job's, so it writes no metrics.
    public var limited = false
    /// The job's own figures: members of the summary line (between `run_id` and `duration_ms`) and
    /// of `job_runs.counts`. Called when the run ends.
    public var counts: () -> JSONWriter = { JSONWriter() }
    public private(set) var runID: Int?
    /// The connection that holds this run's lock: the row stays 'running' exactly as long as it lives.
    private var recorder: Connection?

    public init(job: String, dryRun: Bool, asOf: Date, logger: Logger) {
        self.job = job
        self.dryRun = dryRun
        self.asOf = asOf
        self.logger = logger
    }

    /// The lock key space of run rows (`pg_advisory_lock(runLockSpace, id)`): "mpjr".
    static let runLockSpace: Int32 = 1_836_021_362

    /// Writes this run's `job_runs` row ('running') on `connection`, which holds the run's lock for as
    /// long as it lives, and first closes, as 'abandoned', the rows of runs whose process or connection
    /// died without finishing them. Call once, with the connection that will outlive the work.
    public func record(on connection: Connection, outcome: String = "running") throws {
        try closeAbandonedRuns(connection)
        let id: Int = try connection.transaction {
            let id: Int = try connection.query("""
                INSERT INTO job_runs (job, as_of, dry_run, outcome, host, pid)
                VALUES (\(job), \(asOf), \(dryRun), \(outcome), \(ProcessInfo.processInfo.hostName), \(Int(ProcessInfo.processInfo.processIdentifier)))
                RETURNING id
                """).first!.decode(0)
            // Taken in the same transaction: nobody sees the row before its lock is held.
            try connection.execute("SELECT pg_advisory_lock(\(JobRun.runLockSpace), \(id)::int)")
            return id
        }
        runID = id
        recorder = connection
    }

    /// After the run's connection was lost (a service reconnecting): takes the run's lock again on
    /// `connection` and marks its row running again (another job may have closed it as abandoned meanwhile),
    /// so the row, the backlog it measures and its end stay this run's. Without a row yet, records one.
    /// When the lost connection's session still holds the lock (its server side has not noticed yet), the run
    /// records a row of its own instead; the old one is closed as abandoned once that session is gone.
    public func resume(on connection: Connection) throws {
        guard let runID else { try record(on: connection); return }
        let resumed: Bool = try connection.transaction {
            let locked: Bool = try connection.query("SELECT pg_try_advisory_lock(\(JobRun.runLockSpace), \(runID)::int)").first!.decode(0)
            guard locked else { return false }
            try connection.execute("""
                UPDATE job_runs SET outcome = 'running', finished_at = NULL, error = NULL
                 WHERE id = \(runID) AND outcome IN ('running', 'abandoned')
                """)
            return true
        }
        if resumed {
            recorder = connection
        } else {
            logger.notice("job_runs \(runID) is still held by the lost connection's session: this run goes on as a new row")
            try record(on: connection)
        }
    }

    /// How long a full run waits for runs limited to some organizations (`--org`, by hand) to end.
    public static let limitedRunsWait: Duration = .seconds(600)

    /// Takes the job's lock for the life of `connection`: exclusive for a run of every organization; for a run
    /// limited to `organizations` (`--org`), shared with other limited runs, and each of its organizations'
    /// own. When another run holds what this one needs (a full run, or a limited run of one of the same
    /// organizations), records a 'skipped' run, says so, and returns false: overlapping runs of a scheduled job
    /// exit 0. A full run that finds only limited runs in its way waits for them (up to `limitedRunsWait`): a
    /// run by hand for one organization made the scheduled run skip all the others, exit 0, and send nothing.
    /// A full run that waits is in `job_runs` while it waits (its row 'running', recorded on `connection`; the
    /// caller records none then) and, with `restartClock`, decides as of when it got the job: as of its start, it
    /// pushed into quiet hours that began while it waited.
    public func claimExclusive(on connection: Connection, organizations: [UUID] = [], wait: Duration = JobRun.limitedRunsWait,
                               restartClock: Bool = false) throws -> Bool {
        let key = "mentor-push:job:" + job
        if organizations.isEmpty {
            if try connection.query("SELECT pg_try_advisory_lock(hashtext(\(key)))").first!.decode(0) { return true }
            // Shared is free while only limited runs hold the job: wait for them, in the lock's queue (limited runs
            // that start meanwhile queue behind this one, so they cannot starve it).
            let onlyLimited: Bool = try connection.query("SELECT pg_try_advisory_lock_shared(hashtext(\(key)))").first!.decode(0)
            guard onlyLimited else { return try skipped(on: connection, because: "another \(job) run is in progress; this one exits without doing anything") }
            try connection.execute("SELECT pg_advisory_unlock_shared(hashtext(\(key)))")
            logger.notice("runs of \(job) limited to some organizations (--org) are in progress: waiting for them to end (up to \(Int(wait.components.seconds)) s)")
            if runID == nil { try record(on: connection) }
            do {
                // The connection's statement timeout (300 s by default) would end the wait first: it is lifted past
                // the lock's for this one statement, and both are put back as they were.
                let before = try connection.query("SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").first!
                let (lockTimeout, statementTimeout): (String, String) = (try before.decode(0), try before.decode(1))
                let milliseconds = wait.components.seconds * 1000
                try connection.execute("SELECT set_config('lock_timeout', \(String(milliseconds)), false), set_config('statement_timeout', \(String(milliseconds + 10_000)), false)")
                defer {
                    _ = try? connection.execute("SELECT set_config('lock_timeout', \(lockTimeout), false), set_config('statement_timeout', \(statementTimeout), false)")
                }
                try connection.execute("SELECT pg_advisory_lock(hashtext(\(key)))")
                if restartClock, let runID {
                    asOf = Date()
                    try connection.execute("UPDATE job_runs SET as_of = \(asOf) WHERE id = \(runID)")
                }
                return true
            } catch let error as PostgresError where error.sqlState == SQLState.lockNotAvailable {
                throw JobFailure(.tempFail, "runs of \(job) limited to some organizations (--org) were still in progress after \(Int(wait.components.seconds)) s: this run did nothing; run it again once they end (job_runs lists them)")
            }
        }
        // Each organization's lock, then the job's shared one; what was taken is given back when any is not free.
        var taken: [String] = []
        for organization in Set(organizations.map { $0.uuidString.lowercased() }).sorted() {
            guard try connection.query("SELECT pg_try_advisory_lock(hashtext(\(key)), hashtext(\(organization)))").first!.decode(0) else { break }
            taken.append(organization)
        }
        if taken.count == Set(organizations).count,
           try connection.query("SELECT pg_try_advisory_lock_shared(hashtext(\(key)))").first!.decode(0) as Bool {
            return true
        }
        for organization in taken { try connection.execute("SELECT pg_advisory_unlock(hashtext(\(key)), hashtext(\(organization)))") }
        return try skipped(on: connection, because: "another \(job) run of every organization or of the same organization is in progress; this one exits without doing anything")
    }

    private func skipped(on connection: Connection, because message: String) throws -> Bool {
        outcome = "skipped"
        self.message = message
        logger.notice("\(message)")
        try record(on: connection, outcome: "skipped")
        return false
    }

    /// Runs that are 'running' but whose lock nobody holds: their process or its connection is gone.
    private func closeAbandonedRuns(_ connection: Connection) throws {
        let closed = try connection.transaction {
            try connection.query("""
                UPDATE job_runs SET outcome = 'abandoned', finished_at = now(),
                       error = 'the run ended without finishing its record (process killed or database connection lost); found by run ' || \(job)
                 WHERE id IN (SELECT id FROM job_runs WHERE outcome = 'running' ORDER BY id)
                   AND pg_try_advisory_xact_lock(\(JobRun.runLockSpace), id::int)
                RETURNING id, job
                """)
        }
        for row in closed {
            let id: Int = try row.decode(0)
            let job: String = try row.decode(1)
            logger.warning("job_runs \(id) (\(job)) was left running by a process that is gone: closed as abandoned")
        }
    }

    /// Marks the run as not fully done: `status` unless a worse one was already set. A message the run
    /// already holds is not added again (a service degraded the same way batch after batch says it once), and
    /// past `messageLimit` bytes the later ones are only counted: a batch's sentence carries its own counts,
    /// so event-notify degraded all night by a provider that was down added one per batch, and its summary
    /// line and `job_runs.error` grew to megabytes (journald cuts a line past 48 KB, and the JSON with it).
    public func degrade(_ status: ExitStatus, _ message: String) {
        if self.status == .ok { self.status = status }
        if outcome == "ok" { outcome = "partial" }
        guard let held = self.message else {
            degradations.insert(message.hashValue)
            self.message = message.utf8.count <= JobRun.messageLimit ? message : String(message.prefix(JobRun.messageLimit / 2)) + "…"
            return
        }
        // Remembered by hash, not text: a service degraded for a month, one distinct sentence per batch, held
        // megabytes of them.
        guard degradations.insert(message.hashValue).inserted else { return }
        if laterDegradations == 0 && held.utf8.count + 2 + message.utf8.count <= JobRun.messageLimit {
            self.message = held + "; " + message
        } else {
            if laterDegradations == 0 { kept = held }
            laterDegradations += 1
            self.message = kept + "; (and \(laterDegradations) more not kept)"
        }
    }

    /// The bytes of messages a run keeps (`degrade`).
    static let messageLimit = 4096
    private var degradations: Set<Int> = []
    /// The messages kept whole, once later ones are only counted.
    private var kept = ""
    private var laterDegradations = 0

    func fail(_ failure: JobFailure) {
        outcome = "failed"
        status = failure.status
        message = failure.message
        logger.error("\(failure.message)")
    }

    /// The outbox's due deliveries when the run ended (for the metrics), read on the run's connection.
    public private(set) var backlog: (due: Int, oldestDueAge: Double)?
    /// Whether the backlog includes the events still to process (event-notify's).
    public var measuresEvents = false
    public private(set) var eventsPending: (count: Int, oldestAge: Double)?

    /// Reads the outbox's due backlog on the run's connection, for the metrics.
    public func measureBacklog() {
        guard let connection = recorder else { return }
        do {
            let row = try connection.query("""
                SELECT count(*)::int, coalesce(extract(epoch FROM now() - min(q.next_attempt_at)), 0)::float8
                  FROM delivery_queue q WHERE \(DeliveryQueue.duePredicate)
                """).first!
            backlog = (try row.decode(0), try row.decode(1))
            if measuresEvents {
                let events = try connection.query("""
                    SELECT count(*)::int, coalesce(extract(epoch FROM now() - (SELECT created_at FROM events WHERE processed_at IS NULL ORDER BY id LIMIT 1)), 0)::float8
                      FROM events WHERE processed_at IS NULL
                    """).first!
                eventsPending = (try events.decode(0), try events.decode(1))
            }
        } catch let error as PostgresError where error.isConnectionLoss {
            // Already said where it was lost (a service stopped while reconnecting): the metrics leave the backlog out.
            backlog = nil
            eventsPending = nil
            logger.debug("no delivery backlog for the metrics: \(error)")
        } catch {
            logger.warning("could not read the delivery backlog for the metrics: \(error)")
        }
    }

    /// Writes the run's metrics to `$METRICS_DIR` (if set), as they stand now. The envelope calls it when a
    /// writing run ends; a long-running job may call it as it goes (`outcome` "running").
    /// `withBacklog` false leaves the backlog out (a service that cannot reach the database has none to say).
    /// `well`: a service well again says exit code 0, whatever it met before (its process's own exit code, at the
    /// end, still says the worst); a gauge stuck at 69 after a short outage a month ago kept its alert on.
    /// `unwell`: the exit code to show while the run's own status is still `ok` (a service reconnecting shows 69).
    public func publishMetrics(duration: Duration, outcome: String? = nil, succeeded: Bool? = nil, withBacklog: Bool = true, well: Bool = false,
                               unwell: ExitStatus? = nil) {
        guard !dryRun, let file = MetricsFile.fromEnvironment(job: job) else { return }
        let exitCode = StopRequest.shared.exitCode(well ? .ok : status == .ok ? unwell ?? .ok : status)
        do {
            try file.write(MetricsFile.Snapshot(finishedAt: Date(), succeeded: succeeded ?? (exitCode == 0 && stoppedBy == nil),
                                                outcome: outcome ?? self.outcome, exitCode: exitCode, duration: duration,
                                                summaryJSON: counts().json, backlog: withBacklog ? backlog : nil,
                                                eventsPending: withBacklog ? eventsPending : nil))
        } catch {
            logger.error("could not write the metrics to \(file.path): \(error)")
        }
    }

    /// Writes the end of the run into its row and releases its lock (a failure is logged, not fatal).
    public func finishRecord() {
        guard let connection = recorder, let runID else { return }
        measureBacklog()
        recorder = nil
        guard outcome != "skipped" else {
            _ = try? connection.execute("UPDATE job_runs SET finished_at = now(), error = \(message) WHERE id = \(runID)")
            return
        }
        let end: Query = """
            UPDATE job_runs SET finished_at = now(), outcome = \(outcome), counts = \(JSONText(counts().json))::jsonb, error = \(message)
             WHERE id = \(runID)
            """
        do {
            try connection.execute(end)
            try connection.execute("SELECT pg_advisory_unlock(\(JobRun.runLockSpace), \(runID)::int)")
        } catch let error as PostgresError where error.isConnectionLoss {
            // The run's connection broke (often why the run failed): its row says so on a new one, or it stayed
            // "running" until a later run called it abandoned, and the reason was on stderr alone. The run's lock
            // went with the broken session.
            do {
                try connection.sibling(applicationName: job).execute(end)
            } catch {
                logger.error("could not record the end of run \(runID): \(error)")
            }
        } catch {
            logger.error("could not record the end of run \(runID): \(error)")
        }
    }

    /// The one-line JSON summary every run ends with.
    func summaryLine(duration: Duration) -> String {
        var writer = JSONWriter()
        writer.add("job", job)
        writer.add("outcome", outcome)
        writer.add("exit_code", StopRequest.shared.exitCode(status))
        if let stoppedBy { writer.add("stopped_by", stoppedBy) }
        writer.add("dry_run", dryRun)
        writer.add("as_of", Timestamp.iso8601(asOf))
        if let runID { writer.add("run_id", runID) } else { writer.add("run_id", nil as String?) }
        writer.append(members: counts())
        writer.add("duration_ms", Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000))
        if let message { writer.add("message", message) }
        return writer.json
    }
}
