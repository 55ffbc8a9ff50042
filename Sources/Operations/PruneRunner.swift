import Foundation
import JobKit
import Logging
import Postgres
import TextCoding

/// The `prune` job: deletes what is past its retention (see `PruneRules` for the rules and their order)
/// in bounded batches, each its own short transaction, so no lock is held for long and a stop between
/// batches loses nothing. `--dry-run` counts, in one read-only transaction, what each rule would delete.
public enum PruneRunner {
    public struct Options: Sendable {
        public var settings: PruneSettings
        public var dryRun: Bool
        public var databaseURL: String?
        public var statementTimeout: Int
        public var logLevel: LogLevelOption

        public init(settings: PruneSettings, dryRun: Bool, databaseURL: String?, statementTimeout: Int = JobDatabase.defaultStatementTimeout, logLevel: LogLevelOption = .info) {
            self.settings = settings
            self.dryRun = dryRun
            self.databaseURL = databaseURL
            self.statementTimeout = statementTimeout
            self.logLevel = logLevel
        }
    }

    /// Rows deleted (or that would be) per table, in the order the rules take them.
    struct Counts {
        var decisions = 0, notifications = 0, deliveries = 0, deliveryEvents = 0, deviceTokens = 0, jobRuns = 0
        /// Retired tokens whose value was erased (their rows stay).
        var tokenValues = 0
        var dailyPushSlots = 0

        var json: JSONWriter {
            var writer = JSONWriter()
            writer.add("decisions", decisions)
            writer.add("notifications", notifications)
            writer.add("deliveries", deliveries)
            writer.add("delivery_events", deliveryEvents)
            writer.add("device_tokens", deviceTokens)
            writer.add("job_runs", jobRuns)
            writer.add("device_token_values", tokenValues)
            writer.add("daily_push_slots", dailyPushSlots)
            return writer
        }
    }

    /// How long a batch waits for a lock before its rule is left for the next run.
    static let lockTimeoutMilliseconds = 5_000

    public static func run(_ options: Options) -> ExitStatus {
        JobEnvelope.run("prune", dryRun: options.dryRun, logLevel: options.logLevel, writes: !options.dryRun) { run in
            let connection = try JobDatabase.connect(url: JobDatabase.url(flag: options.databaseURL), name: "prune",
                                                     statementTimeout: options.statementTimeout)
            try Schema.check(connection)
            let settings = options.settings
            var counts = Counts()
            var batches = 0
            run.counts = {
                var writer = JSONWriter()
                writer.add(options.dryRun ? "would_delete" : "deleted", object: counts.json)
                if !options.dryRun { writer.add("batches", batches) }
                var retention = JSONWriter()
                for setting in PruneSettings.all { retention.add(setting.flag.replacingOccurrences(of: "-", with: "_"), settings[keyPath: setting.keyPath]) }
                writer.add("settings", object: retention)
                return writer
            }
            if options.dryRun {
                counts = try connection.transaction(.readOnly) { try dryRun(connection, PruneRules(settings: settings)) }
            } else {
                guard try run.claimExclusive(on: connection) else { return }
                if run.runID == nil { try run.record(on: connection) } // a run that waited is on record already
                // A rule that meets a lock held elsewhere gives up after a few seconds, holding nothing, and is left for
                // the next run: it waited out the statement timeout (300 s by default) with its batch's rows locked.
                try connection.execute("SELECT set_config('lock_timeout', \(String(PruneRunner.lockTimeoutMilliseconds)), false)")
                var pruner = Pruner(connection: connection, rules: PruneRules(settings: settings), batchSize: settings.batchSize, logger: run.logger)
                defer {
                    // Also when a later batch fails: what committed is gone, and the summary says so.
                    counts = pruner.counts
                    batches = pruner.batches
                }
                try pruner.run()
                if let signal = StopRequest.shared.requestedSignalName {
                    run.stoppedBy = signal
                    run.message = "stopped by \(signal) between batches; the rest is left for the next run"
                }
            }
            let verb = options.dryRun ? "would delete" : "deleted"
            Output.line("prune: \(verb) \(counts.decisions) decisions (decided more than \(settings.decisionsDays) days ago)")
            Output.line("prune: \(verb) \(counts.notifications) notifications (read or deleted and older than \(settings.inboxDays) days, or expired more than \(settings.expiredDays) days ago; no push still open) with \(counts.deliveries) deliveries")
            Output.line("prune: \(verb) \(counts.deliveryEvents) delivery events (those of the notifications above, and any older than \(settings.eventsDays) days)")
            Output.line("prune: \(verb) \(counts.deviceTokens) device tokens (retired more than \(settings.tokenGraceDays) days ago, no delivery left)")
            Output.line("prune: \(options.dryRun ? "would erase" : "erased") the value of \(counts.tokenValues) device tokens (retired more than \(settings.tokenGraceDays) days ago; their rows stay for the deliveries kept)")
            Output.line("prune: \(verb) \(counts.dailyPushSlots) daily push slots (of a local day more than \(PruneRules.slotDays) days past)")
            Output.line("prune: \(verb) \(counts.jobRuns) job runs (finished, started more than \(settings.runsDays) days ago, nothing refers to them)")
        }
    }

