import Foundation
import Postgres

/// The database side of an outbox run, off the engine's thread: outcomes are written on one thread and
/// connection, and the next batch is claimed on another (the engine's own connection, idle while the pushes
/// flow), so a claim never waits behind a backlog of writes and the pushes keep flowing. Writes run in the
/// order they were handed over; a claim runs beside them, except after a release was handed over: then it
/// waits for that write, so it can take the released rows again. Without a writer the engine does both in
/// line, waiting for each (scenario jobs and event-notify, whose batches are small).
///
/// What the engine hands over it no longer touches, and the engine reads results only through the lock:
/// hence `@unchecked Sendable`.
final class OutboxWriter: @unchecked Sendable {
    /// The connection outcomes are written on as the writer started; `current` is the one of the moment.
    let connection: Connection
    /// The connection writes go to now: a new one after the last broke (touched only on `queue`).
    private var current: Connection
    /// Opens a new connection for the writes when theirs broke (nil: none is opened, and the write fails).
    private let reconnect: (() throws -> Connection)?
    /// Waits between attempts to reconnect: a server restarting (a crash, a failover) takes a few seconds.
    static let reconnectWaits: [TimeInterval] = [0.5, 1, 2, 4]
    /// Where claims run: the engine's connection, which the engine uses only after `drain`.
    let claimConnection: Connection
    private let queue = DispatchQueue(label: "mentor-push.outbox-writer")
    private let claimQueue = DispatchQueue(label: "mentor-push.outbox-claims")
    /// A release was handed over since the last claim was asked for.
    private var releaseHandedOver = false
    /// Guards the state below; signalled when a write finishes.
    private let lock = NSCondition()
    /// The first write that failed: nothing more is written after it.
    private var writeFailure: Error?
    /// The first claim that failed: nothing more is claimed, but what was sent is still written.
    private var claimFailure: Error?
    private var retired = 0
    /// Sent deliveries whose outcome could not be written (logged by the engine, loudly).
    private var unrecorded: [Int] = []
    private var claimed: [OutboxEngine.Claimed]?
    private var claiming = false
    /// Writes handed over and not finished.
    private var queuedWrites = 0
    /// Time spent writing and claiming, for the debug log.
    private var busy: (writes: Duration, claims: Duration) = (.zero, .zero)

    init(connection: Connection, claimConnection: Connection, reconnect: (() throws -> Connection)? = nil) {
        self.connection = connection
        self.current = connection
        self.claimConnection = claimConnection
        self.reconnect = reconnect
    }

    /// Writes `recorder` on the current connection; when the connection breaks, on a new one (see `renewing`).
    /// Without this, one dropped connection left every push already sent unrecorded, to be sent again once its
    /// lease ran out, and the claimed pushes not yet sent leased for the lease's length and counted as attempts.
    private func write(_ recorder: OutcomeRecorder, _ flush: (OutcomeRecorder) throws -> Int) throws -> Int {
        guard let reconnect else {
            recorder.connection = current
            return try flush(recorder)
        }
        return try OutboxWriter.renewing(&current, reconnect: reconnect) { connection in
            recorder.connection = connection
            return try flush(recorder)
        }
    }

    /// Runs `write` on `connection`; when that connection breaks, opens a new one with `reconnect` (waiting
    /// `reconnectWaits` between tries) and runs the same write again on it: every outcome is written only while
    /// its claim holds, so a write that did commit before the break changes nothing the second time.
    /// `connection` is left as the one last opened.
    static func renewing<T>(_ connection: inout Connection, reconnect: () throws -> Connection,
                            _ write: (Connection) throws -> T) throws -> T {
        var waits = reconnectWaits
        while true {
            do {
                return try write(connection)
            } catch let error as PostgresError where error.isConnectionLoss && !waits.isEmpty {
                while true {
                    Thread.sleep(forTimeInterval: waits.removeFirst())
                    do {
                        connection = try reconnect()
                        break
                    } catch where !waits.isEmpty {}
                }
            }
        }
    }

