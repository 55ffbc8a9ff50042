import Foundation
import Logging
import Postgres
import Synchronization

/// Hears the app's cancels of claimed deliveries (0038: `cancel_deliveries` sends NOTIFY mentor_push_cancelled with
/// the ids of the claimed ones) on a connection of its own, on a thread that sleeps in poll(2) until one comes.
/// The engines ask it before they start each push: a push the app cancelled after its claim (pushes switched
/// off, the notification read, the device token moved to somebody else) went out all the same until its
/// claim's start-by, a second behind a busy window and minutes in the one-at-a-time pace after an outage.
/// What is already on the wire may still arrive.
final class CancelListener: @unchecked Sendable {
    static let channel: StaticString = "mentor_push_cancelled"
    /// Ids heard, with when: those of other engines' claims are forgotten after `memory` (a lease is 5 minutes).
    private let heard = Mutex<[Int: ContinuousClock.Instant]>([:])
    private let stopping = Mutex(false)
    private let done = DispatchSemaphore(value: 0)
    static let memory: Duration = .seconds(900)

    /// Listens on a sibling of `connection`, from now until `stop`. The listening connection breaking is logged
    /// and it is opened again (every 5 s); meanwhile no cancel is heard, as before 0038.
    init(siblingOf connection: Connection, logger: Logger) throws {
        let listening = try connection.sibling(applicationName: "mentor-push cancels")
        try listening.listen(CancelListener.channel)
        // Both are this thread's alone from here on (`sibling` reads only the URL and settings of `connection`).
        let first = Unchecked(listening), source = Unchecked(connection)
        let thread = Thread { [self] in
            var current: Connection? = first.value
            while !stopping.withLock({ $0 }) {
                do {
                    let live: Connection
                    if let current { live = current } else {
                        live = try source.value.sibling(applicationName: "mentor-push cancels")
                        try live.listen(CancelListener.channel)
                        current = live
                        logger.notice("listening for the app's cancels again")
                    }
                    let ids = try live.waitForPayloads(on: "\(CancelListener.channel)", timeout: .milliseconds(250))
                        .flatMap { $0.split(separator: ",").compactMap { Int($0) } }
                    if !ids.isEmpty { hear(ids) }
                } catch {
                    if current != nil { logger.warning("the connection that hears the app's cancels broke (\(error)): cancels of claimed pushes are not heard until it is back") }
                    current = nil
                    for _ in 0..<20 where !stopping.withLock({ $0 }) { Thread.sleep(forTimeInterval: 0.25) }
                }
            }
            done.signal()
        }
        thread.name = "mentor-push cancels"
        thread.start()
    }

    func hear(_ ids: [Int]) {
        let now = ContinuousClock.now
        heard.withLock { heard in
            if heard.count > 10_000 { heard = heard.filter { now - $0.value < CancelListener.memory } }
            for id in ids { heard[id] = now }
        }
    }

    /// Whether the app cancelled delivery `id` (and forgets it: it is asked once, before the push would start).
    func cancelled(_ id: Int) -> Bool {
        heard.withLock { $0.removeValue(forKey: id) != nil }
    }

    /// Stops listening (within a quarter of a second).
    func stop() {
        stopping.withLock { $0 = true }
        done.wait()
    }
}
