import Foundation
import JobKit
import Logging
import Postgres

/// Turns pending `events` into notifications with the event scenarios, a batch at a time. One batch is one
/// transaction: claim the oldest pending events (`FOR UPDATE SKIP LOCKED`, so several processes share the
/// work), let each scenario that answers their kinds decide through the engine's policies, write the inbox
/// rows, deliveries and decisions, and mark the events processed. A crash rolls the whole batch back and
/// another process (or the next start) takes it again; the dedupe keys make a repeat harmless.
public struct EventProcessor {
    public let handlers: [any EventHandling]
    public var policies: [any Policy]
    public var batchSize: Int
    /// The scenarios that could not run, for now: their events wait.
    public let suspended = SuspendedScenarios()
    /// The subjects recent batches held back, which claims pass over for a moment (`HeldSubjects`).
    public let held = HeldSubjects()
    /// For tests: called inside a batch's transaction when it reaches each stage, to let another session act then.
    var reached: ((BatchStage) throws -> Void)?

    /// Where a batch is, for `reached`.
    enum BatchStage {
        /// The oldest pending events are claimed; nothing else is read yet.
        case claimed
        /// The claim has taken its subjects' other pending events (`SubjectOrder.admit`); nothing is decided yet.
        case admitted
        /// The scenarios have decided and recorded; the events are not yet marked processed.
        case decided
    }

    public init(_ scenarios: [any EventHandling], policies: [any Policy] = Policies.standard, batchSize: Int = 500) {
        self.handlers = scenarios
        self.policies = policies
        self.batchSize = batchSize
    }

    /// Every reason a summary may list, in order.
    public var reasonOrder: [SuppressionReason] {
        policies.flatMap(\.reasons) + handlers.flatMap(\.suppressionReasons) + [.alreadyNotified]
    }

    /// Claims and processes one batch on `connection`; returns how many events it processed (0 and none held back:
    /// nothing pending) and how many subjects it left pending because another batch holds some of their events
    /// (`SubjectOrder`), or, when it found nothing else, how many held subjects wait to be taken again.
    /// A deadlock or serialization failure (another transaction on the same rows: an app withdrawing an
    /// assignment, a job taking daily slots) rolls the batch back whole; it is taken again, up to 3 times.
    /// An error of the data (see `PostgresError.isDataAtFault`: a value an event row holds that cannot be read, a
    /// constraint a row breaks, a column that does not hold what is read) rolls it back too; its events are then
    /// taken one at a time, and the one at fault is set aside with the error (`events.error`), so one bad row does
    /// not stop every later event (the service restarted on the same batch for ever). Such events are counted in
    /// `summary.failedEvents`. A scenario that cannot run at all (its defaults or default templates unusable:
    /// 78) is suspended: its kinds of events wait, pending, the others go on, and it is tried again a minute later.
    public func processBatch(on connection: Connection, runID: Int, now: Date, logger: Logger, summary: inout ScenarioSummary) throws -> BatchOutcome {
        let counted = summary
        do {
            return try retryingConflicts(logger: logger, summary: &summary) { summary in
                try processBatchOnce(on: connection, runID: runID, now: now, logger: logger, summary: &summary)
            }
        } catch let unusable as UnusableScenario {
            summary = counted
            suspended.suspend(unusable, logger: logger)
            return try processBatch(on: connection, runID: runID, now: now, logger: logger, summary: &summary)
        } catch let error as PostgresError where error.isDataAtFault {
            summary = counted
            logger.warning("events batch rolled back (\(error)); taking its events one at a time")
            return try processOneByOne(on: connection, runID: runID, now: now, logger: logger, summary: &summary)
        } catch {
            // Rolled back (a lost connection, a stop): none of it counts; the batch is taken again and counted then.
            summary = counted
            throw error
        }
    }

    /// Runs `body`, again (up to 3 times) after a deadlock or serialization failure, with `summary` as it was.
    private func retryingConflicts(logger: Logger, summary: inout ScenarioSummary, _ body: (inout ScenarioSummary) throws -> BatchOutcome) throws -> BatchOutcome {
        let counted = summary
        for attempt in 1... {
            do {
                return try body(&summary)
            } catch let error as PostgresError where attempt < 4 && [SQLState.deadlockDetected, SQLState.serializationFailure,
                                                                     SQLState.lockNotAvailable].contains(error.sqlState ?? "") {
                summary = counted
                logger.warning("events batch rolled back (\(error)); taking it again")
                Thread.sleep(forTimeInterval: 0.05 * Double(attempt))
            }
        }
        fatalError("unreachable")
    }

