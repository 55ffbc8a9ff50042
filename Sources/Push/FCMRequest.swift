import Foundation
import HTTP2
import TextCoding

/// Builds FCM HTTP v1 requests (`POST /v1/projects/{project}/messages:send`).
public struct FCMRequestBuilder: Sendable {
    public static let endpoint = "https://fcm.googleapis.com"
    /// FCM's limit for a message to a token.
    public static let maxMessageBytes = 4096

    public var projectID: String
    public var endpoint: String

    public init(projectID: String, endpoint: String = FCMRequestBuilder.endpoint) {
        self.projectID = projectID
        self.endpoint = endpoint
    }

    public var url: String { endpoint + "/v1/projects/" + projectID + "/messages:send" }

    /// The request for one device. `accessToken` is the current OAuth2 access token.
    public func request(_ message: PushMessage, target: PushTarget, accessToken: String, now: Date, tag: Int) -> HTTPRequest {
        HTTPRequest(url: url, headers: [
            ("authorization", "Bearer " + accessToken),
            ("content-type", "application/json; charset=utf-8"),
        ], body: Array(body(message, token: target.token, now: now).utf8), tag: tag)
    }

    /// The JSON body; if the message would pass 4096 bytes, the notification body is shortened at a character
    /// boundary, then the title (an assignment's title can be of any length), as for APNs.
    public func body(_ message: PushMessage, token: String, now: Date) -> String {
        let full = render(message, token: token, now: now)
        if full.utf8.count <= FCMRequestBuilder.maxMessageBytes { return full }
        let shortened = message.shortened { render($0, token: token, now: now).utf8.count <= FCMRequestBuilder.maxMessageBytes }
        if shortened.fits { return render(shortened.message, token: token, now: now) }
        // Only the custom data can still be too big (FCM refuses the whole message past 4096 bytes, 400): without
        // it, the text shortened again from the whole, as for APNs.
        var bare = message
        bare.data = []
        return render(bare.shortened { render($0, token: token, now: now).utf8.count <= FCMRequestBuilder.maxMessageBytes }.message, token: token, now: now)
    }

    /// Data keys FCM refuses (fact sheet: `from`, `message_type`, and any starting with `google` or `gcm`): one
    /// would fail the whole message, so it is left out.
    static func isReserved(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// What an iPhone registered through FCM (the Flutter app's `firebase_messaging` registers one) gets through APNs,
    /// as our own APNs requests carry it: the collapse id (a push sent again after a crash shows once), the expiry,
    /// the badge, sound, thread and category, and a critical category's time-sensitive interruption level. FCM adds
    /// the title and body from `notification` (fact sheet §2.3, `ApnsConfig`); Android ignores the block.
    static func apnsConfig(_ message: PushMessage) -> String {
        var headers = JSONWriter()
        headers.add("apns-priority", "10")
        headers.add("apns-push-type", "alert")
        headers.add("apns-collapse-id", message.collapseID)
        if let expiration = APNsRequestBuilder.expiration(message) { headers.add("apns-expiration", expiration) }
        var aps = JSONWriter()
        APNsRequestBuilder.presentation(message, into: &aps)
        var payload = JSONWriter()
        payload.add("aps", object: aps)
        var apns = JSONWriter()
        apns.add("headers", json: headers.json)
        apns.add("payload", json: payload.json)
        return apns.json
    }

    private func render(_ message: PushMessage, token: String, now: Date) -> String {
        var notification = JSONWriter()
        notification.add("title", message.title)
        notification.add("body", message.body)
        var data = JSONWriter()
        data.add("notification_id", message.notificationID.lowercasedString)
        data.add("category", message.category)
        for (key, value) in message.data where key != "notification_id" && key != "category" && !FCMRequestBuilder.isReserved(key) { data.add(key, value) }
        var androidNotification = JSONWriter()
        // A critical category has a channel of its own, which the app creates with high importance.
        let channel = message.presentation.androidChannel
        androidNotification.add("channel_id", message.timeSensitive ? channel + "_critical" : channel)
        androidNotification.add("sound", message.presentation.sound)
        if message.timeSensitive { androidNotification.add("notification_priority", "PRIORITY_MAX") }
        androidNotification.add("notification_count", message.badge)
        androidNotification.add("tag", message.collapseID)
        var android = JSONWriter()
        android.add("priority", "HIGH")
        if let expiresAt = message.expiresAt {
            android.add("ttl", String(min(2_419_200, max(0, Int(expiresAt.timeIntervalSince(now))))) + "s")
        }
        // The tag makes the device show one notification per inbox row (a resend replaces it). No collapse
        // key: FCM keeps at most four per device while it is offline and drops the others' messages, so
        // each push is kept (up to 100 per device) until its TTL.
        android.add("notification", json: androidNotification.json)
        var body = JSONWriter()
        body.add("token", token)
        body.add("notification", json: notification.json)
        body.add("data", json: data.json)
        body.add("android", json: android.json)
        body.add("apns", json: FCMRequestBuilder.apnsConfig(message))
        var root = JSONWriter()
        root.add("message", json: body.json)
        return root.json
    }
}
