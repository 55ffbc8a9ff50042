import Foundation
import HTTP2
import TextCoding

/// What a provider's answer means for a delivery. Every answer in the fact sheet maps to one of these.
public enum PushOutcome: Sendable, Equatable {
    /// Accepted by the provider; its message id (APNs `apns-id`, FCM `name`).
    case delivered(messageID: String)
    /// Try again later: after `after` seconds if the provider said (`Retry-After`), else with backoff.
    case retry(after: TimeInterval?, reason: String)
    /// The token will never work again: retire it. `since` is APNs's 410 timestamp, if given.
    case tokenDead(reason: String, since: Date?)
    /// The message itself was refused (payload, topic…): dead, no retry.
    case rejected(reason: String)
    /// Our credentials need refreshing (APNs `ExpiredProviderToken`, FCM 401): refresh, then resend once.
    case reauthenticate(reason: String)
    /// Credentials or configuration are broken: stop sending to this provider; burn no attempts.
    case credentialsBroken(reason: String)
    /// No connection to the provider (name lookup, refused, TLS): the push never left, so it is no
    /// reason to give up on the delivery. Stop sending to this provider for the run; burn no attempts.
    /// `holdFor`: the provider named how long to stay away (FCM's project quota, at least a minute): later runs
    /// leave the endpoint's pushes waiting until then too (`endpoint_holds`).
    case unreachable(reason: String, holdFor: TimeInterval? = nil)
    /// Our setup for one APNs environment is wrong (a key restricted to the other one): that environment's
    /// pushes stop for the run, the other's go on; no attempt counted.
    case environmentRefused(reason: String)
    /// The credential the provider keeps for the token's platform is broken (FCM's `THIRD_PARTY_AUTH_ERROR`: the
    /// APNs key or Web Push key in the Firebase project): only pushes to such tokens fail, the provider's others
    /// go on. A configuration alarm; this push waits, no attempt counted.
    case platformCredentialsBroken(reason: String)

    /// What a person reads: the reason, or the message id.
    public var reason: String {
        switch self {
        case .delivered(let messageID): "delivered as \(messageID)"
        case .retry(_, let reason), .tokenDead(let reason, _), .rejected(let reason), .reauthenticate(let reason),
             .credentialsBroken(let reason), .unreachable(let reason, _), .environmentRefused(let reason),
             .platformCredentialsBroken(let reason): reason
        }
    }
}

extension PushOutcome {
    /// The same outcome with the provider's words made safe to store and to log (see ``ProviderText``).
    func cleaned() -> PushOutcome {
        switch self {
        case .delivered(let messageID): .delivered(messageID: ProviderText.clean(messageID))
        case .retry(let after, let reason): .retry(after: after, reason: ProviderText.clean(reason))
        case .tokenDead(let reason, let since): .tokenDead(reason: ProviderText.clean(reason), since: since)
        case .rejected(let reason): .rejected(reason: ProviderText.clean(reason))
        case .reauthenticate(let reason): .reauthenticate(reason: ProviderText.clean(reason))
        case .credentialsBroken(let reason): .credentialsBroken(reason: ProviderText.clean(reason))
        case .unreachable(let reason, let holdFor): .unreachable(reason: ProviderText.clean(reason), holdFor: holdFor)
        case .environmentRefused(let reason): .environmentRefused(reason: ProviderText.clean(reason))
        case .platformCredentialsBroken(let reason): .platformCredentialsBroken(reason: ProviderText.clean(reason))
        }
    }
}

/// Text that comes from a provider's answer (an APNs `reason`, an FCM error `message` or message `name`) is
/// outside input: it is stored in `deliveries` and `delivery_events` and logged. A NUL, which PostgreSQL text
/// refuses, would fail the whole batch of outcomes it is written with; a line break would forge a log line.
public enum ProviderText {
    /// The most characters kept.
    public static let longest = 500

    /// `text` cut to ``longest`` characters, its control characters and line separators made visible and harmless
    /// (`OutsideText.neutralized`).
    public static func clean(_ text: String) -> String {
        let cut = text.utf8.count <= longest ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(longest)))
        return OutsideText.neutralized(cut)
    }
}

/// Maps APNs answers to outcomes (Apple's "Handling notification responses from APNs").
public enum APNsOutcome {
    public static func classify(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        classifyAnswer(result).cleaned()
    }

