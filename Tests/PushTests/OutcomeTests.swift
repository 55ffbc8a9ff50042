import Foundation
import HTTP2
import Push
import Testing

/// Every provider answer in the fact sheet maps to the action Apple and Google ask for.
@Suite struct OutcomeTests {
    func apns(_ status: Int, _ body: String = "", headers: [(String, String)] = []) -> PushOutcome {
        APNsOutcome.classify(.success(HTTPResponse(status: status, headers: headers, body: Array(body.utf8))))
    }

    func fcm(_ status: Int, _ body: String, headers: [(String, String)] = []) -> PushOutcome {
        FCMOutcome.classify(.success(HTTPResponse(status: status, headers: headers, body: Array(body.utf8))))
    }

    func kind(_ outcome: PushOutcome) -> String {
        switch outcome {
        case .delivered: return "delivered"
        case .retry: return "retry"
        case .tokenDead: return "tokenDead"
        case .rejected: return "rejected"
        case .reauthenticate: return "reauthenticate"
        case .credentialsBroken: return "credentialsBroken"
        case .unreachable: return "unreachable"
        case .environmentRefused: return "environmentRefused"
        case .platformCredentialsBroken: return "platformCredentialsBroken"
        }
    }

    @Test(arguments: [
        (200, "", "credentialsBroken"), // no apns-id: not APNs's answer (see below)
        (410, #"{"reason":"Unregistered","timestamp":1700000000000}"#, "tokenDead"),
        (410, #"{"reason":"ExpiredToken"}"#, "tokenDead"),
        (400, #"{"reason":"BadDeviceToken"}"#, "tokenDead"),
        (400, #"{"reason":"DeviceTokenNotForTopic"}"#, "tokenDead"),
        (400, #"{"reason":"BadCollapseId"}"#, "rejected"),
        (400, #"{"reason":"BadExpirationDate"}"#, "rejected"),
        (400, #"{"reason":"BadMessageId"}"#, "rejected"),
        (400, #"{"reason":"BadPriority"}"#, "rejected"),
        (400, #"{"reason":"DuplicateHeaders"}"#, "rejected"),
        (400, #"{"reason":"InvalidPushType"}"#, "rejected"),
        (400, #"{"reason":"MissingDeviceToken"}"#, "rejected"),
        (400, #"{"reason":"PayloadEmpty"}"#, "rejected"),
        (400, #"{"reason":"IdleTimeout"}"#, "retry"),
        (400, #"{"reason":"BadTopic"}"#, "credentialsBroken"),
        (400, #"{"reason":"TopicDisallowed"}"#, "credentialsBroken"),
        (400, #"{"reason":"MissingTopic"}"#, "credentialsBroken"),
        (403, #"{"reason":"ExpiredProviderToken"}"#, "reauthenticate"),
        (403, #"{"reason":"InvalidProviderToken"}"#, "credentialsBroken"),
        (403, #"{"reason":"MissingProviderToken"}"#, "credentialsBroken"),
        (403, #"{"reason":"Forbidden"}"#, "credentialsBroken"),
        (403, #"{"reason":"BadEnvironmentKeyInToken"}"#, "environmentRefused"),
        (403, #"{"reason":"BadEnvironmentKeyIdInToken"}"#, "environmentRefused"),
        (404, #"{"reason":"BadPath"}"#, "credentialsBroken"),
        (405, #"{"reason":"MethodNotAllowed"}"#, "credentialsBroken"),
        (413, #"{"reason":"PayloadTooLarge"}"#, "rejected"),
        (429, #"{"reason":"TooManyRequests"}"#, "retry"),
        (429, #"{"reason":"TooManyProviderTokenUpdates"}"#, "credentialsBroken"),
        (500, #"{"reason":"InternalServerError"}"#, "retry"),
        (503, #"{"reason":"ServiceUnavailable"}"#, "retry"),
        (503, #"{"reason":"Shutdown"}"#, "retry"),
        // Answers that are not APNs's (no reason): a proxy, a load balancer, a wrong endpoint.
        (404, "<html>Not Found</html>", "credentialsBroken"),
        (400, "", "credentialsBroken"),
        (401, #"{"error":"unauthorized"}"#, "credentialsBroken"),
        (502, "<html>Bad Gateway</html>", "retry"),
        (429, "", "retry"),
        (408, "", "retry"),
    ])
    func apnsAnswers(status: Int, body: String, expected: String) {
        #expect(kind(apns(status, body)) == expected)
    }

    @Test func apns410CarriesTheTimestampAndSuccessTheApnsID() {
        guard case .tokenDead(_, let since?) = apns(410, #"{"reason":"Unregistered","timestamp":1700000000000}"#) else {
            Issue.record("no timestamp")
            return
        }
        #expect(since == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(apns(200, headers: [("apns-id", "abc")]) == .delivered(messageID: "abc"))
    }

    static func googleError(_ code: Int, _ status: String, _ fcm: String?, message: String = "m") -> String {
        let detail = fcm.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        return #"{"error":{"code":\#(code),"message":"\#(message)","status":"\#(status)"\#(detail)}}"#
    }

    @Test(arguments: [
        (404, googleError(404, "NOT_FOUND", "UNREGISTERED"), "tokenDead"),
        (403, googleError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), "tokenDead"),
        (400, googleError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"), "tokenDead"),
        (400, googleError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Message is too big"), "rejected"),
        (400, googleError(400, "INVALID_ARGUMENT", nil, message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12"), "rejected"),
        (429, googleError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), "retry"),
        (503, googleError(503, "UNAVAILABLE", "UNAVAILABLE"), "retry"),
        (500, googleError(500, "INTERNAL", "INTERNAL"), "retry"),
        (401, googleError(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"), "platformCredentialsBroken"),
        (401, googleError(401, "UNAUTHENTICATED", nil), "reauthenticate"),
        (403, googleError(403, "PERMISSION_DENIED", nil, message: "Permission 'cloudmessaging.messages.create' denied"), "credentialsBroken"),
        // The detail decides, not the status: UNREGISTERED paired with another status is still a dead token.
        (400, googleError(400, "INVALID_ARGUMENT", "UNREGISTERED"), "tokenDead"),
        (502, "<html>bad gateway</html>", "retry"),
        // Not Google's answers: never a dead token or a dead message.
        (404, "<html>Not Found</html>", "credentialsBroken"),
        (400, "bad request", "credentialsBroken"),
        (404, googleError(404, "NOT_FOUND", nil, message: "Requested entity was not found."), "credentialsBroken"),
        (429, "", "retry"),
    ])
    func fcmAnswersByDetailNotStatus(status: Int, body: String, expected: String) {
        #expect(kind(fcm(status, body)) == expected)
    }

    @Test func aProvidersWordsAreMadeSafeToStoreAndLog() {
        // A NUL (PostgreSQL text refuses it: the whole batch of outcomes would fail), a line break (a forged log
        // line) and a reason of 100 KB, from APNs and from FCM.
        let nul = apns(400, #"{"reason":"Bad\u0000Thing\nINFO forged"}"#)
        #expect(nul == .rejected(reason: "Bad\u{FFFD}Thing\u{FFFD}INFO forged"))
        let long = apns(400, #"{"reason":""# + String(repeating: "x", count: 100_000) + #""}"#)
        #expect(long.reason.count == ProviderText.longest)
        #expect(fcm(200, #"{"name":"projects/p/messages/1\u0000"}"#) == .delivered(messageID: "projects/p/messages/1\u{FFFD}"))
        let fcmError = fcm(400, #"{"error":{"code":400,"message":"bad\u0007\r\nfield","status":"INVALID_ARGUMENT"}}"#)
        #expect(!fcmError.reason.unicodeScalars.contains { $0.value < 0x20 }, "\(fcmError.reason.debugDescription)")
        #expect(fcm(200, #"{"name":"projects/p/messages/ü-1"}"#) == .delivered(messageID: "projects/p/messages/ü-1"), "other text as it came")
        #expect(apns(400, #"{"reason":"a\u0085b\u2028c"}"#) == .rejected(reason: "a\u{FFFD}b\u{FFFD}c"), "C1 controls and line separators too")
    }

    @Test func fcmSuccessKeepsTheMessageName() {
        #expect(fcm(200, #"{"name":"projects/p/messages/123"}"#) == .delivered(messageID: "projects/p/messages/123"))
    }

    /// A 410 timestamp no APNs would send is no timestamp (it used to reach the database as a date past its range).
    @Test func anAbsurd410TimestampIsIgnored() {
        for stamp in ["1e22", "-5000000000000", "99999999999999999"] {
            guard case .tokenDead(_, let since) = apns(410, #"{"reason":"Unregistered","timestamp":\#(stamp)}"#) else {
                Issue.record("\(stamp): not tokenDead"); continue
            }
            #expect(since == nil, "\(stamp)")
        }
    }

    @Test func retryAfterHonoursSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryAfter.parse("120", now: now) == 120)
        #expect(RetryAfter.parse("Tue, 14 Nov 2023 22:15:20 GMT", now: now) == 120)
        #expect(RetryAfter.parse("soon", now: now) == nil)
        // Outside input: at most a day, however large (a year, or more digits than an integer holds).
        #expect(RetryAfter.parse("9300000000000", now: now) == 86_400)
        #expect(RetryAfter.parse("99999999999999999999999", now: now) == 86_400)
        #expect(RetryAfter.parse("Fri, 01 Jan 9999 00:00:00 GMT", now: now) == 86_400)
        guard case .retry(let after, _) = apns(503, #"{"reason":"ServiceUnavailable"}"#, headers: [("retry-after", "42")]) else {
            Issue.record("not a retry")
            return
        }
        #expect(after == 42)
        guard case .retry(let quotaAfter, _) = fcm(429, Self.googleError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED")) else {
            Issue.record("not a retry")
            return
        }
        #expect(quotaAfter == 60, "Google asks for at least a minute after QUOTA_EXCEEDED")
    }

    /// A push that may have reached the provider is retried (an attempt); one that never left, because no
    /// connection could be made, stops the provider for the run (no attempt); HTTP/1.1 is our setup's fault.
    /// A 200 is a delivery only when the provider names it (APNs's apns-id, FCM's message name): a proxy or a
    /// wrong endpoint answering 200 would otherwise have every push counted sent and lost unseen.
    @Test func aDeliveryIsOnlyOneTheProviderNamed() {
        #expect(apns(200, headers: [("apns-id", "7D4F5A8E-0C6B-4B7E-9A55-2C3F1E0D9B21")]) == .delivered(messageID: "7D4F5A8E-0C6B-4B7E-9A55-2C3F1E0D9B21"))
        #expect(kind(apns(200)) == "credentialsBroken")
        #expect(kind(apns(200, headers: [("apns-id", "")])) == "credentialsBroken")
        #expect(fcm(200, #"{"name": "projects/p/messages/0:1"}"#) == .delivered(messageID: "projects/p/messages/0:1"))
        #expect(kind(fcm(200, "{}")) == "credentialsBroken")
        #expect(kind(fcm(200, "<html>ok</html>")) == "credentialsBroken")
    }

    @Test func transportFailuresAreRetriedUnlessNothingLeftButHTTP1IsAConfigurationProblem() {
        #expect(kind(APNsOutcome.classify(.failure(HTTPTransportError(.connect, "refused")))) == "unreachable")
        #expect(kind(FCMOutcome.classify(.failure(HTTPTransportError(.connect, "refused")))) == "unreachable")
        #expect(kind(APNsOutcome.classify(.failure(HTTPTransportError(.broken, "GOAWAY")))) == "retry")
        #expect(kind(APNsOutcome.classify(.failure(HTTPTransportError(.timeout, "no answer")))) == "retry")
        #expect(kind(APNsOutcome.classify(.failure(HTTPTransportError(.notHTTP2, "h1")))) == "credentialsBroken")
        #expect(kind(APNsOutcome.classify(.failure(HTTPTransportError(.untrusted, "CA file")))) == "credentialsBroken")
        #expect(kind(FCMOutcome.classify(.failure(HTTPTransportError(.untrusted, "CA file")))) == "credentialsBroken")
    }
}
