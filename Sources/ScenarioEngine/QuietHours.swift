import Foundation
import Postgres

/// Quiet hours: a push decided inside the user's window (their own, else their organization's; local
/// wall-clock times in their time zone) is stored in the inbox at once, and its delivery waits until the
/// window ends. Deferred, never dropped: only a notification that expires before the window ends goes to
/// the inbox without a push, and the decision says so.
///
/// The end is the first instant the local clock reads the end time after now: on the day clocks go
/// forward an end inside the skipped hour becomes the first instant after the gap (02:30 → 03:00), and on
/// the day they go back an end inside the repeated hour is its first occurrence.
public struct QuietHours: Policy {
    public init() {}

    public var reasons: [SuppressionReason] { [] }

    public func shape(_ draft: inout NotificationDraft, _ candidate: PolicyContext) -> Suppression? {
        guard !draft.critical, draft.inboxOnly == nil, let window = candidate.recipient.quietHours,
              let end = QuietHours.end(of: window, at: candidate.now, zone: candidate.recipient.timeZone) else { return nil }
        if let expiry = draft.expiresAt, expiry <= end {
            draft.inboxOnly = NotifiedReason.InboxOnly(
                reason: "inbox_only_quiet_hours",
                detail: "quiet hours until \(QuietHours.clock(window.end)) \(candidate.recipient.timeZone), and it expires before (\(Timestamp.iso8601(expiry))): inbox only, no push")
        } else {
            draft.deliverAt = end
        }
        return nil
    }

    /// When the window that `instant` falls in ends, or nil when `instant` is outside it.
    public static func end(of window: (start: Int, end: Int), at instant: Date, zone: String) -> Date? {
        LocalClock.windowEnd(window, at: instant, zone: zone) { computeEnd(of: window, at: instant, zone: zone) }
    }

    private static func computeEnd(of window: (start: Int, end: Int), at instant: Date, zone: String) -> Date? {
        // PostgreSQL's `time` takes 24:00, the end of the day: that is midnight, 0. A window whose start and end
        // are then the same instant (00:00–24:00) is no window.
        let window = (start: window.start % 86_400, end: window.end % 86_400)
        guard window.start != window.end else { return nil }
        let calendar = LocalClock.calendar(zone)
        let parts = calendar.dateComponents([.hour, .minute, .second], from: instant)
        let now = parts.hour! * 3600 + parts.minute! * 60 + parts.second!
        let inside = window.start < window.end ? (now >= window.start && now < window.end) : (now >= window.start || now < window.end)
        let target = DateComponents(hour: window.end / 3600, minute: window.end % 3600 / 60, second: window.end % 60)
        guard inside else {
            // The night clocks go back, the clock reads the repeated hour twice: a window that began in its first
            // pass (02:30 summer time) reads as not begun in its second (02:10 winter time), though the user's
            // quiet night has gone on for 40 minutes. Inside if the window began, by the instants, since its
            // last start (the first time the clock read it) and has not ended. Its end is the first at or after
            // that start: the night clocks go forward a start inside the skipped hour reads as the gap's end,
            // and a window that lies in the gap (02:00–03:00) ends as it begins, so nothing waits for the
            // next night's end.
            let start = DateComponents(hour: window.start / 3600, minute: window.start % 3600 / 60, second: window.start % 60)
            guard let began = calendar.nextDate(after: instant.addingTimeInterval(1), matching: start, matchingPolicy: .nextTime,
                                                repeatedTimePolicy: .first, direction: .backward),
                  began <= instant, instant.timeIntervalSince(began) < 86_400,
                  let end = calendar.nextDate(after: began.addingTimeInterval(-1), matching: target, matchingPolicy: .nextTime,
                                              repeatedTimePolicy: .first, direction: .forward),
                  end > instant else { return nil }
            return end
        }
        return calendar.nextDate(after: instant, matching: target, matchingPolicy: .nextTime, repeatedTimePolicy: .first, direction: .forward)
    }

    /// "07:00" for 25200 seconds after midnight.
    static func clock(_ seconds: Int) -> String { String(format: "%02d:%02d", seconds / 3600, seconds % 3600 / 60) }
}