    /// The pending events of a batch that met a data exception, each in a transaction of its own; one that meets
    /// one again is marked processed with the error. A scenario found unusable on the way is suspended, as in
    /// `processBatch`. When more than one event failed alone with the very same error, and not on a value that
    /// cannot be read, the fault is more likely the code's or the schema's than each event's (an old build left
    /// running after a migration that added a constraint): none is set aside, and the error ends the run, as
    /// before; setting them aside would lose each event's notification until someone handed it back. An event
    /// decided by subject (`SubjectOrder`) is taken with its subject's other pending events, and when that fails
    /// they are all set aside together, with the error: a notice decided without one of them could name dates
    /// that no longer hold, or be sent again when the other is handed back.
    private func processOneByOne(on connection: Connection, runID: Int, now: Date, logger: Logger, summary: inout ScenarioSummary) throws -> BatchOutcome {
        let pending = try connection.query("""
            SELECT id, kind, subject_id FROM events WHERE processed_at IS NULL AND kind <> ALL(\(PostgresArray(suspended.kinds))::text[])
             ORDER BY id LIMIT \(batchSize)
            """).map { SubjectOrder.Event(id: try $0.decode(0), kind: try $0.decode(1), subject: try $0.decode(2)) }
        let order = subjectOrder
        var outcome = BatchOutcome()
        var failed: [(ids: [Int], error: PostgresError)] = []
        var failedSubjects = Set<String>()
        for event in pending {
            let subject = order.kinds.contains(event.kind) ? event.subject : nil
            if let subject, failedSubjects.contains(subject) { continue }
            let counted = summary
            do {
                outcome += try retryingConflicts(logger: logger, summary: &summary) { summary in
                    try processBatchOnce(only: event.id, on: connection, runID: runID, now: now, logger: logger, summary: &summary)
                }
            } catch let unusable as UnusableScenario {
                summary = counted
                suspended.suspend(unusable, logger: logger)
            } catch let error as PostgresError where error.isDataAtFault {
                summary = counted
                if let subject {
                    failedSubjects.insert(subject)
                    failed.append((try order.pendingEvents(of: subject, on: connection), error))
                } else {
                    failed.append(([event.id], error))
                }
            } catch {
                summary = counted
                throw error
            }
        }
        if failed.reduce(0, { $0 + $1.ids.count }) > 1, let first = failed.first?.error, !first.isUnreadableValue,
           failed.allSatisfy({ $0.error.description == first.description }) {
            throw first
        }
        for (ids, error) in failed {
            let reason = error.description
            let marked = try connection.query("""
                UPDATE events SET processed_at = now(), job_run_id = \(runID), error = \(reason)
                 WHERE id = ANY(\(PostgresArray(ids))::bigint[]) AND processed_at IS NULL RETURNING id, kind
                """)
            for row in marked {
                let id: Int = try row.decode(0)
                let kind: String = try row.decode(1)
                outcome.processed += 1
                summary.events += 1
                summary.failedEvents += 1
                let together = ids.count > 1 ? " (with the other events of its subject, decided together)" : ""
                logger.error("event \(id) (\(kind)) cannot be processed: \(reason); set aside with the error (events.error)\(together), fix what wrote it")
            }
        }
        return outcome
    }

    /// The event kinds whose subject's events are decided together or one batch after another (`SubjectOrder`).
    var subjectOrder: SubjectOrder {
        SubjectOrder(kinds: handlers.filter(\.decidesBySubject).flatMap(\.eventKinds))
    }

