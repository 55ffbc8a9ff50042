import Foundation

/// Which fake service a request was routed to.
public enum Provider: String, Sendable, Hashable, CaseIterable {
    /// `POST /3/device/{token}` (and any other `/3/` path).
    case apns
    /// `POST /v1/projects/{project}/messages:send`.
    case fcm
    /// `POST /token`.
    case oauth
    /// Any other path (answered 404).
    case unknown
}

/// One request as the fake received and answered it, for tests to assert on.
public struct RecordedRequest: Sendable {
    /// The service the path routed to.
    public var provider: Provider
    /// `:method`.
    public var method: String
    /// `:path`, as sent.
    public var path: String
    /// The regular (non-pseudo) headers in the order received, names lower-case as HTTP/2 requires.
    public var headers: [(String, String)]
    /// The request body.
    public var body: Data
    /// Which TCP connection carried it, numbered from 1 in order of acceptance.
    public var connectionID: Int
    /// The HTTP/2 stream ID.
    public var streamID: Int
    /// The status answered, or 0 when the fake answered nothing (`dropConnection`, `goaway`, or a delayed answer
    /// the connection's end cut off: a request is recorded when it is complete, its answer once written).
    public var status: Int
    /// The response headers (without `:status`).
    public var responseHeaders: [(String, String)]
    /// The response body as text (empty for an APNs 200).
    public var responseBody: String
    /// APNs: the provider token's `iat` in seconds, when the JWT could be decoded.
    public var jwtIssuedAt: Int?
    /// The injected fault that shaped the answer, if any.
    public var fault: Fault?
    /// FCM: true when the request asked for `validate_only` (answered 200, not delivered).
    public var validateOnly: Bool
    /// When the request was complete (headers and body), by the server's clock.
    public var receivedAt: Date

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.0 == lowered }?.1
    }

    /// The first value of response header `name` (case-insensitive).
    public func responseHeader(_ name: String) -> String? {
        let lowered = name.lowercased()
        return responseHeaders.first { $0.0 == lowered }?.1
    }

    /// The body parsed as JSON (`[String: Any]` for an APNs or FCM body), or nil.
    public var json: Any? {
        try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
    }

    /// The response body parsed as JSON, or nil.
    public var responseJSON: Any? {
        try? JSONSerialization.jsonObject(with: Data(responseBody.utf8), options: [.fragmentsAllowed])
    }

    /// The device token: the APNs path's last segment, or FCM's `message.token`.
    public var deviceToken: String? {
        switch provider {
        case .apns:
            let prefix = "/3/device/"
            guard path.hasPrefix(prefix) else { return nil }
            let token = path.dropFirst(prefix.count).prefix { $0 != "?" }
            return token.isEmpty ? nil : String(token)
        case .fcm:
            guard let root = json as? [String: Any], let message = root["message"] as? [String: Any] else { return nil }
            return message["token"] as? String
        case .oauth, .unknown:
            return nil
        }
    }
}

/// A push the fake accepted, as a phone would show it (for `fake-push --print` and demos).
public struct AcceptedPush: Sendable {
    /// APNs or FCM.
    public var provider: Provider
    /// The device token, or for FCM a `topic`/`condition` target as `topic:<name>` / `condition:<expr>`.
    public var target: String
    /// APNs: `apns-topic`.
    public var topic: String?
    /// The alert title, when the payload has one.
    public var title: String?
    /// The alert body, when the payload has one.
    public var body: String?
    /// FCM `validate_only`: checked, not delivered.
    public var validateOnly: Bool
}

/// The counters and recordings shared by all connections.
struct RecordingState {
    /// Bumped by ``FakePushServer/clearRecorded()``: an answer written later for a request recorded before
    /// belongs to nothing kept (its index would name another request, or none).
    var epoch = 0
    var requests: [RecordedRequest] = []
    var received = 0
    var accepted = 0
    /// Streams answered RST_STREAM(REFUSED_STREAM) for exceeding a limit the client had not acknowledged.
    var refusedStreams = 0
    /// Connections closed with GOAWAY for exceeding a limit the client had acknowledged.
    var streamLimitViolations = 0
}

extension AcceptedPush {
    /// One line the way a phone would show the push: `APNs …1a2b3c (no.likeperson.app): "Title" — Body`,
    /// `FCM …xyz9ab: "Title" — Body`; a push without alert text shows `(no alert)`.
    public var displayLine: String {
        var line = provider == .apns ? "APNs " : "FCM "
        line += target.count > 6 ? "…" + target.suffix(6) : target
        if let topic { line += " (\(topic))" }
        line += ": "
        switch (title, body) {
        case let (title?, body): line += "\"\(title)\"" + (body.map { " — \($0)" } ?? "")
        case let (nil, body?): line += body
        case (nil, nil): line += "(no alert)"
        }
        if validateOnly { line += " [validate_only]" }
        return line
    }
}
