import Foundation
import Logging
import Postgres

/// Runs one scenario job from start to end, the flow of `design.md`: claim the run, select the
/// candidates in one streaming query, decide, record (or print the plan in a dry run), report.
/// Returns the exit status; the last line on stdout is always the run's JSON summary. After SIGTERM or
/// SIGINT a writing run stops taking candidates, records what it decided, prints its summary and
/// ends the process by that signal (see `StopRequest`); the next run picks up the rest.
public enum JobRunner {
    public static func run<S: Scenario>(_ scenario: S, options: JobOptions, delivery: (any JobDelivery)? = nil) -> ExitStatus {
        let logger = JobLogging.logger(job: scenario.jobName, level: options.logLevel)
        let clock = ContinuousClock()
        let started = clock.now
        var summary = RunSummary(job: scenario.jobName, dryRun: options.dryRun, asOf: options.now?.date ?? Date())
        var writer: Connection? = nil
        do {
            try execute(scenario, options: options, delivery: delivery, logger: logger, summary: &summary, writer: &writer)
        } catch {
            let failure = classify(error)
            summary.outcome = "failed"
            summary.exitStatus = failure.status
            summary.message = failure.message
            logger.error("\(failure.message)")
            if let writer, let runID = summary.runID {
                finishRun(writer, runID: runID, summary: summary, logger: logger)
            }
        }
        let elapsed = clock.now - started
        summary.durationMilliseconds = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        Output.line(summary.json)
        Output.flush()
        StopRequest.shared.endIfRequested()
        return summary.exitStatus
    }

    private static func execute<S: Scenario>(_ scenario: S, options: JobOptions, delivery: (any JobDelivery)?, logger: Logger,
                                             summary: inout RunSummary, writer: inout Connection?) throws {
        let now = summary.asOf
        let reader = try connect(options, name: scenario.jobName)
        try Schema.check(reader)
        if !options.dryRun && !options.explain {
            try delivery?.prepare()
            StopRequest.shared.install()
        }

        if !options.dryRun && !options.explain {
            let claimed: Bool = try reader.query("SELECT pg_try_advisory_lock(hashtext(\("mentor-push:job:" + scenario.jobName)))").first!.decode(0)
            guard claimed else {
                summary.outcome = "skipped"
                summary.message = "another \(scenario.jobName) run is in progress; this one exits without doing anything"
                logger.notice("\(summary.message!)")
                summary.runID = try reader.query("""
                    INSERT INTO job_runs (job, as_of, finished_at, outcome, error, host, pid)
                    VALUES (\(scenario.jobName), \(now), now(), 'skipped', \(summary.message), \(ProcessInfo.processInfo.hostName), \(Int(ProcessInfo.processInfo.processIdentifier)))
                    RETURNING id
                    """).first!.decode(0)
                return
            }
        }

        let (rules, invalid) = try RuleLoader.load(scenario, only: options.organizations.map(\.id), from: reader)
        for failure in invalid { logger.error("\(failure.message) (this organization is skipped)") }
        summary.invalidOrganizations = invalid.count
        let query = scenario.candidateQuery(rules: rules, now: now)
        logger.trace("candidate query (parameters not shown): \(query.sql)")

        if options.explain {
            try reader.transaction(.readOnly) {
                for row in try reader.query("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) \(query)") { Output.line(try row.decode(0)) }
            }
            summary.outcome = "explained"
            return
        }

        var recorder: DecisionRecorder<S>? = nil
        if !options.dryRun {
            let connection = try connect(options, name: scenario.jobName)
            writer = connection
            let runID: Int = try connection.query("""
                INSERT INTO job_runs (job, as_of, dry_run, host, pid)
                VALUES (\(scenario.jobName), \(now), false, \(ProcessInfo.processInfo.hostName), \(Int(ProcessInfo.processInfo.processIdentifier)))
                RETURNING id
                """).first!.decode(0)
            summary.runID = runID
            recorder = DecisionRecorder(connection: connection, scenario: scenario, runID: runID, asOf: now)
        }
        let printer = options.dryRun ? PlanPrinter(format: options.format) : nil
        printer?.header(job: scenario.jobName, asOf: now)

        let rulesByOrganization = Dictionary(rules.map { ($0.organizationID, $0) }, uniquingKeysWith: { first, _ in first })
        let streamStarted = ContinuousClock.now
        defer { logger.debug("candidate query and decisions took \(ContinuousClock.now - streamStarted)") }
        do {
            try reader.transaction(.readOnly) {
                try reader.stream(query, binary: true) { row in
                    if recorder != nil && StopRequest.shared.isRequested { throw Stopped() }
                    guard let rule = rulesByOrganization[try Recipient.organization(of: row)] else { return }
                    let recipient = try Recipient(row: row, rule: rule)
                    let decision: Decision
                    if !rule.enabled {
                        decision = .suppress(.organizationScenarioOff, detail: "\(rule.organizationName) has turned \(scenario.key) off")
                    } else if !recipient.pushEnabled {
                        decision = .suppress(.pushDisabled, detail: "the user's notification master switch is off")
                    } else if !recipient.categoryEnabled {
                        decision = .suppress(.categoryDisabled, detail: "the user has turned \(scenario.category.rawValue) notifications off")
                    } else {
                        decision = scenario.decide(try scenario.candidate(row, recipient: recipient), recipient: recipient, rule: rule, now: now)
                    }
                    summary.count(decision)
                    if let printer {
                        printer.print(recipient, organization: rule.organizationName, decision: decision)
                    } else {
                        try recorder?.add(recipient, decision, into: &summary)
                    }
                }
            }
        } catch is Stopped {
            summary.stoppedBy = StopRequest.shared.requestedSignalName
            logger.notice("stopped by \(summary.stoppedBy!) after \(summary.candidates) candidates; what was decided is recorded, the next run picks up the rest")
        }
        try recorder?.flush(into: &summary)
        printer?.footer(summary)

        if !invalid.isEmpty && summary.outcome == "ok" {
            summary.outcome = "partial"
            summary.exitStatus = .config
            summary.message = "\(invalid.count) organization(s) skipped for invalid \(scenario.key) settings (see the log)"
        }
        Output.flush() // the plan first, then the log line about it
        logger.info("\(summary.sentence)")
        if let writer, let runID = summary.runID {
            if let delivery, summary.deliveries > 0, summary.stoppedBy == nil,
               let result = try delivery.deliver(runID: runID, connection: writer, logger: logger) {
                summary.push = result.json
                logger.info("\(result.sentence)")
                if result.status != .ok && summary.exitStatus == .ok {
                    summary.exitStatus = result.status
                    if summary.outcome == "ok" { summary.outcome = "partial" }
                    summary.message = result.sentence
                }
                summary.stoppedBy = summary.stoppedBy ?? result.stoppedBy
            }
            if let signal = summary.stoppedBy {
                summary.outcome = "stopped"
                let stop = "stopped by \(signal): what was decided is recorded; the next run decides the rest and push-deliver sends what is pending"
                summary.message = summary.message.map { stop + "; " + $0 } ?? stop
            }
            finishRun(writer, runID: runID, summary: summary, logger: logger)
        }
    }

