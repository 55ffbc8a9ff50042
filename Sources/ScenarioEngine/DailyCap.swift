import Foundation

/// The daily cap of non-critical pushes per user and local day, across scenarios. The policy names the
/// slot a push needs (the local day it may go, the scenario's priority, the cap); `DailySlots` takes it
/// when the decision is recorded, under a lock per user and day, so concurrent jobs never overshoot. Over
/// the cap a push takes the slot of a lower-priority push that has not gone out yet, or else is not sent:
/// the notification stays in the inbox and the decision says `capped`.
public struct DailyCap: Policy {
    public init() {}

    public var reasons: [SuppressionReason] { [] }

    public func shape(_ draft: inout NotificationDraft, _ c: PolicyContext) -> Suppression? {
        guard !draft.critical, draft.inboxOnly == nil, let cap = c.recipient.dailyCap, c.recipient.activeDevices > 0 else { return nil }
        // The day the push goes: a catch-up run's (`--now` yesterday) goes today, and counted on the run's day it
        // let a user capped at one get two today.
        // (A push it deferred to an end of quiet hours that has passed since goes now too.)
        let due = draft.deliverAt ?? c.now
        let goes = CatchUp.lateAt(asOf: due).map { CatchUp.goes(at: $0, quietHours: c.recipient.quietHours, zone: c.recipient.timeZone) } ?? due
        // One that expires before it goes (a catch-up run's overdue digest of yesterday, which expires at
        // yesterday's end) needs no slot: push-deliver marks it expired, and the slot it took was today's, so
        // today's own digest was capped.
        if let expiry = draft.expiresAt, expiry <= goes { return nil }
        let day = DailySlot.localDay(of: goes, zone: c.recipient.timeZone)
        let today = DailySlot.localDay(of: CatchUp.lateAt(asOf: c.now) ?? c.now, zone: c.recipient.timeZone)
        let taken = day == today ? c.recipient.pushesToday : day == DailySlot.dayAfter(today) ? c.recipient.pushesNextDay : nil
        draft.dailySlot = DailySlot(localDay: day, cap: cap, priority: c.priority, scenario: c.scenario, takenWhenPlanned: taken)
        return nil
    }
}

/// One push's claim on its user's daily slots.
public struct DailySlot: Sendable {
    /// The user's local day (yyyy-mm-dd) of the moment the push may go.
    public var localDay: String
    public var cap: Int
    /// 1 comes first.
    public var priority: Int
    public var scenario: String
    /// The slots already taken that day when the candidates were read (nil: another day), for the plan.
    public var takenWhenPlanned: Int?

    /// The date `instant` falls on in `zone`, as yyyy-mm-dd.
    public static func localDay(of instant: Date, zone: String) -> String {
        LocalClock.day(of: instant, zone: zone)
    }

    /// The date after `day` (yyyy-mm-dd), as yyyy-mm-dd.
    static func dayAfter(_ day: String) -> String {
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3 else { return "" }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])),
              let next = calendar.date(byAdding: .day, value: 1, to: date) else { return "" }
        let n = calendar.dateComponents([.year, .month, .day], from: next)
        return String(format: "%04d-%02d-%02d", n.year!, n.month!, n.day!)
    }
}