    /// What each rule would delete now, counting each row once, in the order the real run takes them.
    static func dryRun(_ connection: Connection, _ rules: PruneRules) throws -> Counts {
        var counts = Counts()
        // The age rules stop below the first row young enough to stay, as the real run does (`Pruner.simple`).
        counts.decisions = try count(connection, "SELECT count(*) FROM decisions dc WHERE \(rules.decisionGone)")
        let cascade = try connection.query("""
            SELECT count(DISTINCT t.id), count(DISTINCT d.id), count(e.id)
              FROM notifications t
              LEFT JOIN deliveries d ON d.notification_id = t.id
              LEFT JOIN delivery_events e ON e.delivery_id = d.id
             WHERE \(rules.notification)
            """).first!
        counts.notifications = try cascade.decode(0)
        counts.deliveries = try cascade.decode(1)
        counts.deliveryEvents = try cascade.decode(2)
        counts.deliveryEvents += try count(connection, """
            SELECT count(*) FROM delivery_events e
             WHERE \(rules.event)
               AND e.id < coalesce((SELECT min(e.id) FROM delivery_events e
                                     WHERE NOT (\(rules.event))
                                       AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN notifications t ON t.id = d.notification_id
                                                        WHERE d.id = e.delivery_id AND coalesce((\(rules.notification)), false))),
                                   9223372036854775807)
               AND NOT EXISTS (SELECT 1 FROM deliveries d JOIN notifications t ON t.id = d.notification_id
                                WHERE d.id = e.delivery_id AND coalesce((\(rules.notification)), false))
            """)
        counts.deviceTokens = try count(connection, "SELECT count(*) FROM device_tokens k WHERE \(rules.token(afterEarlierRules: true))")
        counts.tokenValues = try count(connection, """
            SELECT count(*) FROM device_tokens k WHERE \(rules.tokenValue) AND NOT (\(rules.token(afterEarlierRules: true)))
            """)
        counts.dailyPushSlots = try count(connection, """
            SELECT count(*) FROM daily_push_slots s
             WHERE \(rules.slot)
               AND NOT EXISTS (SELECT 1 FROM notifications t WHERE t.id = s.notification_id AND coalesce((\(rules.notification)), false))
            """)
        counts.jobRuns = try count(connection, "SELECT count(*) FROM job_runs r WHERE \(rules.run(afterEarlierRules: true))")
        return counts
    }

    static func count(_ connection: Connection, _ query: Query) throws -> Int {
        try connection.query(query).first!.decode(0)
    }
}

/// The real run: each rule batch after batch until it takes less than a full batch, checking for a stop
/// request before each batch. Batches walk each table in primary-key order (keyset), so a batch never
/// rescans the rows the previous ones deleted.
struct Pruner {
    let connection: Connection
    let rules: PruneRules
    let batchSize: Int
    let logger: Logger
    var counts = PruneRunner.Counts()
    var batches = 0

