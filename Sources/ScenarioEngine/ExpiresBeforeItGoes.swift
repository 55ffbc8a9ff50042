import Foundation
import Postgres

/// A push that would expire before it can go is stored in the inbox without one (`inbox_only_expired`): a
/// catch-up run (`--now` yesterday) decides yesterday's overdue digest, which expires at yesterday's end, and
/// its push goes now. push-deliver could only mark it expired, and the daily slot it took was today's, so
/// today's own digest was capped. (A push that quiet hours defer past its expiry is `QuietHours`' to say.)
public struct ExpiresBeforeItGoes: Policy {
    public init() {}

    public var reasons: [SuppressionReason] { [] }

    public func shape(_ draft: inout NotificationDraft, _ c: PolicyContext) -> Suppression? {
        guard draft.inboxOnly == nil, let expiry = draft.expiresAt, c.recipient.activeDevices > 0 else { return nil }
        let due = draft.deliverAt ?? c.now
        // The moment it goes, as `DailyCap` reckons it: a late push waits out the quiet hours of the real time.
        let goes = CatchUp.lateAt(asOf: due).map {
            draft.critical ? $0 : CatchUp.goes(at: $0, quietHours: c.recipient.quietHours, zone: c.recipient.timeZone)
        } ?? due
        guard expiry <= goes else { return nil }
        draft.inboxOnly = NotifiedReason.InboxOnly(
            reason: NotifiedReason.inboxOnlyExpired,
            detail: "it expires at \(Timestamp.iso8601(expiry)), before its push could go (\(Timestamp.iso8601(goes))): inbox only, no push")
        return nil
    }
}