    private static func classifyAnswer(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        let response: HTTPResponse
        switch result {
        case .failure(let error): return transport(error)
        case .success(let r): response = r
        }
        if response.status == 200 {
            // APNs names every push it accepts (apns-id); a 200 without one came from something else, a proxy
            // or a wrong endpoint, and the push was not delivered: counted sent, it would be lost unseen.
            guard let id = response.header("apns-id"), !id.isEmpty else {
                return .credentialsBroken(reason: "HTTP 200 without an apns-id: not an APNs answer (check APNS_ENDPOINT / APNS_SANDBOX_ENDPOINT, or a proxy in between)")
            }
            return .delivered(messageID: id)
        }
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        let retryAfter = RetryAfter.parse(response.header("retry-after"))
        guard let reason = json?["reason"] as? String else {
            // Not APNs's answer (APNs always names a reason): a proxy, a load balancer or a wrong endpoint.
            return notFromProvider(response.status, retryAfter: retryAfter,
                                   "HTTP \(response.status) with no APNs reason\(response.cutOffNote): not an APNs answer (check APNS_ENDPOINT / APNS_SANDBOX_ENDPOINT, or a proxy in between)")
        }
        switch (response.status, reason) {
        case (410, _):
            // A timestamp no APNs would send (before 2015, or more than a day ahead) is no timestamp.
            let since = (json?["timestamp"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue / 1000) }
                .flatMap { $0.timeIntervalSince1970 >= 1_420_070_400 && $0.timeIntervalSinceNow <= 86_400 ? $0 : nil }
            return .tokenDead(reason: reason, since: since)
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .tokenDead(reason: reason, since: nil)
        case (400, "IdleTimeout"), (429, "TooManyRequests"), (500, _), (502, _), (503, _), (504, _):
            return .retry(after: retryAfter, reason: reason)
        case (403, "ExpiredProviderToken"):
            return .reauthenticate(reason: reason)
        case (403, "InvalidProviderToken"), (403, "MissingProviderToken"):
            return .credentialsBroken(reason: "\(reason) (check APNS_KEY_FILE, APNS_KEY_ID and APNS_TEAM_ID: the key, its id and the team must match a key of the app's team)")
        case (400, "BadTopic"), (400, "TopicDisallowed"), (400, "MissingTopic"):
            return .credentialsBroken(reason: "\(reason) (check APNS_TOPIC: the app's bundle id, and that the key may push to it)")
        case (403, "BadEnvironmentKeyInToken"), (403, "BadEnvironmentKeyIdInToken"):
            return .environmentRefused(reason: "\(reason) (the key (APNS_KEY_FILE, APNS_KEY_ID) is restricted to the other APNs environment: use a key for both, or set APNS_ENVIRONMENTS to the one it serves, and the tokens of the other fail without stopping a run)")
        case (403, _), (429, "TooManyProviderTokenUpdates"):
            return .credentialsBroken(reason: "\(reason) (check the APNs settings: APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC)")
        case (404, "BadPath"), (405, "MethodNotAllowed"):
            // Our request line is wrong, not the message: an endpoint with a path in it, say.
            return .credentialsBroken(reason: "\(reason): the request path or method is wrong (check APNS_ENDPOINT)")
        case (400, _), (404, _), (405, _), (413, _):
            return .rejected(reason: reason)
        default:
            return response.status >= 500 ? .retry(after: retryAfter, reason: reason) : .rejected(reason: reason)
        }
    }

    /// An answer without the provider's own error body. 5xx, 408 and 429 are worth another try later;
    /// any other 4xx means our endpoint setting (or something in between) is wrong, not the message or
    /// the token: the provider stops for the run and no delivery is marked dead or burns an attempt.
    static func notFromProvider(_ status: Int, retryAfter: TimeInterval?, _ reason: String) -> PushOutcome {
        if status >= 500 || status == 408 || status == 429 { return .retry(after: retryAfter, reason: reason) }
        return .credentialsBroken(reason: reason)
    }

    static func transport(_ error: HTTPTransportError) -> PushOutcome {
        if error.isOurSetup { return .credentialsBroken(reason: error.message) }
        return error.kind == .connect ? .unreachable(reason: error.message) : .retry(after: nil, reason: error.message)
    }
}

/// Maps FCM HTTP v1 answers to outcomes, by the `FcmError` detail first, then the status
/// (what the Admin SDKs do), never by the HTTP status alone.
public enum FCMOutcome {
    public static func classify(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        classifyAnswer(result).cleaned()
    }

