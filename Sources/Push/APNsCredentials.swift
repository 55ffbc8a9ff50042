import Crypto
import Foundation

/// What APNs token authentication needs: the `.p8` signing key, its key id, the team id, and the
/// app's bundle id (the `apns-topic`).
public struct APNsCredentials: Sendable {
    public var keyID: String
    public var teamID: String
    public var topic: String
    let privateKey: P256.Signing.PrivateKey

    /// Loads the key from a `.p8` file (PKCS#8 PEM, P-256). Errors name the setting and the file.
    public init(keyFile: String, keyID: String, teamID: String, topic: String) throws {
        guard FileManager.default.fileExists(atPath: keyFile) else {
            throw PushConfigurationError("APNS_KEY_FILE: no such file: \(keyFile)")
        }
        guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw PushConfigurationError("APNS_KEY_FILE: cannot read \(keyFile)")
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw PushConfigurationError("APNS_KEY_FILE: \(keyFile) is not a P-256 private key in PKCS#8 PEM (the .p8 file from Apple)")
        }
        try self.init(privateKey: key, keyID: keyID, teamID: teamID, topic: topic)
    }

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String, topic: String) throws {
        guard keyID.count == 10, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw PushConfigurationError("APNS_KEY_ID: must be the 10-character key id from Apple, got \(keyID.count) characters")
        }
        guard teamID.count == 10, teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw PushConfigurationError("APNS_TEAM_ID: must be the 10-character team id from Apple, got \(teamID.count) characters")
        }
        guard !topic.isEmpty, !topic.contains(where: { $0.isWhitespace }) else {
            throw PushConfigurationError("APNS_TOPIC: must be the app's bundle id, e.g. no.likeperson.app")
        }
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
    }
}

/// Mints and caches the APNs provider token (an ES256 JWT), as Apple asks: reused for about 50
/// minutes, refreshed on `ExpiredProviderToken`, and never more often than every 20 minutes
/// (`TooManyProviderTokenUpdates`). One per key (the fact sheet: one token per team and key, minted behind
/// a lock): push-deliver's workers share it (`PushSettings.apnsTokens`), so its threads send one token, not
/// one each; and with a store (`share(through:)`, migration 0021) every process that sends with the key
/// shares it too: a process finds the token in force there and mints only when there is none it can use.
public final class APNsTokenFactory: @unchecked Sendable {
    private let lock = NSLock()
    public let credentials: APNsCredentials
    /// Reuse a token this long before minting a new one.
    public var lifetime: TimeInterval = 50 * 60
    /// Never mint twice within this.
    public var refreshFloor: TimeInterval = 20 * 60
    private let clock: () -> Date
    private var current: (token: String, issuedAt: Date)?
    /// How many tokens this factory has minted (tests check that one is reused).
    public private(set) var minted = 0
    /// Where the processes sending with this key share the token in force; nil: this process's own.
    private var store: (any APNsTokenStore)?
    private let seal: APNsTokenSeal

    public init(credentials: APNsCredentials, clock: @escaping () -> Date = Date.init) {
        self.credentials = credentials
        self.clock = clock
        seal = APNsTokenSeal(credentials: credentials)
    }

    /// Shares the token in force through `store` from now on (before the first `token()`, so that even the
    /// first is the one in force).
    public func share(through store: any APNsTokenStore) {
        lock.withLock { self.store = store }
    }

    /// The bearer token to send now.
    public func token() -> String {
        lock.withLock {
            let now = clock()
            if let current, now.timeIntervalSince(current.issuedAt) < lifetime { return current.token }
            return fromStore(now, expired: nil) ?? mint(now)
        }
    }

    /// After APNs answered `ExpiredProviderToken` to `expired`: the token in force if another user of this
    /// factory (or, with a store, another process) already replaced it, else a fresh one if the floor
    /// allows, else nil (a token younger than 20 minutes called expired means the clock is off: a
    /// configuration problem).
    public func refreshAfterExpiry(of expired: String? = nil) -> String? {
        lock.withLock {
            let now = clock()
            if let current, let expired, current.token != expired { return current.token }
            if let current, now.timeIntervalSince(current.issuedAt) < refreshFloor { return nil }
            return fromStore(now, expired: expired ?? current?.token) ?? mint(now)
        }
    }

    /// With a store: the token in force there when this key sealed it, it is younger than `lifetime` and it
    /// is not `expired`; else a fresh one put there in place of what was read, or the one another process
    /// put there first. Nil without a store, or when the store failed before a token was minted (its own
    /// log says why; this process then sends a token of its own).
    private func fromStore(_ now: Date, expired: String?) -> String? {
        guard let store else { return nil }
        var fresh: String?
        do {
            let stored = try store.load(teamID: credentials.teamID, keyID: credentials.keyID)
            if let stored, let token = usable(stored, now: now, expired: expired) { return adopt(token, stored) }
            let token = mint(now)
            fresh = token
            guard let inForce = try store.replace(stored, with: seal.seal(token, issuedAt: Int(current!.issuedAt.timeIntervalSince1970))),
                  let theirs = usable(inForce, now: now, expired: expired) else { return token }
            return adopt(theirs, inForce)
        } catch {
            return fresh
        }
    }

    private func usable(_ stored: SealedAPNsToken, now: Date, expired: String?) -> String? {
        guard let token = seal.open(stored), token != expired else { return nil }
        let age = now.timeIntervalSince1970 - Double(stored.issuedAt)
        // A minute ahead is another host's clock; APNs refuses a token from the future or older than an hour.
        return age > -60 && age < lifetime ? token : nil
    }

    private func adopt(_ token: String, _ stored: SealedAPNsToken) -> String {
        current = (token, Date(timeIntervalSince1970: TimeInterval(stored.issuedAt)))
        return token
    }

    private func mint(_ now: Date) -> String {
        let issuedAt = Int(now.timeIntervalSince1970)
        let header = #"{"alg":"ES256","kid":"\#(credentials.keyID)"}"#
        let claims = #"{"iss":"\#(credentials.teamID)","iat":\#(issuedAt)}"#
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        // ES256 in a JWT is the raw 64-byte R‖S, not DER (RFC 7518 §3.4).
        let signature = try! credentials.privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation
        let token = signingInput + "." + Base64URL.encode(signature)
        current = (token, Date(timeIntervalSince1970: TimeInterval(issuedAt)))
        minted += 1
        return token
    }
}