    /// Thrown out of the candidate stream when a stop signal came.
    private struct Stopped: Error {}

    static func connect(_ options: JobOptions, name: String) throws -> Connection {
        try JobDatabase.connect(url: options.resolvedDatabaseURL, name: name, statementTimeout: options.statementTimeout)
    }

    private static func finishRun(_ connection: Connection, runID: Int, summary: RunSummary, logger: Logger) {
        let outcome = summary.outcome
        do {
            try connection.execute("""
                UPDATE job_runs SET finished_at = now(), outcome = \(outcome), counts = \(JSONText(summary.countsJSON))::jsonb,
                       error = \(summary.message)
                 WHERE id = \(runID)
                """)
        } catch {
            logger.error("could not record the end of run \(runID): \(error)")
        }
    }

    /// Maps any error to a message and an exit status.
    public static func classify(_ error: Error) -> JobFailure {
        switch error {
        case let failure as JobFailure:
            return failure
        case let error as PostgresError:
            switch error {
            case .connectionFailed, .connectionLost:
                return JobFailure(.unavailable, "\(error)")
            case .server(let server) where server.sqlState == SQLState.queryCanceled:
                return JobFailure(.tempFail, "\(error) (statement timeout: raise --statement-timeout or try again later)")
            case .server(let server) where server.sqlState.hasPrefix("08") || server.sqlState.hasPrefix("57P"):
                return JobFailure(.unavailable, "\(error)")
            case .decoding:
                return JobFailure(.dataError, "unexpected data in the database: \(error)")
            case .server, .encoding:
                return JobFailure(.software, "\(error)")
            }
        default:
            return JobFailure(.software, "unexpected error: \(error)")
        }
    }
}
