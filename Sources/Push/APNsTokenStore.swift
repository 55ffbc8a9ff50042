import Crypto
import Foundation

/// An APNs provider token as the processes that send with one key share it: sealed, so whoever can read
/// where it is kept cannot send with it (`APNsTokenSeal`).
public struct SealedAPNsToken: Sendable, Equatable {
    public var teamID: String
    public var keyID: String
    /// The token's `iat`, whole seconds.
    public var issuedAt: Int
    public var sealed: Data

    public init(teamID: String, keyID: String, issuedAt: Int, sealed: Data) {
        self.teamID = teamID
        self.keyID = keyID
        self.issuedAt = issuedAt
        self.sealed = sealed
    }
}

/// Where every process that sends with one APNs key finds the token in force (`PostgresAPNsTokenStore`,
/// migration 0021), so the key shows APNs one token at a time, not one per process: a new token more
/// often than every 20 minutes is `TooManyProviderTokenUpdates`.
public protocol APNsTokenStore: AnyObject, Sendable {
    /// The token stored for this team and key, if any, with its age in seconds by the store's clock (one
    /// clock for every host, whatever theirs say).
    func load(teamID: String, keyID: String) throws -> (token: SealedAPNsToken, age: TimeInterval)?
    /// Stores `new` if what is stored is still `expected` (nil: nothing is stored), and returns what is
    /// stored afterwards, with its age: `new`, or the token another process stored first (nil if none).
    func replace(_ expected: SealedAPNsToken?, with new: SealedAPNsToken) throws -> (token: SealedAPNsToken, age: TimeInterval)?
}

/// Seals a provider token with AES-GCM under a key derived from the APNs signing key (HKDF-SHA256), bound
/// to the team, key id and issue time: only a holder of the `.p8` key, who can mint tokens anyway, can open it.
public struct APNsTokenSeal: Sendable {
    private let key: SymmetricKey
    public let teamID: String
    public let keyID: String

    public init(credentials: APNsCredentials) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: credentials.privateKey.rawRepresentation),
                                     salt: Data("mentor-push".utf8), info: Data("apns provider token v1".utf8), outputByteCount: 32)
        teamID = credentials.teamID
        keyID = credentials.keyID
    }

    private func context(_ issuedAt: Int) -> Data { Data("\(teamID).\(keyID).\(issuedAt)".utf8) }

    public func seal(_ token: String, issuedAt: Int) -> SealedAPNsToken {
        // Sealing with a fresh random nonce cannot fail for a 32-byte key.
        let box = try! AES.GCM.seal(Data(token.utf8), using: key, authenticating: context(issuedAt))
        return SealedAPNsToken(teamID: teamID, keyID: keyID, issuedAt: issuedAt, sealed: box.combined!)
    }

    /// The token, or nil when `stored` was not sealed by this key for this team, key id and issue time
    /// (another key's, damaged, or moved to another row).
    public func open(_ stored: SealedAPNsToken) -> String? {
        guard stored.teamID == teamID, stored.keyID == keyID,
              let box = try? AES.GCM.SealedBox(combined: stored.sealed),
              let plain = try? AES.GCM.open(box, using: key, authenticating: context(stored.issuedAt)) else { return nil }
        return String(data: plain, encoding: .utf8)
    }
}