    /// Claims and processes the oldest pending events (or only event `only`) in one transaction. A batch whose
    /// subjects gained an event while it decided them (`SubjectsChangedMidBatch`) is made again with those subjects
    /// held back; after 3 such, with every ordered subject of its claim held back.
    private func processBatchOnce(only: Int? = nil, on connection: Connection, runID: Int, now: Date, logger: Logger,
                                  summary: inout ScenarioSummary) throws -> BatchOutcome {
        var holdingBack = Set<String>()
        let counted = summary
        for attempt in 1... {
            do {
                return try processBatchAttempt(only: only, holdingBack: holdingBack, holdingBackAll: attempt > 3, on: connection, runID: runID,
                                               now: now, logger: logger, summary: &summary)
            } catch let changed as SubjectsChangedMidBatch {
                summary = counted
                holdingBack.formUnion(changed.subjects)
                logger.debug("events of \(changed.subjects.sorted().joined(separator: ", ")) were saved while the batch decided them: made again without them")
            }
        }
        fatalError("unreachable")
    }

    private func processBatchAttempt(only: Int?, holdingBack: Set<String>, holdingBackAll: Bool, on connection: Connection, runID: Int, now: Date,
                                     logger: Logger, summary: inout ScenarioSummary) throws -> BatchOutcome {
        let order = subjectOrder
        // Passed over: subjects a recent batch held back, which would otherwise be the oldest pending and fill every
        // claim (a single event asked for is taken whatever).
        let passedOver = only == nil ? held.current : []
        let outcome: BatchOutcome = try connection.transaction {
            let claimed = try connection.query("""
                SELECT id, kind, subject_id FROM events WHERE processed_at IS NULL AND (\(only)::bigint IS NULL OR id = \(only)::bigint)
                   AND kind <> ALL(\(PostgresArray(suspended.kinds))::text[])
                   AND NOT coalesce(kind = ANY(\(PostgresArray(order.kinds))::text[]) AND subject_id = ANY(\(PostgresArray(passedOver))::text[]), false)
                 ORDER BY id LIMIT \(batchSize) FOR UPDATE SKIP LOCKED
                """).map { SubjectOrder.Event(id: try $0.decode(0), kind: try $0.decode(1), subject: try $0.decode(2)) }
            guard claimed.count > 0 else { return BatchOutcome(processed: 0, heldBack: passedOver.count) }
            try reached?(.claimed)
            let everySubject = holdingBackAll ? Set(claimed.compactMap(\.subject)) : []
            let admitted = try order.admit(claimed, holdingBack: holdingBack.union(everySubject), on: connection)
            held.add(admitted.heldByOthers)
            try reached?(.admitted)
            if !admitted.ids.isEmpty {
                for handler in handlers where !admitted.kinds.isDisjoint(with: handler.eventKinds) {
                    do {
                        try handler.process(.claimed(admitted.ids), on: connection, policies: policies, runID: runID, now: now,
                                            printer: nil, logger: logger, summary: &summary)
                    } catch let failure as JobFailure where failure.status == .config {
                        throw UnusableScenario(key: handler.key, kinds: handler.eventKinds, failure: failure)
                    }
                }
                try reached?(.decided)
                let changed = try order.changedMeanwhile(admitted, on: connection)
                if !changed.isEmpty { throw SubjectsChangedMidBatch(subjects: changed) }
                try connection.execute("UPDATE events SET processed_at = now(), job_run_id = \(runID) WHERE id = ANY(\(PostgresArray(admitted.ids))::bigint[])")
                held.release(admitted.subjects)
            }
            return BatchOutcome(processed: admitted.ids.count, heldBack: admitted.heldBack.count)
        }
        // Committed: counted with the rest of what the batch did (and taken back with it when a caller rolls back).
        summary.events += outcome.processed
        return outcome
    }

    /// How many pending events a dry run plans one at a time, after an event row that cannot be read.
    static let planOneByOneAtMost = 1_000

