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

/// A fault as `fake-push --fault` takes it: `NAME[=VALUE][*COUNT][@PROVIDER]`, e.g. `503=120*5@apns` (the next
/// five APNs requests answered 503 with `Retry-After: 120`), `429*3@fcm`, `slow=2`, `goaway`. COUNT is 1 by default.
public struct FaultSpec: Sendable, Equatable {
    public var fault: Fault
    public var count: Int
    public var provider: Provider?

    public init(fault: Fault, count: Int = 1, provider: Provider? = nil) {
        self.fault = fault
        self.count = count
        self.provider = provider
    }

    /// The names `parse` knows, with what their value is, for messages and `--help`.
    public static let names = [
        "500", "503[=retry-after seconds]", "429[=retry-after seconds]", "413", "expired-provider-token", "invalid-provider-token",
        "fcm-third-party-auth", "slow=<seconds>", "drop-connection", "goaway", "shutdown", "oauth-invalid-grant",
        "oauth-server-error", "oauth-internal-failure", "oauth-malformed-access-token", "proxy-error-page[=bytes]",
    ]

    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ text: String) throws -> FaultSpec {
        var rest = Substring(text)
        var provider: Provider?
        if let at = rest.lastIndex(of: "@") {
            let name = rest[rest.index(after: at)...]
            guard let named = Provider(rawValue: String(name)), named != .unknown else {
                throw Problem(description: "\(text): @\(name) is not a provider (apns, fcm or oauth)")
            }
            provider = named
            rest = rest[..<at]
        }
        var count = 1
        if let star = rest.lastIndex(of: "*") {
            guard let number = Int(rest[rest.index(after: star)...]), (1...1_000_000).contains(number) else {
                throw Problem(description: "\(text): the count after * must be a number from 1 to 1000000")
            }
            count = number
            rest = rest[..<star]
        }
        var value: Substring?
        if let equals = rest.firstIndex(of: "=") {
            value = rest[rest.index(after: equals)...]
            rest = rest[..<equals]
        }
        func number(_ range: ClosedRange<Int>, _ what: String) throws -> Int? {
            guard let value else { return nil }
            guard let number = Int(value), range.contains(number) else {
                throw Problem(description: "\(text): \(rest)'s value must be \(what) from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        func none(_ fault: Fault) throws -> Fault {
            guard value == nil else { throw Problem(description: "\(text): \(rest) takes no value") }
            return fault
        }
        let fault: Fault
        switch rest {
        case "500": fault = try none(.status500)
        case "503": fault = .status503(retryAfter: try number(0...86_400, "seconds"))
        case "429": fault = .tooManyRequests(retryAfter: try number(0...86_400, "seconds"))
        case "413": fault = try none(.payloadTooLarge)
        case "expired-provider-token": fault = try none(.expiredProviderToken)
        case "invalid-provider-token": fault = try none(.invalidProviderToken)
        case "fcm-third-party-auth": fault = try none(.fcmThirdPartyAuth)
        case "slow":
            guard let seconds = value.flatMap({ Double($0) }), seconds.isFinite, (0...600).contains(seconds) else {
                throw Problem(description: "\(text): slow needs =<seconds>, from 0 to 600")
            }
            fault = .slow(seconds: seconds)
        case "drop-connection": fault = try none(.dropConnection)
        case "goaway": fault = try none(.goaway)
        case "shutdown": fault = try none(.shutdown)
        case "oauth-invalid-grant": fault = try none(.oauthInvalidGrant)
        case "oauth-server-error": fault = try none(.oauthServerError)
        case "oauth-internal-failure": fault = try none(.oauthInternalFailure)
        case "oauth-malformed-access-token": fault = try none(.oauthMalformedAccessToken)
        case "proxy-error-page": fault = .proxyErrorPage(bytes: try number(0...10_000_000, "bytes") ?? 1024)
        default:
            throw Problem(description: "\(text): \(rest.isEmpty ? "no fault named" : "\(rest) is not a fault") (faults: \(names.joined(separator: ", ")))")
        }
        // Named for a provider that has no such answer, it would use up a request answered as usual.
        if let provider {
            let tokenEndpointOnly = fault.defaultProviders == [.oauth]
            let sendOnly: [Fault] = [.payloadTooLarge, .expiredProviderToken, .invalidProviderToken, .fcmThirdPartyAuth]
            if (tokenEndpointOnly && provider != .oauth) || (provider == .oauth && sendOnly.contains(fault)) {
                throw Problem(description: "\(text): \(rest) is no answer of \(provider.rawValue)\(provider == .oauth ? " (the OAuth token endpoint)" : "")")
            }
        }
        return FaultSpec(fault: fault, count: count, provider: provider)
    }
}
