import Foundation
import Postgres

/// A statement run on a connection of its own, on a thread of its own, for a test that holds a lock it
/// needs: the test sees whether the statement waits, lets it go, and reads how it ended.
public final class BlockedStatement: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let failure = Locked<String?>(nil)

    /// Starts `sql` on a new connection to `database`.
    public init(_ sql: Query, on database: TestDatabase) {
        Thread { [self] in
            do { try database.connect().execute(sql) } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }.start()
    }

    /// True when the statement is still running after `seconds` (waiting for the lock).
    public func isWaiting(for seconds: Double = 0.5) -> Bool {
        done.wait(timeout: .now() + seconds) == .timedOut
    }

    /// Waits up to `seconds` for the statement to end; its error, nil when it succeeded, or a line saying it
    /// did not end.
    public func finish(within seconds: Double = 10) -> String? {
        guard done.wait(timeout: .now() + seconds) == .success else { return "the statement did not end within \(seconds) s" }
        return failure.withLock { $0 }
    }
}
