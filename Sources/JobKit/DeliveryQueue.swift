import Postgres

/// `delivery_queue` (migration 0015): one row per open delivery, with when it is next due and the lease
/// of the engine that claimed it. Here, below the outbox, so the metrics read the backlog by the same
/// definition the engine claims by.
public enum DeliveryQueue {
    /// The one definition of a delivery that is due (`q` is `delivery_queue`, which holds the open ones):
    /// its time has come, and no engine's lease on it still holds.
    public static let duePredicate: Query = """
        q.next_attempt_at <= now() AND (q.lease_until IS NULL OR q.lease_until <= now())
        """
}
