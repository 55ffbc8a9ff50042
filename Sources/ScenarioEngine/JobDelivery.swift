import JobKit
import Logging
import Postgres

/// Delivery of what a scenario job recorded, right after its commit (design step 5). JobKit only
/// knows this shape; the Delivery module provides it, so scenario jobs stay thin.
public protocol JobDelivery: AnyObject {
    /// Checks the push configuration before anything is written: a broken one fails the run with 78.
    func prepare() throws
    /// Sends the deliveries of this run's notifications; nil when no provider is configured.
    func deliver(runID: Int, connection: Connection, logger: Logger) throws -> DeliveryResult?
    /// After `deliver` threw: what delivery did before it failed (the summary's `push`), if anything.
    var failedSoFar: String? { get }
}

/// What delivery did, as the run's summary shows it.
public struct DeliveryResult: Sendable {
    /// Every delivery of the run so far (a service delivers batch after batch), for the summary and metrics.
    public var json: String
    /// This delivery's, for the log.
    public var sentence: String
    public var status: ExitStatus
    /// The signal that stopped delivery early ("SIGTERM"), if one did.
    public var stoppedBy: String?

    public init(json: String, sentence: String, status: ExitStatus, stoppedBy: String? = nil) {
        self.json = json
        self.sentence = sentence
        self.status = status
        self.stoppedBy = stoppedBy
    }
}
