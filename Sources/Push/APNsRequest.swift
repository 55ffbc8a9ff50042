import Foundation
import HTTP2
import TextCoding

/// Builds APNs requests (`POST /3/device/<token>`) with their headers and a payload that always fits.
public struct APNsRequestBuilder: Sendable {
    public static let productionEndpoint = "https://api.push.apple.com"
    public static let sandboxEndpoint = "https://api.sandbox.push.apple.com"
    /// Apple's limit for alert pushes (VoIP allows 5120; we send none).
    public static let maxPayloadBytes = 4096

    public var topic: String
    public var productionEndpoint: String
    public var sandboxEndpoint: String

    public init(topic: String, productionEndpoint: String = APNsRequestBuilder.productionEndpoint,
                sandboxEndpoint: String = APNsRequestBuilder.sandboxEndpoint) {
        self.topic = topic
        self.productionEndpoint = productionEndpoint
        self.sandboxEndpoint = sandboxEndpoint
    }

    /// The request for one device. `authorization` is the current provider token.
    public func request(_ message: PushMessage, target: PushTarget, authorization: String, tag: Int) -> HTTPRequest {
        request(message, target: target, authorizationHeader: "bearer " + authorization, tag: tag)
    }

    /// The request for one device, with the whole `authorization` header value (`bearer <token>`),
    /// which the provider keeps for as long as the token lives.
    public func request(_ message: PushMessage, target: PushTarget, authorizationHeader: String, tag: Int) -> HTTPRequest {
        let endpoint = target.apnsEnvironment == .sandbox ? sandboxEndpoint : productionEndpoint
        var headers: [(String, String)] = [
            ("authorization", authorizationHeader),
            ("apns-topic", topic),
            ("apns-push-type", "alert"),
            ("apns-priority", "10"),
            ("apns-id", message.notificationID.lowercasedString),
            ("apns-collapse-id", message.collapseID),
            ("content-type", "application/json"),
        ]
        // Without an expiry the header is left out, so APNs stores the push for a phone that is offline (as
        // FCM does without a ttl); `0` would mean "try once, never store".
        if let expiration = APNsRequestBuilder.expiration(message) { headers.append(("apns-expiration", expiration)) }
        return HTTPRequest(url: endpoint + "/3/device/" + target.token, headers: headers,
                           body: APNsRequestBuilder.payloadBytes(message), tag: tag)
    }

    /// The JSON payload, at most 4096 bytes: when too long, the body is shortened at a character
    /// boundary (never inside an emoji or an escape) and ends with "…"; the JSON is never cut.
    public static func payload(_ message: PushMessage) -> String {
        String(decoding: payloadBytes(message), as: UTF8.self)
    }

    /// `payload(_:)` as the UTF-8 bytes that are sent.
    public static func payloadBytes(_ message: PushMessage) -> [UInt8] {
        let full = render(message, title: message.title, body: message.body)
        if full.count <= maxPayloadBytes { return full }
        let (shortened, fits) = message.shortened { render($0, title: $0.title, body: $0.body).count <= maxPayloadBytes }
        if fits { return render(shortened, title: shortened.title, body: shortened.body) }
        // Only the custom data can still be too big: the alert without it, its text shortened again from the
        // whole (the first pass had cut title and body down to "…" to make room for the data).
        var bare = message
        bare.data = []
        let again = bare.shortened { render($0, title: $0.title, body: $0.body).count <= maxPayloadBytes }.message
        return render(again, title: again.title, body: again.body)
    }

    /// `apns-expiration`: the expiry as seconds since 1970, at least 1 (`0` would mean "try once, never store").
    static func expiration(_ message: PushMessage) -> String? {
        message.expiresAt.map { String(max(1, Int($0.timeIntervalSince1970))) }
    }

    /// The `aps` members beside the alert: badge, sound, thread, category, and a critical category's interruption
    /// level. Also what an FCM message carries for an iPhone (`FCMRequestBuilder.apnsConfig`).
    static func presentation(_ message: PushMessage, into aps: inout JSONWriter) {
        aps.add("badge", message.badge)
        aps.add("sound", message.presentation.sound)
        aps.add("thread-id", message.presentation.apnsThread)
        aps.add("category", message.category)
        if message.timeSensitive { aps.add("interruption-level", "time-sensitive") }
    }

    private static func render(_ message: PushMessage, title: String, body: String) -> [UInt8] {
        var alert = JSONWriter()
        alert.add("title", title)
        alert.add("body", body)
        var aps = JSONWriter()
        aps.add("alert", object: alert)
        presentation(message, into: &aps)
        var root = JSONWriter()
        root.add("aps", object: aps)
        root.add("notification_id", message.notificationID.lowercasedString)
        for (key, value) in message.data where key != "aps" && key != "notification_id" { root.add(key, value) }
        return root.utf8
    }
}