    private static func classifyAnswer(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        let response: HTTPResponse
        switch result {
        case .failure(let error): return APNsOutcome.transport(error)
        case .success(let r): response = r
        }
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        if response.status == 200 {
            // FCM names every message it accepts; a 200 without a name is someone else's answer.
            guard let name = json?["name"] as? String, !name.isEmpty else {
                return .credentialsBroken(reason: "HTTP 200 without a message name\(response.cutOffNote): not an FCM answer (check FCM_ENDPOINT, or a proxy in between)")
            }
            return .delivered(messageID: name)
        }
        guard let error = json?["error"] as? [String: Any] else {
            // Not Google's answer (its errors are always {"error": {...}}): a proxy or a wrong endpoint.
            return APNsOutcome.notFromProvider(response.status, retryAfter: RetryAfter.parse(response.header("retry-after")),
                                               "HTTP \(response.status) with no Google error body\(response.cutOffNote): not an FCM answer (check FCM_ENDPOINT, or a proxy in between)")
        }
        let message = error["message"] as? String ?? "HTTP \(response.status)"
        let details = error["details"] as? [[String: Any]] ?? []
        let fcmCode = details.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?["errorCode"] as? String
        let code = fcmCode ?? error["status"] as? String ?? statusName(response.status)
        let retryAfter = RetryAfter.parse(response.header("retry-after"))
        let reason = fcmCode.map { "\($0): \(message)" } ?? "\(code): \(message)"
        switch code {
        case "UNREGISTERED":
            return .tokenDead(reason: "UNREGISTERED", since: nil)
        case "SENDER_ID_MISMATCH":
            return .tokenDead(reason: "SENDER_ID_MISMATCH", since: nil)
        case "INVALID_ARGUMENT":
            // Only a complaint about the token itself retires it; anything else is our message's fault.
            let aboutToken = message.localizedCaseInsensitiveContains("registration token")
                || details.contains { (($0["fieldViolations"] as? [[String: Any]]) ?? []).contains { ($0["field"] as? String) == "message.token" } }
            return aboutToken ? .tokenDead(reason: "INVALID_ARGUMENT: invalid registration token", since: nil) : .rejected(reason: reason)
        case "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED":
            // The project's message rate (a QuotaFailure about `projects/…`): every push of the project is refused
            // until the quota refills, within the minute. Each one cost its delivery an attempt, the window kept
            // sending into the refusal, and a burst over the quota killed deliveries by the attempt. The pushes
            // stop for the run, none counted, and FCM is held for its Retry-After, at least a minute (Google's ask;
            // the next run, a minute later, sent into the quota again whatever it asked). One device's rate: that
            // delivery backs off, at least a minute.
            let subjects = details.filter { ($0["@type"] as? String)?.hasSuffix("google.rpc.QuotaFailure") == true }
                .flatMap { ($0["violations"] as? [[String: Any]]) ?? [] }.compactMap { $0["subject"] as? String }
            if subjects.contains(where: { $0.hasPrefix("projects/") }) {
                let hold = max(retryAfter ?? 60, 60)
                return .unreachable(reason: "\(reason) (the project's message quota: its pushes wait \(Int(hold)) s, no attempt counted)", holdFor: hold)
            }
            return .retry(after: max(retryAfter ?? 60, 60), reason: reason)
        case "UNAVAILABLE", "INTERNAL":
            return .retry(after: retryAfter, reason: reason)
        case "UNAUTHENTICATED":
            return .reauthenticate(reason: reason)
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR":
            // The APNs or Web Push credential in the Firebase project, for iOS and web targets only: an Android
            // token's push still goes (stopping FCM for it held every Android push, run after run).
            return .platformCredentialsBroken(reason: "\(reason) (check the APNs key or Web Push key in the Firebase project's Cloud Messaging settings: FCM's pushes to iOS and web apps wait, Android's go on)")
        case "PERMISSION_DENIED":
            return .credentialsBroken(reason: reason)
        case "NOT_FOUND":
            // Without an UNREGISTERED detail, the project or the URL is wrong, not the token.
            return .credentialsBroken(reason: "\(reason) (check the service account's project and FCM_ENDPOINT)")
        default:
            return response.status >= 500 ? .retry(after: retryAfter, reason: reason) : .rejected(reason: reason)
        }
    }

    static func statusName(_ status: Int) -> String {
        switch status {
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 409: return "CONFLICT"
        case 429: return "RESOURCE_EXHAUSTED"
        case 500: return "INTERNAL"
        case 503: return "UNAVAILABLE"
        default: return "HTTP \(status)"
        }
    }
}

/// `Retry-After`: delta seconds or an HTTP-date (RFC 9110 §10.2.3), at most a day: a provider's answer is
/// outside input, and a delivery parked for years (or a date past what PostgreSQL stores) helps nobody.
public enum RetryAfter {
    public static let longest: TimeInterval = 86_400

    public static func parse(_ value: String?, now: Date = Date()) -> TimeInterval? {
        parseUnbounded(value, now: now).map { min($0, longest) }
    }

    private static func parseUnbounded(_ value: String?, now: Date) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { return Int(value).map { TimeInterval(max(0, $0)) } ?? longest }
        if let seconds = Int(value) { return TimeInterval(max(0, seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
