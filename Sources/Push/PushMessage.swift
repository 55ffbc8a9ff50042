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

    public init(notificationID: UUID, category: String, title: String, body: String, data: [(String, String)], badge: Int, expiresAt: Date?) {
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

    /// The token shortened for logs and messages: never the whole token.
    public var redacted: String { PushTarget.redact(token) }

    public static func redact(_ token: String) -> String {
        token.count <= 8 ? "…" : "…" + token.suffix(6)
    }
}
