import Foundation

/// The category's channels (`CategoryChannels`): inbox only stores the notification without a push, push
/// only pushes it without listing it in the inbox, and a user who narrowed the organization's choice to
/// nothing is not notified. A notification that cannot be pushed (inbox only, quiet hours past its
/// expiry, the daily cap, no device) is always listed in the inbox: nothing is dropped without a trace.
public struct Channels: Policy {
    public init() {}

    public var reasons: [SuppressionReason] { [.noChannel] }

    public func shape(_ draft: inout NotificationDraft, _ c: PolicyContext) -> Suppression? {
        let channels = c.recipient.channels
        switch (channels.push, channels.inbox) {
        case (false, false):
            return Suppression(.noChannel, "the user narrowed \(c.category.rawValue) to channels the organization does not use")
        case (false, true):
            draft.inboxOnly = NotifiedReason.InboxOnly(reason: NotifiedReason.inboxOnlyChannel,
                                                      detail: "\(c.category.rawValue) goes to the inbox only: no push")
        case (true, false):
            draft.inInbox = false
        case (true, true):
            break
        }
        return nil
    }
}

extension SuppressionReason {
    /// The user's narrowing and the organization's channels for the category have nothing in common.
    public static let noChannel = SuppressionReason("no_channel")
}
