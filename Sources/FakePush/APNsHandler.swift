import Foundation
import NIOHPACK

/// The APNs request headers, read in one pass over the header block.
struct APNsRequestHeaders {
    var authorization: String?
    var apnsID: String?
    var pushType: String?
    var expiration: String?
    var priority: String?
    var topic: String?
    var collapseID: String?
    /// Some header name occurs more than once.
    var hasDuplicates = false

    init(_ headers: HPACKHeaders) {
        var names: [String] = []
        names.reserveCapacity(headers.count)
        for (name, value, _) in headers {
            if names.contains(name) { hasDuplicates = true } else { names.append(name) }
            // HTTP/2 header names are lower-case (NIOHTTP2 rejects others), so plain comparison is enough.
            switch name {
            case "authorization": authorization = authorization ?? value
            case "apns-id": apnsID = apnsID ?? value
            case "apns-push-type": pushType = pushType ?? value
            case "apns-expiration": expiration = expiration ?? value
            case "apns-priority": priority = priority ?? value
            case "apns-topic": topic = topic ?? value
            case "apns-collapse-id": collapseID = collapseID ?? value
            default: break
            }
        }
    }
}

/// The fake APNs provider API (token authentication), following Apple's documented checks in the order of
/// the fact sheet §1.8: path and method, provider token, headers, body, then the token registry.
extension FakePushCore {
    private static let devicePathPrefix = "/3/device/"

    func handleAPNs(_ request: FakeRequest) -> HandlerOutcome {
        let outcome = answerAPNs(request)
        // A connection past its first valid token: one stream after an error, the full limit after a success.
        if configuration.apnsNarrowAfterError, request.connection.apnsToken != nil {
            request.connection.advertiseMaxConcurrentStreams(outcome.response.status == 200 ? configuration.apnsMaxConcurrentStreams : 1)
        }
        return outcome
    }

