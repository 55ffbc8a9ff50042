import Foundation
import JobKit
import Logging
import Postgres

/// Runs one scenario the way `design.md` lays out: claim the run, load the organizations' rules, select
/// the candidates in one streaming query, pass each through the policies and the scenario's decision,
/// record (or print the plan in a dry run), deliver after the commit, report. After SIGTERM or SIGINT a
/// writing run stops taking candidates, records what it decided and leaves the rest for the next run.
public struct ScenarioRunner<S: Scenario> {
    public let scenario: S
    public var options: JobOptions
    public var policies: [any Policy]
    public var delivery: (any JobDelivery)?
    /// Where the plan of a dry run goes (stdout unless a test collects it).
    public var planOutput: (String) -> Void = Output.line

    public init(_ scenario: S, options: JobOptions, policies: [any Policy] = Policies.standard, delivery: (any JobDelivery)? = nil) {
        self.scenario = scenario
        self.options = options
        self.policies = policies
        self.delivery = delivery
    }

    /// Runs inside the job envelope (summary line, `job_runs`, exit status) and returns the exit status.
    public func runAsJob() -> ExitStatus {
        let writes = !options.dryRun && !options.explain
        return JobEnvelope.run(scenario.jobName, dryRun: options.dryRun, asOf: options.now?.date ?? Date(),
                               logLevel: options.logLevel, writes: writes) { run in
            _ = try execute(in: run)
        }
    }

    /// The run itself, for the envelope or for an in-process test with a `JobRun` of its own.
    public func execute(in run: JobRun) throws -> ScenarioSummary {
        let logger = run.logger
        let writes = !options.dryRun && !options.explain
        var summary = ScenarioSummary(job: scenario.jobName, dryRun: options.dryRun,
                                      reasonOrder: policies.flatMap(\.reasons) + scenario.suppressionReasons + [.alreadyNotified])
        summary.limitedTo = options.organizations.map(\.id.lowercasedString)
        run.limited = !options.organizations.isEmpty
        // Whatever way the run ends, its summary line and job_runs row carry what it counted.
        defer { run.counts = { [summary] in summary.members } }

        let reader = try connect()
        try Schema.check(reader)
        if writes {
            try delivery?.prepare()
            guard try run.claimExclusive(on: reader, organizations: options.organizations.map(\.id), restartClock: options.now == nil) else {
                return summary
            }
        } else if options.dryRun {
            // The step before the real run: push settings it would refuse are said (a dry run by hand may lack
            // the key files the unit hands the job, so it goes on).
            do { try delivery?.prepare() } catch let failure as JobFailure {
                logger.warning("push settings: \(failure.message): a real run would exit \(failure.status.rawValue) before deciding anything")
            }
        }

        // Read once the job is ours: a run that waited for it decides as of then (`claimExclusive`).
        let now = run.asOf
        var (rules, invalid) = try RuleLoader.load(scenario, only: options.organizations.map(\.id), from: reader)
        for failure in invalid { logger.error("\(failure.message) (this organization is skipped)") }
        summary.invalidOrganizations = invalid.count
        let printer = options.dryRun ? PlanPrinter(format: options.format, emit: planOutput) : nil
        printer?.header(job: scenario.jobName, asOf: now)
        for failure in invalid { printer?.skipped(failure.message) }
        rules = rules.filter { rule in
            guard let why = scenario.notDue(rule, now: now) else { return true }
            summary.notDueOrganizations += 1
            // Debug: an hourly job (the overdue digest) says it of every organization for most hours of the day.
            logger.debug("\(rule.organizationName): not due: \(why)")
            printer?.notDue(rule.organizationName, id: rule.organizationID, why: why)
            return false
        }
        let query = Recipient.wrap(scenario.candidateQuery(rules: rules, now: now), category: scenario.category, now: now)
        logger.trace("candidate query (parameters not shown): \(query.sql)")

        if options.explain {
            try reader.transaction(.readOnly) {
                for row in try reader.query("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) \(query)") { Output.line(try row.decode(0)) }
            }
            run.outcome = "explained"
            return summary
        }

        var recorder: DecisionRecorder? = nil
        var writer: Connection? = nil
        if writes {
            let connection = try connect()
            writer = connection
            if run.runID == nil { try run.record(on: connection) } // a run that waited is on record already
            recorder = DecisionRecorder(connection: connection, scenario: scenario.key, category: scenario.category,
                                        runID: run.runID!, asOf: now)
        }

        let started = ContinuousClock.now
        var slotsPlanned: [DailySlots.Request] = [] // a dry run's pushes that need a daily slot
        do {
            try reader.transaction(.readOnly) {
                try decideEach(query, rules: rules, on: reader, now: now) { recipient, subject, decision, rule in
                    if recorder != nil && StopRequest.shared.isRequested { throw Stopped() }
                    summary.noteUnknownTimeZone(of: recipient, logger: logger)
                    if case .suppress(.invalidData, let detail) = decision {
                        logger.warning("user \(recipient.userID.lowercasedString): \(detail)")
                    }
                    summary.count(decision)
                    if let printer {
                        if let slot = printer.print(recipient, organization: rule.organizationName, subject: subject, decision: decision) {
                            slotsPlanned.append(DailySlots.Request(index: slotsPlanned.count, user: recipient.userID, slot: slot))
                        }
                    } else {
                        try recorder?.add(recipient, subject: subject, decision, into: &summary)
                    }
                }
            }
        } catch is Stopped {
            run.stoppedBy = StopRequest.shared.requestedSignalName
            logger.notice("stopped by \(run.stoppedBy!) after \(summary.candidates) candidates; what was decided is recorded, the next run picks up the rest")
        }
        logger.debug("candidate query and decisions took \(ContinuousClock.now - started)")
        try summary.countPlanned(slotsPlanned, on: reader)
        try recorder?.flush(into: &summary)
        printer?.footer(summary)

        if !invalid.isEmpty {
            run.degrade(.config, "\(invalid.count) organization(s) skipped for invalid \(scenario.key) settings (see the log)")
        }
        if summary.unknownTimeZones > 0 {
            run.degrade(.dataError, "\(summary.unknownTimeZones) user(s) with an unknown time zone: their organization's was used (see the log)")
        }
        if let invalid = summary.suppressed[.invalidData] {
            run.degrade(.dataError, "\(invalid) candidate(s) with impossible data in their rows \(options.dryRun ? "would be" : "were") skipped (see the log)")
        }
        Output.flush() // the plan first, then the log line about it
        logger.info("\(summary.sentence)")
        if let writer, let runID = run.runID {
            let delivered: DeliveryResult?
            do {
                delivered = delivery != nil && summary.deliveries > 0 && run.stoppedBy == nil
                    ? try delivery!.deliver(runID: runID, connection: writer, logger: logger) : nil
            } catch {
                // The summary and the run's row say what went out before it failed (they said nothing).
                summary.push = delivery?.failedSoFar
                throw error
            }
            if let result = delivered {
                summary.push = result.json
                logger.info("\(result.sentence)")
                if result.status != .ok { run.degrade(result.status, result.sentence) }
                run.stoppedBy = run.stoppedBy ?? result.stoppedBy
            }
            if let signal = run.stoppedBy {
                let stop = "stopped by \(signal): what was decided is recorded; the next run decides the rest and push-deliver sends what is pending"
                run.message = run.message.map { stop + "; " + $0 } ?? stop
            }
        }
        return summary
    }

