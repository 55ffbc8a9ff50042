import Crypto
import _CryptoExtras
import Foundation

/// base64url without padding (RFC 7515 §2), as JWTs use it.
enum Base64URL {
    /// Decodes base64url; nil if any character is outside its alphabet (`=` padding included: a JWT's parts
    /// have none) or the length cannot be base64 (one character over a multiple of four).
    static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        guard text.utf8.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    /// Encodes without padding.
    static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A compact JWT split into its parts. Nothing in it is trusted until its signature is checked.
struct CompactJWT {
    var header: JSONValue
    var claims: JSONValue
    /// `b64url(header) "." b64url(claims)`: the bytes the signature covers.
    var signingInput: Substring
    var signature: [UInt8]

    /// Splits and decodes `token`; nil unless it is three base64url parts whose first two are JSON objects.
    init?(_ token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]),
              let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSONParser.parse(headerBytes), header.isObject,
              let claims = try? JSONParser.parse(claimBytes), claims.isObject
        else { return nil }
        self.header = header
        self.claims = claims
        self.signingInput = token[token.startIndex..<parts[1].endIndex]
        self.signature = signature
    }

    /// A NumericDate claim given as a JSON number or a numeric string (APNSwift sends `"iat":"1700000000"`).
    func numericClaim(_ name: String) -> Int64? {
        switch claims[name] {
        case .number(let text)?, .string(let text)?:
            if let integer = Int64(text) { return integer }
            if let double = Double(text), double.isFinite, abs(double) < 1e15 { return Int64(double) }
            return nil
        default:
            return nil
        }
    }
}

/// An APNs provider token whose signature checked out against a configured key.
struct APNsProviderToken: Sendable, Equatable {
    var keyID: String
    var teamID: String
    var issuedAt: Int64
}

/// The outcome of checking a provider token's format and signature (its age is checked per request).
enum APNsTokenCheck: Sendable, Equatable {
    case valid(APNsProviderToken)
    /// Unusable: malformed, not ES256, unknown `kid`/`iss`, or a bad signature. `issuedAt` is its `iat` when readable.
    case invalid(issuedAt: Int64?)
}

/// Verifies APNs provider tokens (ES256, raw R‖S signature) and remembers the verdict per token string,
/// since a client reuses one token for thousands of requests.
final class APNsTokenVerifier: Sendable {
    private struct Key: Sendable {
        var keyID: String
        var teamID: String
        var publicKey: P256.Signing.PublicKey
    }

    private let keys: [Key]
    private let cache = Locked([String: APNsTokenCheck]())
    private static let cacheLimit = 10_000

    /// Parses the configured public keys; throws naming the key that is not a P-256 public key PEM.
    init(keys: [APNsKey]) throws {
        self.keys = try keys.map { key in
            do {
                return Key(keyID: key.keyID, teamID: key.teamID,
                           publicKey: try P256.Signing.PublicKey(pemRepresentation: key.publicKeyPEM))
            } catch {
                throw FakePushError.invalidConfiguration(
                    "APNs key \(key.keyID): publicKeyPEM is not a P-256 public key PEM (\(error))")
            }
        }
    }

    /// Checks `token` (the text after `bearer `), from the cache when it was seen before.
    func check(_ token: String) -> APNsTokenCheck {
        if let cached = cache.withLock({ $0[token] }) { return cached }
        let verdict = verify(token)
        cache.withLock { cache in
            if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[token] = verdict
        }
        return verdict
    }

    private func verify(_ token: String) -> APNsTokenCheck {
        guard let jwt = CompactJWT(token) else { return .invalid(issuedAt: nil) }
        let issuedAt = jwt.numericClaim("iat")
        guard jwt.header["alg"]?.stringValue == "ES256",
              let keyID = jwt.header["kid"]?.stringValue,
              let teamID = jwt.claims["iss"]?.stringValue,
              let issuedAt,
              let key = keys.first(where: { $0.keyID == keyID && $0.teamID == teamID }),
              jwt.signature.count == 64,  // raw R‖S, never DER
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jwt.signature),
              key.publicKey.isValidSignature(signature, for: Data(jwt.signingInput.utf8))
        else { return .invalid(issuedAt: issuedAt) }
        return .valid(APNsProviderToken(keyID: keyID, teamID: teamID, issuedAt: issuedAt))
    }
}

/// A Google service-account assertion (RS256) whose signature checked out; its claims still need checking.
struct ServiceAccountAssertion: Sendable {
    var issuer: String?
    var audience: String?
    var scope: String?
    var issuedAt: Int64?
    var expiresAt: Int64?
}

/// Verifies the RS256 (RSASSA-PKCS1-v1_5 with SHA-256) assertions a service account signs for `POST /token`.
final class ServiceAccountVerifier: Sendable {
    private let publicKey: _RSA.Signing.PublicKey?

    /// Parses the service account's public key; an empty PEM disables OAuth (every assertion fails).
    init(publicKeyPEM: String) throws {
        if publicKeyPEM.isEmpty {
            publicKey = nil
            return
        }
        do {
            publicKey = try _RSA.Signing.PublicKey(pemRepresentation: publicKeyPEM)
        } catch {
            throw FakePushError.invalidConfiguration(
                "serviceAccountPublicKeyPEM is not an RSA public key PEM of 2048 bits or more (\(error))")
        }
    }

    /// The assertion's claims if it is an RS256 JWT signed by the configured key, else nil.
    func verify(_ assertion: String) -> ServiceAccountAssertion? {
        guard let publicKey,
              let jwt = CompactJWT(assertion),
              jwt.header["alg"]?.stringValue == "RS256",
              publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: jwt.signature),
                                         for: Data(jwt.signingInput.utf8), padding: .insecurePKCS1v1_5)
        else { return nil }
        return ServiceAccountAssertion(
            issuer: jwt.claims["iss"]?.stringValue,
            audience: jwt.claims["aud"]?.stringValue,
            scope: jwt.claims["scope"]?.stringValue,
            issuedAt: jwt.numericClaim("iat"),
            expiresAt: jwt.numericClaim("exp"))
    }
}