    private func answerAPNs(_ request: FakeRequest) -> HandlerOutcome {
        let connection = request.connection
        let headers = APNsRequestHeaders(request.headers)
        let apnsID = connection.responseAPNsID(requested: headers.apnsID)
        func fail(_ status: Int, _ reason: String, issuedAt: Int64? = nil) -> HandlerOutcome {
            HandlerOutcome(response: apnsError(status, reason, apnsID: apnsID), jwtIssuedAt: issuedAt)
        }

        // 1. Path and method.
        let path = request.path
        guard path.hasPrefix("/3/device") else { return fail(404, "BadPath") }
        guard request.method == "POST" else { return fail(405, "MethodNotAllowed") }
        if path == "/3/device" || path == Self.devicePathPrefix { return fail(400, "MissingDeviceToken") }
        guard path.hasPrefix(Self.devicePathPrefix) else { return fail(404, "BadPath") }
        let deviceToken = path.dropFirst(Self.devicePathPrefix.count)
        guard !deviceToken.utf8.contains(UInt8(ascii: "/")) else { return fail(404, "BadPath") }

        // 2. Provider token.
        let now = configuration.now()
        // After TooManyProviderTokenUpdates the connection is unusable until the refresh floor has passed
        // (fact sheet §1.5, forum 675879), whatever token a request carries.
        if let refusedUntil = connection.tokenUpdatesRefusedUntil, now < refusedUntil {
            return fail(429, "TooManyProviderTokenUpdates")
        }
        guard let authorization = headers.authorization else { return fail(403, "MissingProviderToken") }
        let jwt: String
        let verified: APNsProviderToken
        if let current = connection.apnsToken, current.authorization == authorization {
            // The connection's current token, as sent last time: already verified.
            jwt = current.token
            verified = current.verified
        } else {
            guard let credential = Self.bearerCredential(authorization) else { return fail(403, "InvalidProviderToken") }
            jwt = credential
            if let current = connection.apnsToken, current.token == jwt {
                verified = current.verified
            } else {
                switch apnsVerifier.check(jwt) {
                case .invalid(let issuedAt):
                    return fail(403, "InvalidProviderToken", issuedAt: issuedAt)
                case .valid(let token):
                    verified = token
                }
            }
        }
        let issuedAt = verified.issuedAt
        if !apnsKeysForTheOtherEnvironment.isEmpty && apnsKeysForTheOtherEnvironment.contains(verified.keyID) {
            return fail(403, "BadEnvironmentKeyInToken", issuedAt: issuedAt)
        }
        if now.timeIntervalSince1970 - Double(issuedAt) > configuration.providerTokenLifetime {
            return fail(403, "ExpiredProviderToken", issuedAt: issuedAt)
        }
        if let current = connection.apnsToken {
            if current.token != jwt {
                // One team per connection; a new token no sooner than the refresh floor.
                if current.verified.teamID != verified.teamID { return fail(403, "InvalidProviderToken", issuedAt: issuedAt) }
                // One key per connection (fact sheet §1.5: "open a new connection" for another key).
                if current.verified.keyID != verified.keyID { return fail(403, "UnrelatedKeyIdInToken", issuedAt: issuedAt) }
                if now.timeIntervalSince(current.firstSeen) < configuration.tokenRefreshFloor {
                    connection.tokenUpdatesRefusedUntil = current.firstSeen.addingTimeInterval(configuration.tokenRefreshFloor)
                    return fail(429, "TooManyProviderTokenUpdates", issuedAt: issuedAt)
                }
                connection.apnsToken = (jwt, authorization, verified, now)
            }
        } else {
            connection.apnsToken = (jwt, authorization, verified, now)
            connection.advertiseMaxConcurrentStreams(configuration.apnsMaxConcurrentStreams)
        }

        // 3. Headers, in Apple's order.
        if let reason = apnsHeaderProblem(headers) { return fail(400, reason, issuedAt: issuedAt) }
        let pushType = headers.pushType ?? "alert"

        // 4. Body.
        let size = request.body.readableBytes
        if size == 0 { return fail(400, "PayloadEmpty", issuedAt: issuedAt) }
        if size > (pushType == "voip" ? 5120 : 4096) { return fail(413, "PayloadTooLarge", issuedAt: issuedAt) }
        let payload: JSONValue
        do {
            payload = try request.body.withUnsafeReadableBytes { try JSONParser.parse($0) }
        } catch {
            return fail(400, "BadPayload", issuedAt: issuedAt)  // fake-only strictness: APNs has no such reason
        }
        guard payload["aps"]?.isObject == true else { return fail(400, "BadPayload", issuedAt: issuedAt) }

        // 5. The device token.
        let state = registry.withLock { $0.isEmpty ? nil : $0[String(deviceToken)] }
        switch state ?? defaultAPNsState(deviceToken) {
        case .valid:
            break
        case .badDeviceToken, .otherEnvironment, .fcmInvalid:
            return fail(400, "BadDeviceToken", issuedAt: issuedAt)
        case .wrongTopic, .senderIDMismatch:
            return fail(400, "DeviceTokenNotForTopic", issuedAt: issuedAt)
        case .unregistered(let timestamp):
            return HandlerOutcome(response: apnsError(410, "Unregistered", apnsID: apnsID, timestamp: timestamp),
                                  jwtIssuedAt: issuedAt)
        case .fcmUnregistered:
            let timestamp = Int64(now.timeIntervalSince1970 * 1000)
            return HandlerOutcome(response: apnsError(410, "Unregistered", apnsID: apnsID, timestamp: timestamp),
                                  jwtIssuedAt: issuedAt)
        case .expired:
            return fail(410, "ExpiredToken", issuedAt: issuedAt)
        case .throttled:
            return fail(429, "TooManyRequests", issuedAt: issuedAt)
        case .thirdPartyAuthError:
            return fail(403, "InvalidProviderToken", issuedAt: issuedAt)
        }

        var responseHeaders = [("apns-id", apnsID)]
        if configuration.apnsDevelopment { responseHeaders.append(("apns-unique-id", connection.makeUUID())) }
        var outcome = HandlerOutcome(response: FakeResponse(status: 200, headers: responseHeaders), jwtIssuedAt: issuedAt)
        if configuration.onAccepted != nil {
            let alert = payload["aps"]?["alert"]
            outcome.accepted = AcceptedPush(
                provider: .apns, target: String(deviceToken), topic: headers.topic,
                title: alert?["title"]?.stringValue,
                body: alert?.stringValue ?? alert?["body"]?.stringValue,
                validateOnly: false)
        }
        return outcome
    }

    /// The registry's verdict for a token it does not list.
    private func defaultAPNsState(_ token: Substring) -> TokenState {
        guard TokenSyntax.isWellFormedAPNsToken(token) else { return .badDeviceToken }
        return configuration.acceptUnknownTokens ? .valid : .badDeviceToken
    }

    /// The first header problem, as Apple's reason string, or nil.
    private func apnsHeaderProblem(_ headers: APNsRequestHeaders) -> String? {
        if headers.hasDuplicates { return "DuplicateHeaders" }
        let pushType = headers.pushType
        if let pushType, configuration.apnsPushTypes[pushType] == nil { return "InvalidPushType" }
        if let id = headers.apnsID, !UUIDText.isCanonical(id) { return "BadMessageId" }
        if let expiration = headers.expiration, !Self.isValidExpiration(expiration) { return "BadExpirationDate" }
        if let problem = Self.priorityProblem(headers.priority, pushType: pushType) { return problem }
        guard let topic = headers.topic else { return "MissingTopic" }
        if let problem = topicProblem(topic, pushType: pushType ?? "alert") { return problem }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 { return "BadCollapseId" }
        return nil
    }