    /// The plan for every pending event, read-only: who would be told what, and why the others would not. An
    /// event row that cannot be read (see `processBatch`) fails its scenario's query: the plan is then made one
    /// event at a time, and such a row is named as one a run would set aside (counted in `failedEvents`).
    /// Returns how many pending events it planned (as a run counts the events it processed).
    @discardableResult
    func plan(on connection: Connection, now: Date, printer: PlanPrinter, logger: Logger, summary: inout ScenarioSummary) throws -> Int {
        try connection.transaction(.readOnly) {
            let pendingCount: Int = try connection.query("""
                SELECT count(*) FROM events WHERE processed_at IS NULL AND kind <> ALL(\(PostgresArray(suspended.kinds))::text[])
                """).first!.decode(0)
            // The lines wait until the whole plan is made, so a plan made again event by event prints none twice.
            var lines: [String] = []
            var buffered = printer
            buffered.emit = { lines.append($0) }
            let counted = summary
            let given = printer.given
            do {
                try connection.execute("SAVEPOINT whole_plan")
                for handler in handlers {
                    try handler.process(.pending, on: connection, policies: policies, runID: nil, now: now,
                                        printer: buffered, logger: logger, summary: &summary)
                }
                lines.forEach(printer.emit)
                return pendingCount
            } catch let error as PostgresError where error.isDataAtFault {
                try connection.execute("ROLLBACK TO SAVEPOINT whole_plan")
                summary = counted
                printer.takeBack(to: given)
            }
            // Event by event costs a few queries each: the oldest `planOneByOneAtMost` are planned, and the rest said.
            let pending = try connection.query("""
                SELECT id, kind FROM events WHERE processed_at IS NULL ORDER BY id LIMIT \(Self.planOneByOneAtMost + 1)
                """)
            if pending.count > Self.planOneByOneAtMost {
                logger.warning("an event row cannot be read: the plan is made one event at a time, for the oldest \(Self.planOneByOneAtMost) pending events only")
            }
            for row in pending.prefix(Self.planOneByOneAtMost) {
                let id: Int = try row.decode(0)
                let kind: String = try row.decode(1)
                let before = summary
                let givenBefore = printer.given
                // An event's lines wait until every scenario of its kind planned it: a later one failing sets the
                // event aside whole, and the lines an earlier one printed told of notifications the run will not make.
                var eventLines: [String] = []
                var eventPrinter = printer
                eventPrinter.emit = { eventLines.append($0) }
                try connection.execute("SAVEPOINT one_event")
                do {
                    for handler in handlers where handler.eventKinds.contains(kind) {
                        try handler.process(.claimed([id]), on: connection, policies: policies, runID: nil, now: now,
                                            printer: eventPrinter, logger: logger, summary: &summary)
                    }
                    try connection.execute("RELEASE SAVEPOINT one_event")
                    eventLines.forEach(printer.emit)
                } catch let error as PostgresError where error.isDataAtFault {
                    try connection.execute("ROLLBACK TO SAVEPOINT one_event")
                    summary = before
                    printer.takeBack(to: givenBefore)
                    summary.failedEvents += 1
                    logger.error("event \(id) (\(kind)) cannot be processed: \(error.description); a run would set it aside with the error (events.error)")
                }
            }
            return min(pendingCount, Self.planOneByOneAtMost)
        }
    }
}

/// What one batch did.
public struct BatchOutcome: Equatable {
    /// Events decided and marked processed (or set aside with their error).
    public var processed = 0
    /// Subjects whose events were left pending because another batch holds some of them (`SubjectOrder`), or that
    /// wait to be taken again: tried again soon.
    public var heldBack = 0

    static func += (total: inout BatchOutcome, batch: BatchOutcome) {
        total.processed += batch.processed
        total.heldBack += batch.heldBack
    }
}

/// An event scenario with its types erased, so the processor can hold a list of them.
public protocol EventHandling {
    var key: String { get }
    var eventKinds: [String] { get }
    var suppressionReasons: [SuppressionReason] { get }
    /// Its events are decided by subject (`SubjectOrder`): every pending event of a subject in one batch, or one
    /// batch after another, never two batches at once. For a scenario whose notice reads the subject as it is now.
    var decidesBySubject: Bool { get }
    /// Decides for every candidate of the selected events, then records (with `runID`) or prints the plan.
    func process(_ events: EventSelection, on connection: Connection, policies: [any Policy], runID: Int?, now: Date,
                 printer: PlanPrinter?, logger: Logger, summary: inout ScenarioSummary) throws
}

