/// How many deliveries the engine's next claim takes, with a writer claiming ahead (`OutboxWriter`).
///
/// A claim has a fixed cost in the database, so when the pushes go out fast, large claims spread it
/// thin. But a claim also keeps its rows from every other worker and process until they are sent: at a
/// real provider's round trip, claims of a fixed 2,000 rows left workers idle at the end of a run while
/// one of them sent its last batch alone. So each claim takes what this engine completed in `ahead` (a
/// quarter of a second) at the pace measured since its previous claim: two windows at least (the first
/// claim, before there is a pace), `maximum` at most.
struct ClaimSizer {
    let minimum: Int
    let maximum: Int
    let ahead: Duration
    /// The size of the claim made last (the first one's before any claim).
    private(set) var size: Int
    private var completed = 0
    private var since: ContinuousClock.Instant

    init(window: Int, maximum: Int, ahead: Duration = .milliseconds(250), now: ContinuousClock.Instant = .now) {
        self.maximum = max(1, maximum)
        minimum = min(self.maximum, max(1, window * 2))
        self.ahead = ahead
        size = minimum
        since = now
    }

    /// One push answered (whatever the answer).
    mutating func completedOne() { completed += 1 }

    /// The size of the claim about to be made, from the pace since the previous one; measuring starts again.
    mutating func next(now: ContinuousClock.Instant = .now) -> Int {
        let elapsed = now - since
        if elapsed > .zero {
            let perAhead = Double(completed) * (ahead / elapsed)
            size = Int(min(Double(maximum), max(Double(minimum), perAhead)))
        }
        completed = 0
        since = now
        return size
    }
}
