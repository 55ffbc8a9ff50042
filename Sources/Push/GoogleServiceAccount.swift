import Crypto
import Foundation
import _CryptoExtras

/// A Google service-account JSON file: what FCM HTTP v1 needs to get OAuth2 access tokens.
public struct GoogleServiceAccount: Sendable {
    public var projectID: String
    public var clientEmail: String
    public var privateKeyID: String?
    public var tokenURI: String
    let privateKey: _RSA.Signing.PrivateKey

    /// Loads and checks the file. Errors name the setting and the file, never the key.
    public init(file: String, setting: String = "FCM_SERVICE_ACCOUNT_FILE") throws {
        guard FileManager.default.fileExists(atPath: file) else {
            throw PushConfigurationError("\(setting): no such file: \(PushConfigurationError.shown(path: file))")
        }
        guard let data = FileManager.default.contents(atPath: file),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw PushConfigurationError("\(setting): \(file) is not a JSON object (a Google service-account key file)")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw PushConfigurationError("\(setting): \(file) has no \"\(name)\"")
            }
            return value
        }
        guard object["type"] as? String == "service_account" else {
            throw PushConfigurationError("\(setting): \(file): \"type\" is \(object["type"].map { "\"\($0)\"" } ?? "missing") (expected \"service_account\")")
        }
        let pem = try field("private_key")
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw PushConfigurationError("\(setting): \(file): \"private_key\" is not an RSA private key in PEM")
        }
        self.privateKey = key
        self.projectID = try field("project_id")
        // It goes into every FCM URL's path: a project id is lower-case letters, digits and hyphens (a
        // domain-scoped one, "example.com:project", also dots and a colon), nothing else.
        guard (1...100).contains(projectID.utf8.count), projectID.utf8.allSatisfy({ byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
        }) else {
            throw PushConfigurationError("\(setting): \(file): \"project_id\" is not a Google Cloud project id (lower-case letters, digits and hyphens), got \(String(projectID.prefix(100)).debugDescription)")
        }
        self.clientEmail = try field("client_email")
        self.tokenURI = try field("token_uri")
        self.privateKeyID = object["private_key_id"] as? String
        // The signed assertion goes there: an https URL of a host, with no user or password in it (as the
        // endpoint settings are checked).
        guard HTTPSURL.isUsable(tokenURI, query: true) else {
            throw PushConfigurationError("\(setting): \(file): \"token_uri\" must be an https URL of a host (a port from 1 to 65535), with no user, password or fragment")
        }
    }

    /// The signed RS256 assertion for the token endpoint (RFC 7523), valid for an hour from its (back-dated) issue.
    public func assertion(now: Date, scope: String = "https://www.googleapis.com/auth/firebase.messaging") -> String {
        var header = #"{"alg":"RS256","typ":"JWT""#
        if let privateKeyID { header += #","kid":"# + jsonString(privateKeyID) }
        header += "}"
        // Back-dated 10 s, as golang/oauth2 does "for machines whose time is not perfectly in sync": Google refuses
        // an assertion issued in its future (invalid_grant, which stops FCM for the run, every run).
        let iat = Int(now.timeIntervalSince1970) - 10
        let claims = #"{"iss":\#(jsonString(clientEmail)),"scope":\#(jsonString(scope)),"aud":\#(jsonString(tokenURI)),"iat":\#(iat),"exp":\#(iat + 3600)}"#
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        // RS256 is RSASSA-PKCS1-v1_5 with SHA-256; swift-crypto calls that padding "insecure" for new designs.
        let signature = try! privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    private func jsonString(_ value: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [value], options: [.withoutEscapingSlashes])
        return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
    }
}
