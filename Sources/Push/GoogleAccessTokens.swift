import Foundation
import HTTP2

/// OAuth2 access tokens for FCM from a service account (RFC 7523 JWT bearer grant), cached until
/// shortly before they expire. Uses its own HTTP/2 client, so it can be called between sends. One per
/// process and account (the fact sheet: one OAuth token shared across all connections): push-deliver's
/// workers share it (`PushSettings.fcmTokens`), so a fetch or a refresh after 401 made by one worker serves
/// the others. One fetch at a time, made outside the lock. The next token is fetched ahead of expiry on a
/// thread of its own, while every caller goes on sending with the one in force: a caller's thread is a send
/// loop with answers in flight, and a slow token endpoint held it (libcurl then timed out answers that had
/// arrived, and those pushes went out twice). Only a caller with no valid token waits for a fetch.
public final class GoogleAccessTokens: @unchecked Sendable {
    /// Guards the state below; signalled when a fetch ends.
    private let condition = NSCondition()
    public let account: GoogleServiceAccount
    /// Refresh this long before expiry (google-auth uses about 3¾ minutes).
    public var refreshMargin: TimeInterval = 5 * 60
    /// Used by the one fetch in progress only.
    private let client: HTTP2Client
    private let clock: () -> Date
    /// The token in force, when it expires, and when to fetch the next (`refreshMargin` before expiry, or
    /// half way for a token that lives less than twice that).
    private var current: (token: String, expiresAt: Date, refreshAt: Date)?
    /// A fetch is in progress (by one caller, outside the lock).
    private var fetching = false
    public private(set) var fetched = 0

    public init(account: GoogleServiceAccount, http: HTTP2Client.Configuration, clock: @escaping () -> Date = Date.init) throws {
        self.account = account
        var configuration = http
        configuration.window = 1
        self.client = try HTTP2Client(configuration)
        self.clock = clock
    }

    /// After a failed fetch, how long `token()` waits before asking the endpoint again: every push asks for a
    /// token, and a blocking request per push to an endpoint that is down would stall the run.
    public var quietAfterFailure: TimeInterval = 30
    private var lastFailure: (at: Date, error: PushOutcomeError)?

