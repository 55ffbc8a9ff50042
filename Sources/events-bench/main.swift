import ArgumentParser
import Foundation
import Postgres
#if canImport(Glibc)
import Glibc
#endif

/// Benchmark of event-notify: commits pauses (each announced to the mentor's coordinator by a push) at a
/// steady rate, one per transaction, then prints the latency from each commit to its push being accepted
/// by the provider and recorded (`deliveries.sent_at`), the backlog when the load stopped, the NOTIFYs
/// received per transaction, and the CPU the database spent. `scripts/bench-events` sets the scene: a
/// tuned throwaway cluster, the local fake provider, and event-notify running against both.
@main
struct EventsBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events-bench",
        abstract: "Benchmark: commit events at a steady rate and measure commit → push accepted through event-notify.",
        discussion: "It WRITES: rate × seconds pauses for the database's mentors, each pushed to their coordinators. Point it at a throwaway database (scripts/bench-events makes one) with --database-url; it does not read $DATABASE_URL, which may be production's.")

    @Option(help: "Events committed per second.") var rate: Double = 100
    @Option(help: "Seconds of steady load.") var seconds: Double = 60
    @Option(help: ArgumentHelp("The throwaway database to write the load to (required: never $DATABASE_URL).", valueName: "url")) var databaseURL: String
    @Option(help: ArgumentHelp("The cluster's postmaster PID (for the database CPU).", valueName: "pid")) var postmasterPid: Int32?
    @Option(help: ArgumentHelp("event-notify's PID (for its CPU).", valueName: "pid")) var listenerPid: Int32?

    func validate() throws {
        // An empty URL would be libpq's defaults: wherever PG* points, maybe production.
        if databaseURL.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--database-url is empty: name the throwaway database to load") }
    }

    func run() throws {
        let url = databaseURL
        let connection = try Connection(url: url, applicationName: "events-bench")
        let listener = try Connection(url: url, applicationName: "events-bench-listen")
        try listener.listen("mentor_push_events")
        let mentors: [UUID] = try connection.query("""
            SELECT m.id FROM users m JOIN coordinator_scopes s ON s.mentor_id = m.id WHERE m.role = 'peer_mentor' ORDER BY m.id
            """).map { try $0.decode(0) }
        guard !mentors.isEmpty else { throw ValidationError("no mentor in a coordinator's scope: load the bench data first") }

        let count = Int(rate * seconds)
        var commits: [Int: Date] = [:]
        commits.reserveCapacity(count)
        var notifies = 0
        let databaseCPU = cpuSeconds(postmasterPid, children: true)
        let listenerCPU = cpuSeconds(listenerPid, children: false)
        let start = Date()
        for i in 0..<count {
            let due = start.addingTimeInterval(Double(i) / rate)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(useconds_t(wait * 1_000_000)) }
            let id: Int = try connection.query("""
                INSERT INTO availability_pauses (mentor_id, starts_at, reason) VALUES (\(mentors[i % mentors.count]), now(), 'bench') RETURNING id
                """).first!.decode(0)
            commits[id] = Date()
            if i % 64 == 0 { notifies += try listener.waitForNotifications(timeout: .zero) }
        }
        let loadEnded = Date()
        let backlog: Int = try connection.query("SELECT count(*)::int FROM events WHERE processed_at IS NULL").first!.decode(0)
        // Drain: every pause's push sent (or a minute passes).
        var unsent = count
        while unsent > 0 && Date().timeIntervalSince(loadEnded) < 60 {
            notifies += try listener.waitForNotifications(timeout: .milliseconds(100))
            unsent = try connection.query("""
                SELECT count(*)::int FROM availability_pauses p
                 WHERE p.reason = 'bench' AND NOT EXISTS (SELECT 1 FROM notifications n JOIN deliveries d ON d.notification_id = n.id
                                                           WHERE n.subject = 'pause:' || p.id AND d.state = 'sent')
                """).first!.decode(0)
        }
        let drained = Date().timeIntervalSince(loadEnded)
        notifies += try listener.waitForNotifications(timeout: .zero)
        let databaseSeconds = cpuSeconds(postmasterPid, children: true) - databaseCPU
        let listenerSeconds = cpuSeconds(listenerPid, children: false) - listenerCPU

        var latencies: [Double] = []
        for row in try connection.query("""
            SELECT substr(n.subject, 7)::bigint, extract(epoch FROM min(d.sent_at))::float8
              FROM notifications n JOIN deliveries d ON d.notification_id = n.id
             WHERE n.subject LIKE 'pause:%' AND d.state = 'sent' GROUP BY n.subject
            """) {
            let id: Int = try row.decode(0)
            let sent: Double = try row.decode(1)
            if let committed = commits[id] { latencies.append(sent - committed.timeIntervalSince1970) }
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int((p / 100 * Double(latencies.count)).rounded(.up)) - 1)] * 1000
        }
        let achieved = Double(count) / loadEnded.timeIntervalSince(start)
        print(String(format: "events-bench rate %.0f/s (achieved %.0f/s) for %.0f s: %d events, %d pushed, %d lost; commit → push accepted ms: p50 %.1f p95 %.1f p99 %.1f max %.1f; backlog at end of load %d, drained in %.2f s; NOTIFYs per transaction %.3f; database CPU %.2f s (%.1f%% of one core); event-notify CPU %.2f s",
                     rate, achieved, seconds, count, latencies.count, count - latencies.count, percentile(50), percentile(95), percentile(99),
                     (latencies.last ?? .nan) * 1000, backlog, drained, Double(notifies) / Double(count),
                     databaseSeconds, 100 * databaseSeconds / loadEnded.timeIntervalSince(start).advanced(by: drained), listenerSeconds))
        if latencies.count < count { throw ExitCode(1) }
    }

    /// utime + stime of a process (and, with `children`, of its live children and the reaped ones it waited for).
    func cpuSeconds(_ pid: Int32?, children: Bool) -> Double {
        guard let pid else { return 0 }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        func fields(_ pid: String) -> [Substring]? {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return nil }
            return text[text.index(after: close)...].split(separator: " ")
        }
        // After ")": state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
        guard let own = fields(String(pid)) else { return 0 }
        var total = (Double(own[11]) ?? 0) + (Double(own[12]) ?? 0)
        if children {
            total += (Double(own[13]) ?? 0) + (Double(own[14]) ?? 0)
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
                if let child = fields(entry), child.count > 12, child[1] == Substring(String(pid)) {
                    total += (Double(child[11]) ?? 0) + (Double(child[12]) ?? 0)
                }
            }
        }
        return total / ticks
    }
}
