import Foundation
import Postgres

/// One subject's events (a pause's start, changes, lift) decided by one batch at a time, every pending one of
/// them together, for the scenarios whose notice reads the subject as it is now (`EventScenario.decidesBySubject`).
///
/// Without it, a batch that took a pause's start read the pause's dates as they were when it read them, not as of
/// its claim: a change saved in between was in the start's notice and then announced again on its own (two
/// notices naming the same dates). With two event-notify processes, one could decide the change (suppressed: its
/// start was pending, to be announced with the dates now) while the other announced the start with the old
/// dates read a moment before: the coordinator never heard the new ones.
///
/// So a batch that claimed any event of a subject also takes the subject's other pending events, and decides the
/// subject only when it holds all of them: one that another process holds (it claimed an earlier or later event),
/// is held back, pending, for a later batch. After deciding, a subject that gained a pending event meanwhile (saved
/// after the batch took them: its notices may have read it) makes the batch start again with that subject held back.
/// A subject's events then are always decided together or after one another, and a notice reflects exactly the
/// events decided with it: a change decided after its start's batch was not seen by it.
struct SubjectOrder {
    /// The event kinds decided this way.
    let kinds: [String]

    /// A claimed event.
    struct Event {
        let id: Int
        let kind: String
        let subject: String?
    }

    /// What a batch may decide.
    struct Admitted {
        /// The events to decide, in id order: the claim's and the pending events it took of their subjects.
        var ids: [Int]
        /// The kinds among them.
        var kinds: Set<String>
        /// The subjects decided.
        var subjects: [String]
        /// Subjects whose events the batch holds (locked) but leaves pending: those of `heldByOthers`, and those it
        /// was asked to hold back (`holdingBack`: they changed while an earlier attempt decided them).
        var heldBack: Set<String>
        /// Subjects some of whose pending events another session holds: they are another batch's for now.
        var heldByOthers: Set<String>
    }

    /// The claim's events this batch may decide, with the other pending events of their subjects it could take
    /// (locked `FOR UPDATE SKIP LOCKED`). A subject with a pending event the batch could not take, or in `holdingBack`,
    /// is left pending whole.
    func admit(_ claimed: [Event], holdingBack: Set<String>, on connection: Connection) throws -> Admitted {
        let subjects = Set(claimed.filter { kinds.contains($0.kind) }.compactMap(\.subject)).sorted()
        guard !subjects.isEmpty else {
            return Admitted(ids: claimed.map(\.id), kinds: Set(claimed.map(\.kind)), subjects: [], heldBack: [], heldByOthers: [])
        }
        let claimedIDs = claimed.map(\.id)
        var events = claimed
        for row in try connection.query("""
            SELECT id, kind, subject_id FROM events
             WHERE processed_at IS NULL AND subject_id = ANY(\(PostgresArray(subjects))::text[]) AND kind = ANY(\(PostgresArray(kinds))::text[])
               AND id <> ALL(\(PostgresArray(claimedIDs))::bigint[])
             ORDER BY id FOR UPDATE SKIP LOCKED
            """) {
            events.append(Event(id: try row.decode(0), kind: try row.decode(1), subject: try row.decode(2)))
        }
        // Every pending event of those subjects now, taken or not: one this batch does not hold is another's.
        let taken = Set(events.map(\.id))
        var byOthers = Set<String>()
        for row in try connection.query("""
            SELECT id, subject_id FROM events
             WHERE processed_at IS NULL AND subject_id = ANY(\(PostgresArray(subjects))::text[]) AND kind = ANY(\(PostgresArray(kinds))::text[])
            """) {
            let id: Int = try row.decode(0)
            if !taken.contains(id) { byOthers.insert(try row.decode(1)) }
        }
        let held = byOthers.union(holdingBack.intersection(subjects))
        let isHeld = { (event: Event) in self.kinds.contains(event.kind) && event.subject.map(held.contains) == true }
        let admitted = events.filter { !isHeld($0) }.sorted { $0.id < $1.id }
        return Admitted(ids: admitted.map(\.id), kinds: Set(admitted.map(\.kind)), subjects: subjects.filter { !held.contains($0) },
                        heldBack: held, heldByOthers: byOthers)
    }

    /// The decided subjects that have a pending event the batch did not decide: saved after the batch took their
    /// events, perhaps before its notices read the subject.
    func changedMeanwhile(_ admitted: Admitted, on connection: Connection) throws -> Set<String> {
        guard !admitted.subjects.isEmpty else { return [] }
        return Set(try connection.query("""
            SELECT DISTINCT subject_id FROM events
             WHERE processed_at IS NULL AND subject_id = ANY(\(PostgresArray(admitted.subjects))::text[]) AND kind = ANY(\(PostgresArray(kinds))::text[])
               AND id <> ALL(\(PostgresArray(admitted.ids))::bigint[])
            """).map { try $0.decode(0) })
    }
}

/// The pending events of `subject` of the ordered kinds, which a failure sets aside together.
extension SubjectOrder {
    func pendingEvents(of subject: String, on connection: Connection) throws -> [Int] {
        try connection.query("""
            SELECT id FROM events WHERE processed_at IS NULL AND subject_id = \(subject) AND kind = ANY(\(PostgresArray(kinds))::text[]) ORDER BY id
            """).map { try $0.decode(0) }
    }
}

/// The subjects recent batches held back because another session holds some of their events (`SubjectOrder.admit`),
/// which claims pass over for `passOverFor`. Their events are the oldest pending: each claim took them first
/// again, and once they were as many as a batch, no event behind them was ever taken. A claim that finds nothing
/// else says how many wait (the drain waits a moment and tries again), and after `passOverFor` they are claimed
/// again. Each is known from when it was first held until it is decided here, or until it is not held again for
/// `forgetAfter` (decided elsewhere), so the drain can tell how long the oldest has waited.
public final class HeldSubjects: @unchecked Sendable {
    private let lock = NSLock()
    private var held: [String: (since: ContinuousClock.Instant, until: ContinuousClock.Instant)] = [:]
    static let passOverFor: Duration = .milliseconds(200)
    static let forgetAfter: Duration = .seconds(1)

    func add(_ subjects: Set<String>) {
        guard !subjects.isEmpty else { return }
        let now = ContinuousClock.now
        lock.withLock {
            forget(now)
            for subject in subjects { held[subject] = (held[subject]?.since ?? now, now + Self.passOverFor) }
        }
    }

    /// Decided: no longer held.
    func release(_ subjects: [String]) {
        guard !subjects.isEmpty else { return }
        lock.withLock { for subject in subjects { held[subject] = nil } }
    }

    private func forget(_ now: ContinuousClock.Instant) {
        held = held.filter { $0.value.until + Self.forgetAfter > now }
    }

    /// The subjects passed over now.
    public var current: [String] {
        lock.withLock {
            let now = ContinuousClock.now
            forget(now)
            return held.filter { $0.value.until > now }.keys.sorted()
        }
    }

    /// The subjects held, and how long the one held longest has waited (nil: none).
    public var longest: (subjects: [String], waited: Duration)? {
        lock.withLock {
            let now = ContinuousClock.now
            forget(now)
            guard let oldest = held.values.map(\.since).min() else { return nil }
            return (held.keys.sorted(), now - oldest)
        }
    }
}

/// A batch's subjects gained events while it decided them: it is rolled back and made again with them held back.
struct SubjectsChangedMidBatch: Error {
    let subjects: Set<String>
}
