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
        let day = DailySlot.localDay(of: goes, zone: c.recipient.timeZone)
        let taken = day == DailySlot.localDay(of: CatchUp.lateAt(asOf: c.now) ?? c.now, zone: c.recipient.timeZone) ? c.recipient.pushesToday : nil
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
}