    /// The rules, in their order (see ``PruneRules``).
    enum Rule: String, CaseIterable { case decisions, notifications, deliveryEvents = "delivery_events", deviceTokens = "device_tokens",
                                           tokenValues = "device_token_values", dailyPushSlots = "daily_push_slots", jobRuns = "job_runs" }

    /// Every rule. One cut off by the statement timeout or a lock (a big table on a cold cache, a session holding
    /// the table) is left for the next run and the rules after it go on (each checks what references its rows
    /// as it deletes, so none depends on an earlier one having run): one slow rule skipped all the later ones
    /// every night. The first such error is thrown at the end (75).
    mutating func run() throws {
        var cutOff: Error? = nil
        for rule in Rule.allCases where !stopped {
            do {
                try apply(rule)
            } catch let error as PostgresError where [SQLState.queryCanceled, SQLState.lockNotAvailable].contains(error.sqlState ?? "") {
                logger.error("\(rule.rawValue): \(error): left for the next run; the rules after it go on")
                cutOff = cutOff ?? error
            }
        }
        if let cutOff { throw cutOff }
    }

    /// Counted as each batch commits, so a run that fails part way reports what it did delete.
    mutating func apply(_ rule: Rule) throws {
        switch rule {
        case .decisions: try simple("decisions", alias: "dc", key: "bigint", rules.decision, youngest: rules.decisionThatStays, counted: \.decisions)
        case .notifications: try notifications()
        case .deliveryEvents:
            try simple("delivery_events", alias: "e", key: "bigint", rules.event, youngest: "NOT (\(rules.event))", retention: true, counted: \.deliveryEvents)
        case .deviceTokens: try simple("device_tokens", alias: "k", key: "bigint", rules.token(afterEarlierRules: false), counted: \.deviceTokens)
        case .tokenValues: try eraseTokenValues()
        case .dailyPushSlots: try simple("daily_push_slots", alias: "s", column: "notification_id", key: "uuid", rules.slot, counted: \.dailyPushSlots)
        case .jobRuns: try simple("job_runs", alias: "r", key: "bigint", rules.run(afterEarlierRules: false), counted: \.jobRuns)
        }
    }

    /// Replaces the value of each retired token past the grace that is still referenced by `pruned:<id>`, a
    /// batch per transaction.
    mutating func eraseTokenValues() throws {
        var after = 0
        while !stopped {
            let ids: [Int] = try connection.transaction {
                try connection.query("""
                    WITH batch AS (
                        SELECT k.id FROM device_tokens k WHERE k.id > \(after) AND \(rules.tokenValue)
                         ORDER BY k.id LIMIT \(batchSize) FOR UPDATE SKIP LOCKED
                    )
                    UPDATE device_tokens k SET token = 'pruned:' || k.id FROM batch b WHERE k.id = b.id RETURNING k.id
                    """).map { try $0.decode(0) }
            }
            counts.tokenValues += ids.count
            if !ids.isEmpty { batches += 1 }
            guard ids.count == batchSize, let last = ids.max() else { break }
            after = last
        }
        if counts.tokenValues > 0 { logger.info("erased the value of \(counts.tokenValues) retired device tokens") }
    }

    var stopped: Bool { StopRequest.shared.isRequested }

