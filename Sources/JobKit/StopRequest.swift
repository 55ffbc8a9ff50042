import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM, SIGINT or SIGHUP while a job writes (systemd stopping the unit, an operator's Ctrl-C, the terminal of
/// a job run by hand closing): the job stops
/// taking new work, lets what is in flight finish, records it, leaves the rest for the next run, prints
/// its summary, and then ends by that same signal, so systemd and the shell see what stopped it.
/// A second SIGTERM or SIGINT ends the process at once (the database stays consistent either way: every batch is
/// its own transaction and every claim a lease); a second SIGHUP changes nothing.
public final class StopRequest: @unchecked Sendable {
    public static let shared = StopRequest()
    /// Never requested (it listens for no signal): for work that finishes once begun, such as the pushes of
    /// a batch event-notify has committed. A second SIGTERM or SIGINT still ends the process at once.
    public static let never = StopRequest()

    private let received = Atomic<Int32>(0)
    private let lock = NSLock()
    private var sources: [DispatchSourceSignal] = []

    /// Starts listening for SIGTERM, SIGINT and SIGHUP (once per process; later calls do nothing). SIGHUP's default
    /// action ended a job mid-batch, its row and metrics left saying "running". A SIGHUP ignored from the start
    /// (`nohup`) stays ignored.
    public func install() {
        lock.withLock {
            guard sources.isEmpty else { return }
            for number in [SIGTERM, SIGINT, SIGHUP] where number != SIGHUP || !StopRequest.isIgnored(number) {
                signal(number, SIG_IGN) // the dispatch source sees it; the default action would end the process
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [self] in receive(number) }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// Whether `number` is ignored as the process started: `nohup` ignores SIGHUP so that a job outlives its terminal.
    static func isIgnored(_ number: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    func receive(_ number: Int32) {
        if received.compareExchange(expected: 0, desired: number, ordering: .sequentiallyConsistent).exchanged {
            let line = "\(StopRequest.name(number)): stopping after what is in flight; the rest is left for the next run (send it again to stop at once)\n"
            // Written as it can be: after a hangup the terminal may be gone, and FileHandle's write traps on EIO.
            _ = line.utf8CString.withUnsafeBufferPointer { Glibc.write(2, $0.baseAddress, $0.count - 1) }
        } else if number != SIGHUP {
            StopRequest.end(by: number)
        }
        // A second SIGHUP is the same hangup: a terminal closing sends one from the shell and one from the kernel,
        // a fraction of a millisecond apart, and taking the second for "stop at once" ended the job mid-batch.
    }

    /// The signal that asked the job to stop, if one did.
    public var requestedSignal: Int32? {
        let number = received.load(ordering: .relaxed)
        return number == 0 ? nil : number
    }

    public var isRequested: Bool { received.load(ordering: .relaxed) != 0 }

    /// "SIGTERM", "SIGINT", "SIGHUP", or nil.
    public var requestedSignalName: String? { requestedSignal.map(StopRequest.name) }

    /// The status the parent will see: `status`, or 128 + the signal (143 for SIGTERM) when the process
    /// is to end by a stop signal. What every summary line reports as `exit_code`.
    public func exitCode(_ status: ExitStatus) -> Int {
        requestedSignal.map { 128 + Int($0) } ?? Int(status.rawValue)
    }

    /// Ends the process by the signal that asked it to stop, after the job has recorded and printed
    /// everything. Returns when no signal came.
    public func endIfRequested() {
        guard let number = requestedSignal else { return }
        Output.flush()
        StopRequest.end(by: number)
    }

    static func end(by number: Int32) -> Never {
        signal(number, SIG_DFL)
        // Dispatch receives signals through a signalfd and so keeps them blocked in its threads (and in the
        // thread that first caught one): unblock it here, or raise() would leave it pending forever.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(number)
        _exit(128 + number) // not reached: the default action of SIGTERM, SIGINT and SIGHUP ends the process
    }

    static func name(_ number: Int32) -> String {
        switch number {
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        default: return "signal \(number)"
        }
    }
}