    /// Writes `recorder`'s outcomes with `flush` (the engine's, which retries on a deadlock). After a write
    /// failed nothing more is written: the engine stops and its claims run out. A failed claim stops nothing
    /// here: the outcomes of pushes already sent must still be written, or their rows would be sent again once
    /// their lease runs out.
    func write(_ recorder: OutcomeRecorder, with flush: @escaping (OutcomeRecorder) throws -> Int) {
        let buffer = Unchecked(recorder)
        let writeOut = Unchecked(flush)
        lock.withLock {
            queuedWrites += 1
            if recorder.hasReleases { releaseHandedOver = true }
        }
        queue.async { [self] in
            let recorder = buffer.value
            let started = ContinuousClock.now
            let result = Result { lock.withLock { writeFailure } == nil ? try write(recorder, writeOut.value) : 0 }
            lock.withLock {
                queuedWrites -= 1
                lock.broadcast()
                busy.writes += ContinuousClock.now - started
                switch result {
                case .success(let count) where writeFailure == nil: retired += count
                case .success: unrecorded += recorder.sentIDs
                case .failure(let error):
                    writeFailure = writeFailure ?? error
                    unrecorded += recorder.sentIDs
                }
            }
        }
    }

    /// Writes `recorder` (releases only: what a failed run gives back) after everything handed over, even after
    /// a write failed: each release is fenced by its claim's lease, so it cannot undo or overtake another
    /// outcome. Throws what the write met.
    func writeReleases(_ recorder: OutcomeRecorder, with flush: (OutcomeRecorder) throws -> Int) throws {
        try queue.sync { _ = try write(recorder, flush) }
    }

    /// Starts claiming the next batch with `claim`; `takeClaimed` hands it over once it is there.
    func requestClaim(_ claim: @escaping () throws -> [OutboxEngine.Claimed]) {
        let afterWrites = lock.withLock {
            claiming = true
            defer { releaseHandedOver = false }
            return releaseHandedOver
        }
        let work = Unchecked(claim)
        (afterWrites ? queue : claimQueue).async { [self] in
            let started = ContinuousClock.now
            let result = Result { lock.withLock { writeFailure ?? claimFailure } == nil ? try work.value() : [] }
            lock.withLock {
                busy.claims += ContinuousClock.now - started
                switch result {
                case .success(let rows): claimed = rows
                case .failure(let error):
                    claimFailure = claimFailure ?? error
                    claimed = []
                }
            }
        }
    }

    /// Whether more than `count` writes are waiting or running (and none failed): the pushes pause while the
    /// writer is that far behind, so the outcomes not yet written, which a crash would send again and which stop
    /// being this engine's once their lease runs out, stay few.
    func isBehind(_ count: Int) -> Bool { lock.withLock { queuedWrites > count && writeFailure == nil } }

    /// Waits, at most `timeout`, while more than `count` writes are waiting or running (unless a write failed).
    /// True once the writer has caught up.
    func waitForWrites(atMost count: Int, timeout: Duration) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        while queuedWrites > count && writeFailure == nil {
            if !lock.wait(until: deadline) { return !(queuedWrites > count && writeFailure == nil) }
        }
        return true
    }

    /// Whether no write is waiting or running.
    var isIdle: Bool { lock.withLock { queuedWrites == 0 } }

    /// Whether a claim was asked for and not yet handed over.
    var isClaiming: Bool { lock.withLock { claiming } }

    /// The claimed batch, once the claim has finished (nil while it is still running, or none was asked for).
    func takeClaimed() -> [OutboxEngine.Claimed]? {
        lock.withLock {
            guard let rows = claimed else { return nil }
            claimed = nil
            claiming = false
            return rows
        }
    }

    /// Waits until everything handed over is done.
    func drain() {
        queue.sync {}
        claimQueue.sync {}
    }

    /// The first error a write met, else the first a claim met, if any: the engine stops on either.
    var error: Error? { lock.withLock { writeFailure ?? claimFailure } }

    /// Tokens retired by the writes so far (counted once).
    func takeRetired() -> Int { lock.withLock { defer { retired = 0 }; return retired } }

    /// Sent deliveries whose outcome was not written.
    var unrecordedSentIDs: [Int] { lock.withLock { unrecorded } }

    var timings: (writes: Duration, claims: Duration) { lock.withLock { busy } }
}

/// Hands a value the compiler cannot prove sendable to another thread that alone uses it from then on (the
/// writer's queue, `OutboxWriter`; the cancel listener's thread).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
