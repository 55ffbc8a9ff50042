/// The process exit codes, from sysexits(3). systemd shows them by name (`status=78/CONFIG`).
public enum ExitStatus: Int32, Sendable {
    /// Done, also when there was nothing to do or another run already held the job.
    case ok = 0
    /// Bad flags.
    case usage = 64
    /// Bad data in the database.
    case dataError = 65
    /// The database (or a provider) could not be reached.
    case unavailable = 69
    /// A bug: something that should not happen did.
    case software = 70
    /// Try again later (a statement timed out, a deadlock or a lock that was not free).
    case tempFail = 75
    /// The database refused a privilege our role lacks (or a table's own guard): the message names it.
    case noPermission = 77
    /// Configuration or schema problem: the message names what to fix.
    case config = 78
}

/// A failure that ends a job with a message a person can act on and the exit code that goes with it.
public struct JobFailure: Error, CustomStringConvertible, Sendable {
    public var status: ExitStatus
    public var message: String

    public init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { message }
}
