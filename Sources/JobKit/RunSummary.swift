import TextCoding
import Foundation
import Postgres

/// The counts of one run: printed as the run's last line (one JSON object) and stored in `job_runs.counts`.
public struct RunSummary: Sendable {
    public var job: String
    public var dryRun: Bool
    public var asOf: Date
    public var runID: Int?
    public var outcome = "ok"
    public var candidates = 0
    public var notified = 0
    public var suppressed: [SuppressionReason: Int] = [:]
    /// Inbox rows and deliveries actually written (0 in a dry run).
    public var inboxRows = 0
    public var deliveries = 0
    /// Notifications another run had already stored (dedupe key taken), so nothing new was written.
    public var duplicates = 0
    public var invalidOrganizations = 0
    public var message: String?
    /// What delivery did right after recording (a JSON object), when push is configured.
    public var push: String?
    public var exitStatus: ExitStatus = .ok
    /// The signal that stopped the run early ("SIGTERM"), if one did.
    public var stoppedBy: String?
    public var durationMilliseconds = 0

    public init(job: String, dryRun: Bool, asOf: Date) {
        self.job = job
        self.dryRun = dryRun
        self.asOf = asOf
    }

    mutating func count(_ decision: Decision) {
        candidates += 1
        switch decision {
        case .notify: notified += 1
        case .suppress(let reason, _): suppressed[reason, default: 0] += 1
        }
    }

    /// The counts alone, for `job_runs.counts`.
    public var countsJSON: String {
        var writer = JSONWriter()
        writer.add("candidates", candidates)
        writer.add("notified", notified)
        writer.add("suppressed", json: suppressedJSON)
        writer.add("inbox_rows", inboxRows)
        writer.add("deliveries", deliveries)
        writer.add("duplicates", duplicates)
        writer.add("invalid_organizations", invalidOrganizations)
        if let push { writer.add("push", json: push) }
        return writer.json
    }

    private var suppressedJSON: String {
        var writer = JSONWriter()
        for reason in SuppressionReason.allCases { if let n = suppressed[reason] { writer.add(reason.rawValue, n) } }
        return writer.json
    }

    /// The one-line JSON summary every run ends with.
    public var json: String {
        var writer = JSONWriter()
        writer.add("job", job)
        writer.add("outcome", outcome)
        writer.add("exit_code", StopRequest.shared.exitCode(exitStatus))
        if let stoppedBy { writer.add("stopped_by", stoppedBy) }
        writer.add("dry_run", dryRun)
        writer.add("as_of", Timestamp.iso8601(asOf))
        if let runID { writer.add("run_id", runID) } else { writer.add("run_id", nil as String?) }
        writer.add("candidates", candidates)
        writer.add("notified", notified)
        writer.add("suppressed", json: suppressedJSON)
        writer.add("inbox_rows", inboxRows)
        writer.add("deliveries", deliveries)
        writer.add("duplicates", duplicates)
        writer.add("invalid_organizations", invalidOrganizations)
        if let push { writer.add("push", json: push) }
        writer.add("duration_ms", durationMilliseconds)
        if let message { writer.add("message", message) }
        return writer.json
    }

    /// One sentence for people.
    public var sentence: String {
        let verb = dryRun ? "would notify" : "notified"
        var text = "\(job): \(candidates) candidates, \(verb) \(notified), suppressed \(suppressed.values.reduce(0, +))"
        let parts = SuppressionReason.allCases.compactMap { reason in suppressed[reason].map { "\(reason.rawValue) \($0)" } }
        if !parts.isEmpty { text += " (" + parts.joined(separator: ", ") + ")" }
        if !dryRun { text += "; wrote \(inboxRows) inbox rows and \(deliveries) pending deliveries" }
        if duplicates > 0 { text += "; \(duplicates) already stored by another run" }
        return text
    }
}
