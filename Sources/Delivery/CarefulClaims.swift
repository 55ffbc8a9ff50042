import Synchronization

/// How the claims take deliveries in doubt (migration 0045: an earlier claim of theirs ended without an
/// outcome, so each may have been sent): apart from the others, a few at a time, and by one engine of the
/// process at a time (push-deliver's workers share one; a crash kills them all, and every claim of the
/// process is at stake).
///
/// While careful, the holding engine claims only deliveries in doubt, those lost most often in a row first,
/// 1, then 2, 4, … per claim (at most 8 of those lost twice in a row, and one alone of those lost three times or
/// more: a run died on them before), makes no claim ahead, and writes each claim's outcomes before the next;
/// the other engines wait. A run that dies now leaves a lost claim on those few only, so one that dies on the
/// same push every time gives that push up alone (a claim of thousands was charged on every run, sent or not,
/// and given up whole), and a push claimed with it is charged at most three times. Careful ends when a careful
/// claim finds none in doubt.
final class CarefulClaims: Sendable {
    private struct State {
        /// How many in doubt the last careful claim kept (0: none yet); nil while not careful.
        var size: Int?
        /// The engine claiming them.
        var holder: ObjectIdentifier?
        var said = false
    }
    private let state = Mutex(State())

    init() {}

    /// Whether some engine is claiming deliveries in doubt (no claim is made ahead then).
    var isCareful: Bool { state.withLock { $0.size != nil } }

    /// The limit of `engine`'s next claim, which takes only deliveries in doubt; 0: another engine is careful,
    /// claim nothing; nil: claim as usual.
    func limit(for engine: ObjectIdentifier, usual: Int) -> Int? {
        state.withLock { s in
            guard let size = s.size else { return nil }
            if let holder = s.holder, holder != engine { return 0 }
            return max(1, min(size * 2, usual))
        }
    }

    /// A claim of `engine` found deliveries in doubt: how many of them it keeps (the rest of the claim goes
    /// back). 0 when another engine is careful, or for a claim made ahead (the batch on the wire finishes
    /// first, and the next claim is careful).
    /// `lostInARow`: the most that any of them was lost in a row.
    func keep(for engine: ObjectIdentifier, lostInARow: Int, ahead: Bool, usual: Int) -> Int {
        state.withLock { s in
            if let holder = s.holder, holder != engine { return 0 }
            s.holder = engine
            if ahead {
                s.size = s.size ?? 0
                return 0
            }
            let cap = lostInARow >= 3 ? 1 : lostInARow == 2 ? 8 : usual
            let size = max(1, min((s.size ?? 0) * 2, cap, usual))
            s.size = size
            return size
        }
    }

    /// `engine`'s run ended: another engine may take the deliveries in doubt over.
    func release(for engine: ObjectIdentifier) {
        state.withLock { s in
            if s.holder == engine { s.holder = nil }
        }
    }

    /// `engine`'s careful claim found none in doubt.
    func end(for engine: ObjectIdentifier) {
        state.withLock { s in
            guard s.holder == nil || s.holder == engine else { return }
            s.size = nil
            s.holder = nil
            s.said = false // the next crash's pushes in doubt are said again (event-notify's engine lives for weeks)
        }
    }

    /// True the first time only until careful ends (the log says it once per episode).
    func firstTimeSaid() -> Bool {
        state.withLock { s in
            defer { s.said = true }
            return !s.said
        }
    }
}
