import Foundation
import Logging
import Postgres
import TextCoding

/// The figures of one scenario run: in its summary line and in `job_runs.counts`.
public struct ScenarioSummary: Sendable {
    public var job: String
    public var dryRun: Bool
    public var candidates = 0
    public var notified = 0
    /// Suppressed candidates by reason, listed in `reasonOrder` (the policies', the scenario's, then the engine's).
    public var suppressed: [SuppressionReason: Int] = [:]
    var reasonOrder: [SuppressionReason]
    /// Inbox rows and deliveries actually written (0 in a dry run).
    public var inboxRows = 0
    public var deliveries = 0
    /// Pushes not sent for the daily cap (their notifications are in the inbox), and waiting pushes of
    /// lower priority that gave their slot to one of this run's.
    public var capped = 0
    public var displaced = 0
    /// Notifications another run had already stored (dedupe key taken), so nothing new was written.
    public var duplicates = 0
    public var invalidOrganizations = 0
    /// Candidates whose own time zone is unknown (their organization's was used).
    public var unknownTimeZones = 0
    /// Events whose own row could not be processed (set aside with the error, see `EventProcessor`).
    public var failedEvents = 0
    /// Organizations left out because they were not due yet (a digest before its send hour).
    public var notDueOrganizations = 0
    /// What delivery did right after recording (a JSON object), when push is configured.
    public var push: String?

    public init(job: String, dryRun: Bool, reasonOrder: [SuppressionReason]) {
        self.job = job
        self.dryRun = dryRun
        self.reasonOrder = reasonOrder
    }

    /// Counts a candidate whose time zone is unknown, and says so in the log.
    mutating func noteUnknownTimeZone(of recipient: Recipient, logger: Logger) {
        guard let zone = recipient.unknownTimeZone else { return }
        unknownTimeZones += 1
        logger.warning("user \(recipient.userID.lowercasedString): time_zone \(zone.debugDescription) is not a known time zone: its organization's (\(recipient.timeZone)) is used; fix the row in users (an IANA name such as Europe/Oslo)")
    }

    /// A dry run's pushes over the daily cap and the waiting pushes they would displace, allocated as the run
    /// would (its lines say CAPPED of every push over the cap, "unless a waiting push of lower priority gives up
    /// its slot"; its summary said nothing of either).
    mutating func countPlanned(_ requests: [DailySlots.Request], on connection: Connection) throws {
        guard !requests.isEmpty else { return }
        let allocation = try DailySlots.plan(requests, on: connection)
        capped += requests.count - allocation.granted.count
        displaced += allocation.displaced.count
    }

    mutating func count(_ decision: Decision) {
        candidates += 1
        switch decision {
        case .notify: notified += 1
        case .suppress(let reason, _):
            if suppressed[reason] == nil && !reasonOrder.contains(reason) { reasonOrder.append(reason) }
            suppressed[reason, default: 0] += 1
        }
    }

    /// Suppressed counts in summary order.
    public var suppressedCounts: [(reason: SuppressionReason, count: Int)] {
        reasonOrder.compactMap { reason in suppressed[reason].map { (reason, $0) } }
    }

    /// The events processed (event-notify's; committed, or set aside with their error), or a dry run's planned.
    public var events = 0

    /// The members of the summary line and of `job_runs.counts`.
    /// The organizations a run limited with `--org` decided for (empty: every organization).
    public var limitedTo: [String] = []

    public var members: JSONWriter {
        var writer = JSONWriter()
        if !limitedTo.isEmpty { writer.add("limited_to", strings: limitedTo) }
        writer.add("candidates", candidates)
        writer.add("notified", notified)
        var reasons = JSONWriter()
        for (reason, n) in suppressedCounts { reasons.add(reason.rawValue, n) }
        writer.add("suppressed", object: reasons)
        writer.add("inbox_rows", inboxRows)
        writer.add("deliveries", deliveries)
        writer.add("duplicates", duplicates)
        if capped > 0 { writer.add("capped", capped) }
        if displaced > 0 { writer.add("displaced", displaced) }
        writer.add("invalid_organizations", invalidOrganizations)
        if unknownTimeZones > 0 { writer.add("unknown_time_zones", unknownTimeZones) }
        if notDueOrganizations > 0 { writer.add("not_due_organizations", notDueOrganizations) }
        if failedEvents > 0 { writer.add("failed_events", failedEvents) }
        if let push { writer.add("push", json: push) }
        return writer
    }

    /// One sentence for people.
    public var sentence: String {
        let verb = dryRun ? "would notify" : "notified"
        var text = "\(job): \(candidates) candidates, \(verb) \(notified), suppressed \(suppressed.values.reduce(0, +))"
        let parts = suppressedCounts.map { "\($0.reason.rawValue) \($0.count)" }
        if !parts.isEmpty { text += " (" + parts.joined(separator: ", ") + ")" }
        if !dryRun { text += "; wrote \(inboxRows) inbox rows and \(deliveries) pending deliveries" }
        if duplicates > 0 { text += "; \(duplicates) already stored (by another run, or for another candidate of this one)" }
        if capped > 0 { text += "; \(capped) over the daily cap (inbox only)" }
        if displaced > 0 { text += "; \(displaced) waiting lower-priority pushes gave up their daily slot" }
        return text
    }
}