    /// A valid access token, fetched if there is none (if that fails, the error), the next one fetched in the
    /// background when this one is about to expire. Within `quietAfterFailure` of a failed fetch it asks no
    /// one. While a fetch is in progress, the token in force is returned, or, with none, the fetch is waited for.
    public func token() throws(PushOutcomeError) -> String {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let now = clock()
            if let current, now < current.refreshAt { return current.token }
            if let current, current.expiresAt > now, fetching { return current.token }
            if let failure = lastFailure, now.timeIntervalSince(failure.at) < quietAfterFailure {
                if let current, current.expiresAt > now { return current.token }
                throw failure.error
            }
            if let current, current.expiresAt > now {
                fetchInBackground()
                return current.token
            }
            if fetching { condition.wait(); continue }
            return try fetch()
        }
    }

    /// Drops the cached token and fetches a new one (after FCM answered 401 to `rejected`), unless another
    /// user of these tokens already did (the token in force is no longer `rejected`: that one is returned) or
    /// is fetching one (it is waited for). Within `quietAfterFailure` of a failed fetch it asks no one and
    /// throws that failure again: a window of 401s must not turn into a blocking request each to an endpoint
    /// that just failed.
    public func refresh(replacing rejected: String? = nil) throws(PushOutcomeError) -> String {
        condition.lock()
        defer { condition.unlock() }
        while fetching { condition.wait() }
        if let current, let rejected, current.token != rejected { return current.token }
        current = nil
        if let failure = lastFailure, clock().timeIntervalSince(failure.at) < quietAfterFailure { throw failure.error }
        return try fetch()
    }

    private typealias Fetched = Result<(token: String, expiresAt: Date, refreshAt: Date), PushOutcomeError>

    /// Fetches a token with the lock released (other callers meanwhile see `fetching`), and records what came
    /// of it. Called with the lock held, and no fetch in progress.
    private func fetch() throws(PushOutcomeError) -> String {
        fetching = true
        condition.unlock()
        let result = fetchResult()
        condition.lock()
        return try record(result)
    }

    /// Starts fetching the next token on a thread of its own. Called with the lock held, and no fetch in progress.
    private func fetchInBackground() {
        fetching = true
        Thread { [self] in
            let result = fetchResult()
            condition.lock()
            _ = try? record(result)
            condition.unlock()
        }.start()
    }

    private func fetchResult() -> Fetched {
        do throws(PushOutcomeError) { return .success(try fetchNow()) } catch { return .failure(error) }
    }

    /// Ends the fetch in progress with `result`. Called with the lock held.
    private func record(_ result: Fetched) throws(PushOutcomeError) -> String {
        fetching = false
        fetched += 1
        condition.broadcast()
        switch result {
        case .success(let fresh):
            current = fresh
            lastFailure = nil
            return fresh.token
        case .failure(let error):
            lastFailure = (clock(), error)
            throw error
        }
    }

    /// A bearer token's characters (RFC 6750 b64token): letters, digits, - . _ ~ + / and trailing =.
    static let tokenCharacters: Set<UInt8> = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=".utf8))

    /// One request to the token endpoint; touches no shared state.
    private func fetchNow() throws(PushOutcomeError) -> (token: String, expiresAt: Date, refreshAt: Date) {
        let now = clock()
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + account.assertion(now: now)
        let request = HTTPRequest(url: account.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        let result = client.send([request])[0]
        switch result {
        case .failure(let error) where error.isOurSetup:
            // Our setting (the CA file), not an outage: no later try can help.
            throw PushOutcomeError(.credentialsBroken(reason: "OAuth token endpoint: \(error.message)"))
        case .failure(let error):
            throw PushOutcomeError(.retry(after: nil, reason: "OAuth token endpoint: \(error.message)"))
        case .success(let response):
            let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
            guard response.status == 200 else {
                let reason = ProviderText.clean("OAuth token endpoint answered \(response.status) \(json?["error"] as? String ?? ""): \(json?["error_description"] as? String ?? response.bodyText.prefix(200).description)")
                // Google's token endpoint also says a passing trouble with a 400 and one of these (google-auth
                // retries on them): no configuration to check, try later.
                let passing = ["internal_failure", "server_error", "temporarily_unavailable"].contains(json?["error"] as? String ?? "")
                if [408, 429, 500, 502, 503, 504].contains(response.status) || passing {
                    throw PushOutcomeError(.retry(after: RetryAfter.parse(response.header("retry-after")), reason: reason))
                }
                throw PushOutcomeError(.credentialsBroken(reason: reason + " (check the service-account file and the clock)"))
            }
            guard let token = json?["access_token"] as? String,
                  let expiresIn = (json?["expires_in"] as? NSNumber)?.doubleValue ?? (json?["expires_in"] as? String).flatMap(Double.init) else {
                throw PushOutcomeError(.credentialsBroken(reason: "OAuth token endpoint: the answer has no access_token or expires_in\(response.cutOffNote)"))
            }
            // It goes into every request's authorization header: a token with a line break or a space in it
            // (RFC 6750's b64token has neither) would bend the header, not authenticate.
            guard !token.isEmpty, token.utf8.allSatisfy({ $0 < 0x80 && (Self.tokenCharacters.contains($0)) }) else {
                throw PushOutcomeError(.credentialsBroken(reason: "OAuth token endpoint: the answer's access_token is not a bearer token (RFC 6750's characters only; check token_uri in the service-account file)"))
            }
            guard expiresIn.isFinite, expiresIn > 0 else {
                // A token that is already dead would be fetched again for every push.
                throw PushOutcomeError(.credentialsBroken(reason: "OAuth token endpoint: the answer's expires_in (\(expiresIn)) is not a positive number of seconds"))
            }
            return (token, now.addingTimeInterval(expiresIn), now.addingTimeInterval(max(expiresIn - refreshMargin, expiresIn / 2)))
        }
    }
}

/// An outcome thrown where a whole provider, not one message, is affected.
public struct PushOutcomeError: Error, Sendable {
    public var outcome: PushOutcome
    public init(_ outcome: PushOutcome) { self.outcome = outcome }
}
