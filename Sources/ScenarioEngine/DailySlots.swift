import Foundation
import Postgres

/// Takes users' daily slots for a batch of pushes (`DailyCap`), inside the recorder's transaction: locks
/// each user and day (a transaction-scoped advisory lock, taken in one sorted order so concurrent
/// recorders cannot deadlock on each other), reads the slots already taken and whether their pushes are
/// still waiting (their deliveries locked, so push-deliver cannot claim them meanwhile), and allocates.
enum DailySlots {
    /// One push of the batch that needs a slot.
    struct Request {
        var index: Int
        var user: UUID
        var slot: DailySlot
    }

    /// A slot already taken.
    struct Taken: Equatable {
        var notificationID: UUID
        var user: UUID
        var localDay: String
        var priority: Int
        var scenario: String
        /// Nothing of its push has gone out or been claimed yet: it may give its slot up.
        var waiting: Bool
    }

    struct Allocation {
        /// The requests (by index) that got a slot.
        var granted = Set<Int>()
        /// Waiting slots given up, each with the index of the request that took it.
        var displaced: [(victim: Taken, by: Int)] = []
    }

    /// Per user and day, by priority (1 first) then batch order: a free slot if there is one, else the
    /// slot of the lowest-priority waiting push of lower priority than this one, else none.
    static func allocate(_ requests: [Request], taken: [Taken]) -> Allocation {
        var allocation = Allocation()
        var byKey: [String: [Taken]] = [:]
        for slot in taken { byKey[slot.user.uuidString + slot.localDay, default: []].append(slot) }
        let ordered = requests.sorted { ($0.slot.priority, $0.index) < ($1.slot.priority, $1.index) }
        var used: [String: Int] = [:]
        for request in ordered {
            let key = request.user.uuidString + request.slot.localDay
            let holders = byKey[key] ?? []
            if holders.count + used[key, default: 0] < request.slot.cap {
                used[key, default: 0] += 1
                allocation.granted.insert(request.index)
            } else if let victim = holders.indices.filter({ holders[$0].waiting && holders[$0].priority > request.slot.priority })
                        .max(by: { holders[$0].priority < holders[$1].priority }) {
                allocation.displaced.append((holders[victim], request.index))
                byKey[key]!.remove(at: victim)
                used[key, default: 0] += 1
                allocation.granted.insert(request.index)
            }
        }
        return allocation
    }

    /// Locks the users' days and reads their slots; call inside the recording transaction.
    static func lockAndRead(_ requests: [Request], on connection: Connection) throws -> [Taken] {
        let (userArray, dayArray) = usersAndDays(requests)
        _ = try connection.query("""
            SELECT pg_advisory_xact_lock(k) FROM (
                SELECT DISTINCT hashtextextended('daily_push_slots:' || u || ':' || d, 0) AS k
                  FROM unnest(\(userArray)::uuid[], \(dayArray)::text[]) AS t(u, d) ORDER BY 1) keys
            """)
        // The queue rows are what a claim locks: holding them, no engine can claim one of these pushes
        // while we decide whether it gives way.
        _ = try connection.query("""
            SELECT q.delivery_id FROM delivery_queue q
              JOIN deliveries d ON d.id = q.delivery_id
              JOIN daily_push_slots s ON s.notification_id = d.notification_id
              JOIN unnest(\(userArray)::uuid[], \(dayArray)::date[]) AS t(u, d) ON s.user_id = t.u AND s.local_day = t.d
             ORDER BY q.delivery_id
               FOR UPDATE OF q
            """)
        return try read(users: userArray, days: dayArray, on: connection)
    }

    /// What the run would be given, read without locking anything: a dry run's count of the pushes over the cap
    /// and of the waiting ones that would give theirs up (it counted every push over the cap, as if none would).
    static func plan(_ requests: [Request], on connection: Connection) throws -> Allocation {
        guard !requests.isEmpty else { return Allocation() }
        let (users, days) = usersAndDays(requests)
        return allocate(requests, taken: try read(users: users, days: days, on: connection))
    }

    /// Each user and day the requests name, once, side by side.
    private static func usersAndDays(_ requests: [Request]) -> (PostgresArray<UUID>, PostgresArray<String>) {
        var seen = Set<String>()
        var users: [UUID] = []
        var days: [String] = []
        for request in requests where seen.insert(request.user.uuidString + request.slot.localDay).inserted {
            users.append(request.user)
            days.append(request.slot.localDay)
        }
        return (PostgresArray(users), PostgresArray(days))
    }

    /// The slots taken on those users' days, and whether their pushes are still waiting.
    private static func read(users userArray: PostgresArray<UUID>, days dayArray: PostgresArray<String>, on connection: Connection) throws -> [Taken] {
        // Waiting: every delivery still queued, never tried and never claimed (a claim leaves its lease
        // behind, even after it ran out: the push may have gone out).
        return try connection.query("""
            SELECT s.notification_id, s.user_id, s.local_day::text, s.priority, s.scenario,
                   NOT EXISTS (SELECT FROM deliveries d LEFT JOIN delivery_queue q ON q.delivery_id = d.id
                                WHERE d.notification_id = s.notification_id
                                  AND NOT (d.state = 'pending' AND d.attempts = 0 AND q.lease_until IS NULL AND q.delivery_id IS NOT NULL))
              FROM daily_push_slots s
              JOIN unnest(\(userArray)::uuid[], \(dayArray)::date[]) AS t(u, d) ON s.user_id = t.u AND s.local_day = t.d
            """).map { row in
            Taken(notificationID: try row.decode(0), user: try row.decode(1), localDay: try row.decode(2),
                  priority: try row.decode(3), scenario: try row.decode(4), waiting: try row.decode(5))
        }
    }
}