    /// Streams `query` (a candidate query wrapped by `Recipient.wrap`) on `connection` and hands each candidate
    /// of an organization in `rules` to `body`, decided: the policies and the scenario's decision. The one
    /// decision loop of scheduled runs, event batches and the rules what-if.
    func decideEach(_ query: Query, rules: [OrganizationRule<S.Settings>], on connection: Connection, now: Date,
                    _ body: (Recipient, String?, Decision, OrganizationRule<S.Settings>) throws -> Void) throws {
        let byOrganization = Dictionary(rules.map { ($0.organizationID, $0) }, uniquingKeysWith: { first, _ in first })
        let columns = ColumnIndex()
        try connection.stream(query, binary: true) { row in
            columns.learn(row)
            let candidate = CandidateRow(row: row, columns: columns)
            guard let rule = byOrganization[try Recipient.organizationID(of: candidate)] else { return }
            let recipient = try Recipient(candidate, rule: rule)
            try body(recipient, try candidate.decode("subject", as: String?.self), try decide(candidate, recipient: recipient, rule: rule, now: now), rule)
        }
    }

    /// The policies' screens, the scenario's decision, then the policies' shaping of a notification.
    func decide(_ row: CandidateRow, recipient: Recipient, rule: OrganizationRule<S.Settings>, now: Date) throws -> Decision {
        let context = PolicyContext(scenario: scenario.key, category: scenario.category, recipient: recipient,
                                    organizationName: rule.organizationName, scenarioEnabled: rule.enabled,
                                    priority: rule.priority, now: now)
        for policy in policies {
            if let suppression = policy.screen(context) { return .suppress(suppression.reason, detail: suppression.detail) }
        }
        let decision = scenario.decide(try scenario.candidate(row), recipient: recipient, rule: rule, now: now)
        guard case .notify(var draft) = decision else { return decision }
        for policy in policies {
            if let suppression = policy.shape(&draft, context) { return .suppress(suppression.reason, detail: suppression.detail) }
        }
        return .notify(draft)
    }

    private func connect() throws -> Connection {
        try JobDatabase.connect(url: options.resolvedDatabaseURL, name: scenario.jobName, statementTimeout: options.statementTimeout)
    }

    /// Thrown out of the candidate stream when a stop signal came.
    private struct Stopped: Error {}
}