extension EventScenario {
    /// Rules, candidates, the policies and the decision, as for a scheduled scenario (`ScenarioRunner.decide`),
    /// then the recording on the same connection and transaction as the claim.
    public func process(_ events: EventSelection, on connection: Connection, policies: [any Policy], runID: Int?, now: Date,
                        printer: PlanPrinter?, logger: Logger, summary: inout ScenarioSummary) throws {
        var options = JobOptions(SharedJobFlags())
        options.dryRun = printer != nil
        let runner = ScenarioRunner(self, options: options, policies: policies)
        // Only the events' own organizations: another's invalid settings pass over none of these events.
        let organizations = try events.organizations(kinds: eventKinds, on: connection)
        if organizations.isEmpty { return }
        let (rules, invalid) = try RuleLoader.load(self, only: organizations, from: connection)
        summary.invalidOrganizations += invalid.count
        if let runID, printer == nil, !invalid.isEmpty {
            // Their events are set aside with the reason (events.error), like an unreadable event: once the rule
            // is fixed, handing them back (processed_at and error to NULL) decides them as if they were new.
            let passedOver = Set(organizations).subtracting(rules.map(\.organizationID))
            for organization in passedOver {
                let reason = invalid.first { $0.message.contains(organization.lowercasedString) }?.message
                    ?? "the organization's rules for \(key) are invalid"
                try connection.execute("""
                    UPDATE events e SET error = \(reason), job_run_id = \(runID)
                      FROM users u
                     WHERE u.id = e.mentor_id AND u.organization_id = \(organization) AND \(events.condition)
                       AND e.kind = ANY(\(PostgresArray(eventKinds))::text[]) AND e.error IS NULL
                    """)
            }
        }
        for failure in invalid {
            logger.error("\(failure.message) (\(printer == nil ? "its events are set aside with the error in events.error, to hand back once it is fixed" : "its events would be set aside"))")
        }
        let query = Recipient.wrap(candidateQuery(rules: rules, events: events, now: now), category: category, now: now)
        // Decide while the rows stream in; record after, on the same connection (it is busy while streaming).
        var decided: [(Recipient, String?, Decision, String)] = []
        try runner.decideEach(query, rules: rules, on: connection, now: now) { recipient, subject, decision, rule in
            decided.append((recipient, subject, decision, rule.organizationName))
        }
        var slotsPlanned: [DailySlots.Request] = [] // a dry run's pushes that need a daily slot
        for (recipient, subject, decision, organization) in decided {
            summary.noteUnknownTimeZone(of: recipient, logger: logger)
            summary.count(decision)
            if let slot = printer?.print(recipient, organization: organization, subject: subject, decision: decision) {
                slotsPlanned.append(DailySlots.Request(index: slotsPlanned.count, user: recipient.userID, slot: slot))
            }
        }
        try summary.countPlanned(slotsPlanned, on: connection)
        guard printer == nil, let runID else { return }
        var recorder = DecisionRecorder(connection: connection, scenario: key, category: category, runID: runID, asOf: now, batchSize: .max)
        for (recipient, subject, decision, _) in decided { try recorder.add(recipient, subject: subject, decision, into: &summary) }
        try recorder.flush(into: &summary)
    }
}

/// A scenario that cannot run at all (its `scenario_defaults` row or its default templates unusable), not one
/// organization's rules: no event of its kinds can be decided until someone fixes it.
struct UnusableScenario: Error {
    let key: String
    let kinds: [String]
    let failure: JobFailure
}

/// Event scenarios that could not run, each until a minute has passed: the batches leave their kinds of events
/// pending (nothing is lost: a scenario fixed decides them as if new), and the others go on. Before, one such
/// scenario stopped the service (78, which its unit does not restart), so no event of any kind was pushed.
public final class SuspendedScenarios: @unchecked Sendable {
    private let lock = NSLock()
    private var until: [String: (kinds: [String], until: ContinuousClock.Instant, reason: String)] = [:]
    static let retryAfter: Duration = .seconds(60)

    func suspend(_ scenario: UnusableScenario, logger: Logger) {
        lock.withLock { until[scenario.key] = (scenario.kinds, ContinuousClock.now + Self.retryAfter, scenario.failure.message) }
        logger.error("\(scenario.failure.message): its events (\(scenario.kinds.joined(separator: ", "))) wait, pending, and are tried again in a minute; the others go on")
    }

    /// The scenarios suspended now.
    private var current: [String: (kinds: [String], until: ContinuousClock.Instant, reason: String)] {
        lock.withLock { until.filter { $0.value.until > ContinuousClock.now } }
    }

    /// The kinds of events left pending now.
    var kinds: [String] { current.values.flatMap(\.kinds).sorted() }

    /// Why each scenario suspended now waits, by its key.
    public var reasons: [String: String] { current.mapValues(\.reason) }
}
