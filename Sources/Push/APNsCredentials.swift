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
            throw PushConfigurationError("APNS_KEY_FILE: no such file: \(PushConfigurationError.shown(path: keyFile))")
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
/// shares it too: a process takes the token in force there and mints only when there is none it can use.
///
/// A process keeps the token it sends for at least 20 minutes (APNs refuses a new token on a connection
/// sooner): it takes a stored token only while it is younger than 30 minutes (`lifetime - refreshFloor`),
/// so it can keep it until 50. Ages of stored tokens are the store's (one clock for every host).
public final class APNsTokenFactory: @unchecked Sendable {
    private let lock = NSLock()
    public let credentials: APNsCredentials
    /// Reuse a token this long before minting a new one.
    public var lifetime: TimeInterval = 50 * 60
    /// Never mint twice within this, and never send a new token on a connection sooner.
    public var refreshFloor: TimeInterval = 20 * 60
    private let clock: () -> Date
    /// The token sent, and when it was issued on this process's clock.
    private var current: (token: String, issuedAt: Date)?
    /// How many tokens this factory has minted (tests check that one is reused).
    public private(set) var minted = 0
    /// Where the processes sending with this key share the token in force; nil: this process's own.
    private var store: (any APNsTokenStore)?
    /// A refresh through the store is under way (outside the lock): the others send the current token meanwhile.
    private var refreshing = false
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
        lock.lock()
        let now = clock()
        if let current, now.timeIntervalSince(current.issuedAt) < lifetime {
            lock.unlock()
            return current.token
        }
        guard let store else {
            defer { lock.unlock() }
            return install(mint(now))
        }
        let (lifetime, takeUpBelow) = (self.lifetime, self.lifetime - refreshFloor)
        guard let current else {
            // The first token, before any push goes out: whoever else asks waits for it.
            defer { lock.unlock() }
            return install(fromStore(store, now: now, expired: nil, takeUpBelow: takeUpBelow, lifetime: lifetime, mayMint: true) ?? mint(now))
        }
        // Past its 50 minutes the current token still has 10 to live: one caller looks in the store, outside
        // the lock (a database round trip), while the others go on sending the current one.
        if refreshing {
            lock.unlock()
            return current.token
        }
        refreshing = true
        lock.unlock()
        let next = fromStore(store, now: now, expired: nil, takeUpBelow: takeUpBelow, lifetime: lifetime, mayMint: true)
        return lock.withLock {
            refreshing = false
            // Replaced meanwhile (after ExpiredProviderToken): that one stays, or the providers would switch twice.
            if let replaced = self.current, replaced.token != current.token { return replaced.token }
            return install(next ?? mint(now))
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
            // A replacement already stored is taken even within the floor; a new one is minted only past it.
            let floorPassed = current.map { now.timeIntervalSince($0.issuedAt) >= refreshFloor } ?? true
            if let store, let issued = fromStore(store, now: now, expired: expired ?? current?.token,
                                                 takeUpBelow: lifetime - refreshFloor, lifetime: lifetime, mayMint: floorPassed) {
                return install(issued)
            }
            return floorPassed ? install(mint(now)) : nil
        }
    }

    /// A token and when it was issued, on this process's clock.
    private typealias Issued = (token: String, issuedAt: Date, mintedHere: Bool)

    /// Through the store: the token in force there when this key sealed it, it is not `expired` and it is
    /// younger than `takeUpBelow` by the store's clock; else (`mayMint`) a fresh one put there in place of
    /// what was read, or the one another process put there first. Nil when there is none to take and
    /// minting is not allowed, or when the store failed before a token was minted (its own log says why;
    /// this process then sends a token of its own). Touches no state of the factory.
    private func fromStore(_ store: any APNsTokenStore, now: Date, expired: String?, takeUpBelow: TimeInterval,
                           lifetime: TimeInterval, mayMint: Bool) -> Issued? {
        var fresh: Issued?
        do {
            let stored = try store.load(teamID: credentials.teamID, keyID: credentials.keyID)
            if let stored, let token = seal.open(stored.token), token != expired, stored.age < takeUpBelow {
                return (token, now - max(0, stored.age), false)
            }
            guard mayMint else { return nil }
            let mine = mint(now)
            fresh = mine
            let sealed = seal.seal(mine.token, issuedAt: Int(mine.issuedAt.timeIntervalSince1970))
            guard let inForce = try store.replace(stored?.token, with: sealed) else { return mine }
            if inForce.token == sealed { return (mine.token, now - max(0, inForce.age), true) } // aged by the store's clock too
            if let theirs = seal.open(inForce.token), theirs != expired, inForce.age < lifetime {
                // Another process stored its own first (just now): send that one, not ours.
                return (theirs, now - max(0, inForce.age), true)
            }
            return mine
        } catch {
            return fresh
        }
    }

    private func mint(_ now: Date) -> Issued {
        let issuedAt = Int(now.timeIntervalSince1970)
        return (sign(issuedAt: issuedAt), Date(timeIntervalSince1970: TimeInterval(issuedAt)), true)
    }

    /// Makes `issued` the token in force for this process. Called with the lock held.
    private func install(_ issued: Issued) -> String {
        current = (issued.token, issued.issuedAt)
        if issued.mintedHere { minted += 1 }
        return issued.token
    }

    private func sign(issuedAt: Int) -> String {
        let header = #"{"alg":"ES256","kid":"\#(credentials.keyID)"}"#
        let claims = #"{"iss":"\#(credentials.teamID)","iat":\#(issuedAt)}"#
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        // ES256 in a JWT is the raw 64-byte R‖S, not DER (RFC 7518 §3.4).
        let signature = try! credentials.privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation
        return signingInput + "." + Base64URL.encode(signature)
    }
}
