import Foundation
import TextCoding

/// A notification as the providers should carry it: built from the inbox row, the same for APNs and FCM.
public struct PushMessage: Sendable {
    public var notificationID: UUID
    public var category: String
    public var title: String
    public var body: String
    /// Deep-link data (strings only, as FCM requires); the notification id is added by the builders.
    public var data: [(String, String)]
    /// The user's unread inbox count: the app icon badge.
    public var badge: Int
    /// Drop the push after this instant (APNs `apns-expiration`, FCM `ttl`).
    public var expiresAt: Date?
    /// The device shows one notification per collapse id, so a resend after a crash shows once.
    public var collapseID: String { notificationID.lowercasedString }
    /// A critical category's push: APNs `interruption-level: time-sensitive`, Android's critical channel.
    public var timeSensitive = false
    /// How the phone presents the category (the `notification_categories` row).
    public var presentation: Presentation

    /// A category's Android channel (a time-sensitive push uses `<channel>_critical`), sound and APNs thread.
    public struct Presentation: Sendable, Equatable {
        public var androidChannel: String
        public var sound: String
        public var apnsThread: String
        public init(androidChannel: String, sound: String, apnsThread: String) {
            self.androidChannel = androidChannel
            self.sound = sound
            self.apnsThread = apnsThread
        }
        /// For a category without a row: its own name as channel and thread, the default sound.
        public static func fallback(_ category: String) -> Presentation {
            Presentation(androidChannel: category, sound: "default", apnsThread: category)
        }
    }

    public init(notificationID: UUID, category: String, title: String, body: String, data: [(String, String)], badge: Int, expiresAt: Date?,
                timeSensitive: Bool = false, presentation: Presentation? = nil) {
        self.timeSensitive = timeSensitive
        self.presentation = presentation ?? .fallback(category)
        self.notificationID = notificationID
        self.category = category
        self.title = title
        self.body = body
        self.data = data
        self.badge = badge
        self.expiresAt = expiresAt
    }
}

/// A device to send to.
public struct PushTarget: Sendable {
    public enum Provider: String, Sendable { case apns, fcm, webpush, expo }
    public enum APNsEnvironment: String, Sendable { case production, sandbox }

    public var provider: Provider
    public var token: String
    public var apnsEnvironment: APNsEnvironment?

    public init(provider: Provider, token: String, apnsEnvironment: APNsEnvironment? = nil) {
        self.provider = provider
        self.token = token
        self.apnsEnvironment = apnsEnvironment
    }

    /// Why the token cannot be a real one, or nil. A token goes into the APNs request path and the FCM
    /// body, so one that is not what the provider issues (a `../` path, CR LF, spaces) is never sent:
    /// the outbox retires it with this reason. The database refuses such rows when they are written
    /// (migration 0005, the same rules); this catches the rows written before.
    public var malformation: String? {
        var token = self.token
        return token.withUTF8 { bytes in // checked before every push: contiguous bytes, no iterator
            switch provider {
            case .apns:
                for byte in bytes where !((0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)) {
                    return "an APNs token is hexadecimal"
                }
                guard (64...200).contains(bytes.count), bytes.count % 2 == 0 else { return "an APNs token is 64 to 200 hexadecimal digits, an even number" }
            case .fcm:
                for byte in bytes where !((0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                                          || byte == 0x2D || byte == 0x5F || byte == 0x3A) {
                    return "an FCM token holds only letters, digits, '-', '_' and ':'"
                }
                guard (20...4096).contains(bytes.count) else { return "an FCM token is 20 to 4096 characters" }
            case .webpush, .expo:
                break
            }
            return nil
        }
    }

    /// The token shortened for logs and messages: never the whole token.
    public var redacted: String { PushTarget.redact(token) }

    public static func redact(_ token: String) -> String {
        token.count <= 8 ? "…" : "…" + token.suffix(6)
    }
}
