import Foundation

/// A scripted failure for the next requests (``FakePushServer/inject(_:count:provider:)``).
///
/// Unless `inject` names a provider, a fault applies to the providers it makes sense for: the generic ones
/// (status codes, `slow`, `dropConnection`, `goaway`, `shutdown`) to APNs and FCM sends but not to OAuth token
/// requests, so a test that injects a 503 for FCM does not lose it to the token fetch first; the APNs ones to
/// APNs; `fcmThirdPartyAuth` to FCM; the `oauth…` ones to `POST /token`. Naming a provider explicitly also lets a
/// generic fault hit OAuth (answered the way Google's token endpoint would).
public enum Fault: Sendable, Hashable {
    /// APNs `500 InternalServerError`; FCM `500 INTERNAL`; OAuth `500 internal_failure`.
    case status500
    /// APNs `503 ServiceUnavailable`; FCM `503 UNAVAILABLE`; with `Retry-After: <seconds>` when given.
    case status503(retryAfter: Int?)
    /// Like ``status503(retryAfter:)`` with `Retry-After` as an HTTP-date (Google may send either form).
    case status503Until(Date)
    /// APNs `429 TooManyRequests`; FCM `429 RESOURCE_EXHAUSTED` with FcmError `QUOTA_EXCEEDED` and a
    /// `QuotaFailure` detail; with `Retry-After` when given.
    case tooManyRequests(retryAfter: Int?)
    /// APNs `413 PayloadTooLarge`; FCM `400 INVALID_ARGUMENT` "Android message is too big" (what FCM really
    /// answers to an oversized message).
    case payloadTooLarge
    /// APNs `403 ExpiredProviderToken`.
    case expiredProviderToken
    /// APNs `403 InvalidProviderToken`.
    case invalidProviderToken
    /// FCM `401 UNAUTHENTICATED` with FcmError `THIRD_PARTY_AUTH_ERROR`.
    case fcmThirdPartyAuth
    /// Answers normally, `seconds` later (scheduled on the event loop, which stays free meanwhile).
    case slow(seconds: Double)
    /// Closes the TCP connection without answering.
    case dropConnection
    /// Does not answer; sends GOAWAY (NO_ERROR, last-stream-id = the highest stream already answered, so this
    /// request is safe to retry; APNs adds debug data `{"reason":"Shutdown"}`), then closes the connection.
    case goaway
    /// Answers APNs `503 {"reason":"Shutdown"}` (FCM `503 UNAVAILABLE`), then sends GOAWAY with this stream as
    /// last-stream-id (APNs with debug data `{"reason":"Shutdown"}`) and closes the connection.
    case shutdown
    /// OAuth `400 {"error":"invalid_grant","error_description":"Invalid JWT Signature."}`.
    case oauthInvalidGrant
    /// OAuth `503 {"error":"temporarily_unavailable", …}` (google-auth retries it).
    case oauthServerError
    /// OAuth `400 {"error":"internal_failure", …}`: a passing trouble said with a 400 (google-auth retries on the
    /// error code, whatever the status).
    case oauthInternalFailure
    /// OAuth `200` whose `access_token` holds a line break and a space (no bearer token: a token_uri that is not
    /// Google's).
    case oauthMalformedAccessToken
    /// Not the provider's answer but a proxy's in the way: `502` with an HTML page of `bytes` bytes, for a
    /// client that must not keep whatever size it is sent.
    case proxyErrorPage(bytes: Int)

    /// The providers this fault hits when `inject` names none.
    var defaultProviders: Set<Provider> {
        switch self {
        case .status500, .status503, .status503Until, .tooManyRequests, .payloadTooLarge, .slow, .dropConnection, .goaway, .shutdown,
             .proxyErrorPage:
            return [.apns, .fcm]
        case .expiredProviderToken, .invalidProviderToken:
            return [.apns]
        case .fcmThirdPartyAuth:
            return [.fcm]
        case .oauthInvalidGrant, .oauthServerError, .oauthInternalFailure, .oauthMalformedAccessToken:
            return [.oauth]
        }
    }
}

extension FakeResponse {
    /// ``Fault/proxyErrorPage(bytes:)``'s answer.
    static func proxyErrorPage(bytes: Int) -> FakeResponse {
        let head = "<html><head><title>502 Bad Gateway</title></head><body>"
        let tail = "</body></html>"
        let filler = String(repeating: "x", count: max(0, bytes - head.utf8.count - tail.utf8.count))
        return FakeResponse(status: 502, headers: [("content-type", "text/html")], body: head + filler + tail)
    }
}

/// Injected faults waiting for requests, oldest first.
struct FaultQueue {
    private struct Entry {
        var fault: Fault
        var remaining: Int
        var providers: Set<Provider>
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    mutating func add(_ fault: Fault, count: Int, provider: Provider?) {
        guard count > 0 else { return }
        entries.append(Entry(fault: fault, remaining: count, providers: provider.map { [$0] } ?? fault.defaultProviders))
    }

    /// Takes one use of the oldest fault that applies to `provider`.
    mutating func take(for provider: Provider) -> Fault? {
        guard let index = entries.firstIndex(where: { $0.providers.contains(provider) }) else { return nil }
        let fault = entries[index].fault
        entries[index].remaining -= 1
        if entries[index].remaining == 0 { entries.remove(at: index) }
        return fault
    }

    mutating func removeAll() { entries.removeAll() }
}

/// `Retry-After` as an IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
enum HTTPDate {
    static func format(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
