import Foundation

/// How long the calling thread has been on a core, and how long it has waited, runnable, for one
/// (Linux's `/proc/thread-self/schedstat`). The second figure tells a slow run that was starved of CPU
/// (a busy host, or a database and a provider sharing its cores) from one that waited on the network.
public struct ThreadSchedule: Sendable {
    public var running: Duration
    public var waiting: Duration

    /// The calling thread's figures so far; nil where the kernel does not keep them.
    public static func current() -> ThreadSchedule? {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/schedstat", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 2, let running = Int64(fields[0]), let waiting = Int64(fields[1]) else { return nil }
        return ThreadSchedule(running: .nanoseconds(running), waiting: .nanoseconds(waiting))
    }

    /// What the thread spent between `earlier` and this reading.
    public func since(_ earlier: ThreadSchedule) -> ThreadSchedule {
        ThreadSchedule(running: running - earlier.running, waiting: waiting - earlier.waiting)
    }
}
