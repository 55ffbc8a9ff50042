import Foundation
import Prometheus

/// A run's Prometheus metrics for node_exporter's textfile collector: `$METRICS_DIR/mentor-push-<job>.prom`,
/// written to a temporary file in the same folder and renamed over the old one, so the collector never
/// reads half a file. The exposition format comes from swift-prometheus; the figures from the run's
/// summary (the same members as the JSON summary line), so every job reports the same way.
///
/// `mentor_push_last_success_timestamp_seconds` is what to alert on ("no success in twice the period"):
/// a run that fails keeps the previous file's value, so the alert sees the last real success.
public struct MetricsFile {
    public let directory: String
    public let job: String

    /// From `METRICS_DIR`, or nil when it is not set.
    public static func fromEnvironment(job: String, _ environment: [String: String] = ProcessInfo.processInfo.environment) -> MetricsFile? {
        guard let directory = environment["METRICS_DIR"], !directory.isEmpty else { return nil }
        return MetricsFile(directory: directory, job: job)
    }

    public var path: String { (directory as NSString).appendingPathComponent("mentor-push-\(job).prom") }

    /// What one snapshot reports.
    public struct Snapshot {
        public var finishedAt: Date
        public var succeeded: Bool
        public var outcome: String
        public var exitCode: Int
        public var duration: Duration
        /// The run's summary members (`JobRun.counts`), as JSON.
        public var summaryJSON: String
        public var backlog: (due: Int, oldestDueAge: Double)?
        /// The events still to process (event-notify's), and how long the oldest has waited.
        public var eventsPending: (count: Int, oldestAge: Double)? = nil
    }

    /// Writes the file for `snapshot`. A failure to write is the caller's to log: metrics never fail a run.
    public func write(_ snapshot: Snapshot) throws {
        let registry = PrometheusCollectorRegistry()
        // Not `job`: Prometheus's scrape of node_exporter sets `job` itself and renames ours to `exported_job`,
        // so an alert on `job="…"` would never match.
        let job = [("mentor_push_job", self.job)]
        func gauge(_ name: String, _ value: Double, _ help: String, _ labels: [(String, String)] = []) {
            let descriptor = MetricNameDescriptor(namespace: "mentor_push", metricName: name, unitName: "", helpText: help)
            registry.makeGauge(descriptor: descriptor, labels: job + labels).set(value)
        }
        let finished = snapshot.finishedAt.timeIntervalSince1970
        gauge("last_run_timestamp_seconds", finished, "When the job's last run ended.")
        if let success = snapshot.succeeded ? finished : previousSuccess() {
            gauge("last_success_timestamp_seconds", success, "When the job last ended with exit code 0: alert when older than twice its period.")
        }
        gauge("last_run_duration_seconds", Double(snapshot.duration.components.seconds) + Double(snapshot.duration.components.attoseconds) / 1e18,
              "How long the last run took.")
        gauge("last_run_exit_code", Double(snapshot.exitCode), "The last run's exit code (sysexits; 128 + n after a signal).")
        gauge("last_run_outcome", 1, "The last run's outcome (ok, partial, failed, stopped, running …).", [("outcome", snapshot.outcome)])

        let summary = (try? JSONSerialization.jsonObject(with: Data(snapshot.summaryJSON.utf8))) as? [String: Any] ?? [:]
        for (key, help) in [("candidates", "Candidates the last run considered."), ("notified", "People the last run notified."),
                            ("inbox_rows", "Notifications the last run listed in the inbox."), ("deliveries", "Pushes the last run queued."),
                            ("events", "Events the run processed.")] {
            if let value = summary[key] as? Int { gauge("last_run_\(key)", Double(value), help) }
        }
        for (reason, count) in (summary["suppressed"] as? [String: Int] ?? [:]).sorted(by: { $0.key < $1.key }) {
            gauge("last_run_suppressed", Double(count), "Candidates the last run did not notify, by reason.", [("reason", reason)])
        }
        if let push = summary["push"] as? [String: Any] {
            for (provider, outcomes) in (push["by_provider"] as? [String: [String: Int]] ?? [:]).sorted(by: { $0.key < $1.key }) {
                for (outcome, count) in outcomes.sorted(by: { $0.key < $1.key }) {
                    gauge("last_run_pushes", Double(count), "Deliveries the last run finished, by provider and outcome.",
                          [("provider", provider), ("outcome", outcome)])
                }
            }
            if let retired = push["tokens_retired"] as? Int { gauge("last_run_tokens_retired", Double(retired), "Device tokens the last run retired.") }
        }
        if let backlog = snapshot.backlog {
            gauge("delivery_backlog_due", Double(backlog.due), "Deliveries due now (pending or retrying, their time come), when the run ended.")
            gauge("delivery_backlog_oldest_due_age_seconds", backlog.oldestDueAge, "How long the oldest due delivery has been due, when the run ended.")
        }
        if let pending = snapshot.eventsPending {
            gauge("events_pending", Double(pending.count), "Events not processed yet (a scenario that cannot run leaves its events pending).")
            gauge("events_oldest_pending_age_seconds", pending.oldestAge, "How long the oldest event not processed yet has waited.")
        }

        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let temporary = path + ".\(getpid()).tmp"
        // With open(2) and write(2), so a failure says why ("Permission denied"): FileManager's said
        // "Error Domain=NSCocoaErrorDomain Code=512 "(null)"".
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw WriteFailure("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw WriteFailure("cannot write \(temporary): \(reason)")
            }
            written += n
        }
        close(fd)
        // Readable by the collector, which runs as another user, whatever the umask (the units set 0077).
        chmod(temporary, 0o644)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WriteFailure("cannot rename \(temporary) to \(path): \(reason)")
        }
    }

    /// Why the file could not be written, in the system's words.
    struct WriteFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// `last_success_timestamp_seconds` from the file the last run wrote, if it has one.
    func previousSuccess() -> Double? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("mentor_push_last_success_timestamp_seconds{") {
            return line.split(separator: " ").last.flatMap { Double($0) }
        }
        return nil
    }
}