    /// Deletes the rows of `table` matching `condition`, a batch per transaction. `retention` marks the
    /// transaction as retention, the one way delivery_events lets a DELETE through.
    ///
    /// `youngest`: the condition is an age cutoff on a time the rows are written with, so their ids grow with it,
    /// and `youngest` says which rows stay (the condition's negation, less rows dated ahead of the clock). The
    /// batches then stop below the first of them, found once by primary key: the last batch
    /// read every younger row looking for more (no index on the time), 180 days of delivery events in one
    /// statement, which at scale ran into the statement timeout every night and skipped the rules after it.
    /// A row written out of order above that id waits for the next run.
    mutating func simple(_ table: StaticString, alias: StaticString, column: StaticString = "id", key: StaticString, _ condition: Query,
                         youngest: Query? = nil, retention: Bool = false, counted: WritableKeyPath<PruneRunner.Counts, Int>) throws {
        var deleted = 0
        var after: String? = nil
        let below: String? = try youngest.flatMap { youngest in
            try connection.query("SELECT min(\(sql: alias).\(sql: column))::text FROM \(sql: table) \(sql: alias) WHERE \(youngest)").first!.decode(0)
        }
        while !stopped {
            let row = try connection.transaction { () -> Row in
                if retention { try connection.execute("SELECT set_config('mentor_push.retention', 'on', true)") }
                return try connection.query("""
                    WITH batch AS (
                        SELECT \(sql: alias).\(sql: column) AS key FROM \(sql: table) \(sql: alias)
                         WHERE (\(after)::\(sql: key) IS NULL OR \(sql: alias).\(sql: column) > \(after)::\(sql: key))
                           AND (\(below)::\(sql: key) IS NULL OR \(sql: alias).\(sql: column) < \(below)::\(sql: key)) AND \(condition)
                         ORDER BY \(sql: alias).\(sql: column) LIMIT \(batchSize) FOR UPDATE SKIP LOCKED
                    ), gone AS (
                        DELETE FROM \(sql: table) WHERE \(sql: column) IN (SELECT key FROM batch) RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM batch), (SELECT b.key::text FROM batch b ORDER BY b.key DESC LIMIT 1)
                    """).first!
            }
            let gone: Int = try row.decode(0)
            let taken: Int = try row.decode(1)
            deleted += gone
            counts[keyPath: counted] += gone
            if taken > 0 { batches += 1 }
            guard taken == batchSize, let last = try row.decode(2, as: String?.self) else { break }
            after = last
        }
        if deleted > 0 { logger.info("pruned \(deleted) rows of \(table)") }
    }

    /// Notifications with their deliveries and events, and the decisions' links to them, a batch per transaction.
    mutating func notifications() throws {
        var after: UUID? = nil
        while !stopped {
            let (taken, batch): ([UUID], PruneRunner.Counts) = try connection.transaction {
                var batch = PruneRunner.Counts()
                let ids: [UUID] = try connection.query("""
                    SELECT t.id FROM notifications t
                     WHERE (\(after)::uuid IS NULL OR t.id > \(after)::uuid) AND \(rules.notification)
                     ORDER BY t.id LIMIT \(batchSize) FOR UPDATE SKIP LOCKED
                    """).map { try $0.decode(0) }
                guard !ids.isEmpty else { return ([], batch) }
                let list = PostgresArray(ids)
                try connection.execute("SELECT set_config('mentor_push.retention', 'on', true)")
                batch.deliveryEvents = try connection.execute("""
                    DELETE FROM delivery_events WHERE delivery_id IN (SELECT id FROM deliveries WHERE notification_id = ANY(\(list)::uuid[]))
                    """)
                batch.deliveries = try connection.execute("DELETE FROM deliveries WHERE notification_id = ANY(\(list)::uuid[])")
                try connection.execute("UPDATE decisions SET notification_id = NULL WHERE notification_id = ANY(\(list)::uuid[])")
                batch.notifications = try connection.execute("DELETE FROM notifications WHERE id = ANY(\(list)::uuid[])")
                return (ids, batch)
            }
            // Counted once the batch has committed.
            counts.deliveryEvents += batch.deliveryEvents
            counts.deliveries += batch.deliveries
            counts.notifications += batch.notifications
            if !taken.isEmpty { batches += 1 }
            guard taken.count == batchSize, let last = taken.max(by: { $0.lowercasedString < $1.lowercasedString }) else { break }
            after = last
        }
        if counts.notifications > 0 { logger.info("pruned \(counts.notifications) notifications with \(counts.deliveries) deliveries") }
    }
}
