import Foundation

/// A catch-up run: one as of an instant (`--now`) further back than push-deliver's 10 minutes of lateness
/// (after the timer was down). It decides as of then, but its pushes go now, late, and wait out the
/// recipient's quiet hours of the real time, as push-deliver holds a late push.
public enum CatchUp {
    /// How far back a run's instant must be for its pushes to be late (push-deliver's `lateAfter`).
    public static let lateAfter: TimeInterval = 600

    /// The real time a run as of `asOf` pushes at, if it is a catch-up run; nil for a run as of now.
    public static func lateAt(asOf: Date, clock: Date = Date()) -> Date? {
        asOf < clock.addingTimeInterval(-lateAfter) ? clock : nil
    }

    /// When a late push (not critical, not deferred by the run) goes: at `lateAt`, or when the recipient's
    /// quiet hours of that moment end.
    static func goes(at lateAt: Date, quietHours: (start: Int, end: Int)?, zone: String) -> Date {
        quietHours.flatMap { QuietHours.end(of: $0, at: lateAt, zone: zone) } ?? lateAt
    }
}