    /// The credential after `Bearer ` (scheme matched case-insensitively), or nil.
    /// `apns-expiration`: UNIX epoch seconds, digits only (fact sheet §1.2).
    static func isValidExpiration(_ expiration: String) -> Bool {
        !expiration.isEmpty && expiration.utf8.count <= 19
            && expiration.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    }

    /// "BadPriority" for an `apns-priority` other than 10, 5 or 1, or 10 on a background push; nil when it passes.
    /// Left out, the priority is 10 (fact sheet §1.2); Apple: "Using priority 10 is an error" for background pushes.
    static func priorityProblem(_ priority: String?, pushType: String?) -> String? {
        let priority = priority ?? "10"
        guard priority == "10" || priority == "5" || priority == "1" else { return "BadPriority" }
        return priority == "10" && pushType == "background" ? "BadPriority" : nil
    }

    static func bearerCredential(_ authorization: String) -> String? {
        let utf8 = authorization.utf8
        guard utf8.count > 7 else { return nil }
        for (byte, expected) in zip(utf8.prefix(7), "bearer ".utf8) where byte | 0x20 != expected {
            return nil
        }
        return String(authorization.utf8.dropFirst(7))
    }

    /// `BadTopic` for a malformed topic or one whose suffix does not fit the push type, `TopicDisallowed` for a
    /// bundle ID the keys may not push to.
    private func topicProblem(_ topic: String, pushType: String) -> String? {
        let allowedCharacters = topic.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        guard !topic.isEmpty, allowedCharacters else { return "BadTopic" }
        let suffix = configuration.apnsPushTypes[pushType] ?? ""
        if topic.hasSuffix(suffix), configuration.apnsTopics.contains(String(topic.dropLast(suffix.count))) {
            return nil
        }
        // An allowed bundle ID with another push type's suffix (or none) is a bad topic for this push type.
        for otherSuffix in Set(configuration.apnsPushTypes.values) where topic.hasSuffix(otherSuffix) {
            if configuration.apnsTopics.contains(String(topic.dropLast(otherSuffix.count))) { return "BadTopic" }
        }
        return "TopicDisallowed"
    }

    /// An APNs error: `{"reason":"…"}` (plus `timestamp` for 410 Unregistered) and the `apns-id` header.
    func apnsError(_ status: Int, _ reason: String, apnsID: String, timestamp: Int64? = nil) -> FakeResponse {
        let body = timestamp.map { #"{"reason":"\#(reason)","timestamp":\#($0)}"# } ?? #"{"reason":"\#(reason)"}"#
        return FakeResponse(status: status, headers: [("apns-id", apnsID)], body: body)
    }

    /// The APNs answer to an injected fault, or nil when the fault does not change the answer.
    func apnsFaultResponse(_ fault: Fault, request: FakeRequest) -> FakeResponse? {
        let apnsID = request.connection.responseAPNsID(for: request)
        func withRetryAfter(_ response: FakeResponse, _ seconds: Int?) -> FakeResponse {
            var response = response
            if let seconds { response.headers.append(("retry-after", String(seconds))) }
            return response
        }
        switch fault {
        case .status500: return apnsError(500, "InternalServerError", apnsID: apnsID)
        case .status503(let retryAfter): return withRetryAfter(apnsError(503, "ServiceUnavailable", apnsID: apnsID), retryAfter)
        case .status503Until(let date):
            var response = apnsError(503, "ServiceUnavailable", apnsID: apnsID)
            response.headers.append(("retry-after", HTTPDate.format(date)))
            return response
        case .tooManyRequests(let retryAfter): return withRetryAfter(apnsError(429, "TooManyRequests", apnsID: apnsID), retryAfter)
        case .payloadTooLarge: return apnsError(413, "PayloadTooLarge", apnsID: apnsID)
        case .expiredProviderToken: return apnsError(403, "ExpiredProviderToken", apnsID: apnsID)
        case .invalidProviderToken, .fcmThirdPartyAuth: return apnsError(403, "InvalidProviderToken", apnsID: apnsID)
        case .oauthInvalidGrant, .oauthServerError, .oauthInternalFailure, .oauthMalformedAccessToken, .slow, .dropConnection, .goaway, .shutdown, .proxyErrorPage: return nil
        }
    }
}
