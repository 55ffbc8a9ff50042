import Crypto
import Foundation
import Push
import Testing
import _CryptoExtras

/// The JWTs we sign verify against the public keys, with the claims Apple and Google check.
@Suite struct CredentialTests {
    func parts(_ jwt: String) throws -> (header: [String: Any], claims: [String: Any], signingInput: Data, signature: Data) {
        let pieces = jwt.split(separator: ".")
        try #require(pieces.count == 3)
        func decode(_ s: Substring) throws -> Data {
            var b = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while b.count % 4 != 0 { b += "=" }
            return try #require(Data(base64Encoded: b))
        }
        #expect(!jwt.contains("="), "base64url without padding")
        let header = try #require(try JSONSerialization.jsonObject(with: try decode(pieces[0])) as? [String: Any])
        let claims = try #require(try JSONSerialization.jsonObject(with: try decode(pieces[1])) as? [String: Any])
        return (header, claims, Data((pieces[0] + "." + pieces[1]).utf8), try decode(pieces[2]))
    }

    @Test func apnsProviderTokenVerifiesAndIsReusedForFiftyMinutes() throws {
        let key = P256.Signing.PrivateKey()
        var now = Date(timeIntervalSince1970: 1_781_510_400)
        let factory = APNsTokenFactory(credentials: try APNsCredentials(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "no.likeperson.app"),
                                       clock: { now })
        let token = factory.token()
        let jwt = try parts(token)
        #expect(jwt.header["alg"] as? String == "ES256")
        #expect(jwt.header["kid"] as? String == "ABC123DEFG")
        #expect(jwt.claims["iss"] as? String == "DEF123GHIJ")
        #expect(jwt.claims["iat"] as? Int == 1_781_510_400)
        #expect(jwt.signature.count == 64, "raw R‖S, not DER")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: jwt.signature)
        #expect(key.publicKey.isValidSignature(signature, for: jwt.signingInput))

        // Apple refuses tokens refreshed more often than every 20 minutes: an "expired" answer
        // within them means a wrong clock, not a stale token.
        now += 5 * 60
        #expect(factory.refreshAfterExpiry() == nil)
        now += 44 * 60
        #expect(factory.token() == token)
        now += 2 * 60
        let second = factory.token()
        #expect(second != token)
        #expect(factory.minted == 2)
        now += 21 * 60
        #expect(factory.refreshAfterExpiry() != nil, "past the floor, an expired token is re-minted")
    }

    @Test func googleAssertionVerifiesWithTheServiceAccountKey() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("sa.json")
        let json: [String: Any] = ["type": "service_account", "project_id": "demo-project", "private_key_id": "k1",
                                   "private_key": key.pemRepresentation, "client_email": "push@demo-project.iam.gserviceaccount.com",
                                   "token_uri": "https://127.0.0.1:1/token"]
        try JSONSerialization.data(withJSONObject: json).write(to: file)
        let account = try GoogleServiceAccount(file: file.path)
        let jwt = try parts(account.assertion(now: Date(timeIntervalSince1970: 1_781_510_400)))
        #expect(jwt.header["alg"] as? String == "RS256")
        #expect(jwt.header["kid"] as? String == "k1")
        #expect(jwt.claims["iss"] as? String == "push@demo-project.iam.gserviceaccount.com")
        #expect(jwt.claims["aud"] as? String == "https://127.0.0.1:1/token")
        #expect(jwt.claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect((jwt.claims["exp"] as? Int ?? 0) - (jwt.claims["iat"] as? Int ?? 0) == 3600)
        #expect(jwt.claims["iat"] as? Int == 1_781_510_390, "back-dated 10 s: a clock a little ahead is not refused")
        let signature = _RSA.Signing.RSASignature(rawRepresentation: jwt.signature)
        #expect(key.publicKey.isValidSignature(signature, for: jwt.signingInput, padding: .insecurePKCS1v1_5))
    }

    @Test func badKeyFilesGetMessagesNamingTheSettingAndFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let garbage = dir.appendingPathComponent("AuthKey.p8")
        try "not a key".write(to: garbage, atomically: true, encoding: .utf8)
        #expect(throws: PushConfigurationError.self) {
            try APNsCredentials(keyFile: garbage.path, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "a.b")
        }
        do {
            _ = try APNsCredentials(keyFile: dir.appendingPathComponent("missing.p8").path, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "a.b")
            Issue.record("a missing key file was loaded")
        } catch let error as PushConfigurationError {
            #expect(error.message == "APNS_KEY_FILE: no such file: \(dir.appendingPathComponent("missing.p8").path)")
        }
        let notServiceAccount = dir.appendingPathComponent("sa.json")
        try #"{"type":"authorized_user"}"#.write(to: notServiceAccount, atomically: true, encoding: .utf8)
        do {
            _ = try GoogleServiceAccount(file: notServiceAccount.path)
            Issue.record("accepted a non-service-account file")
        } catch let error as PushConfigurationError {
            #expect(error.message.contains("FCM_SERVICE_ACCOUNT_FILE"))
            #expect(error.message.contains(#"expected "service_account""#))
        }
    }

    /// token_uri is where the signed assertion goes: only an https URL of a host, with no user or password.
    @Test(arguments: ["http://oauth2.googleapis.com/token", "https://user:pw@oauth2.googleapis.com/token", "https:///token",
                      "https://oauth2.googleapis.com/token#x", "oauth2.googleapis.com/token", "https://oauth2.googleapis.com:99999/token",
                      "https://oauth2.googleapis.com:0/token"])
    func aTokenURIThatIsNoHTTPSURLOfAHostIsRefused(uri: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("sa.json")
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let json: [String: Any] = ["type": "service_account", "project_id": "demo-project", "private_key": key.pemRepresentation,
                                   "client_email": "push@demo-project.iam.gserviceaccount.com", "token_uri": uri]
        try JSONSerialization.data(withJSONObject: json).write(to: file)
        #expect {
            _ = try GoogleServiceAccount(file: file.path)
        } throws: { error in
            (error as? PushConfigurationError)?.message.contains("\"token_uri\" must be an https URL of a host") == true
        }
    }

    /// A key pasted in place of its file's path (a well-known habit: the service account's JSON in
    /// GOOGLE_APPLICATION_CREDENTIALS, the .p8's text in APNS_KEY_FILE) was echoed whole in "no such file:
    /// …", on to the journal, the summary, `job_runs.error` and `why`. The message gives its length alone.
    @Test func aKeyPastedInPlaceOfItsPathIsNeverEchoed() throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        do {
            _ = try APNsCredentials(keyFile: pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "a.b")
            Issue.record("a key's text was taken for a file")
        } catch let error as PushConfigurationError {
            #expect(!error.message.contains("PRIVATE KEY") && !error.message.contains(String(pem.split(separator: "\n")[1].prefix(20))), "\(error.message)")
            #expect(error.message.hasPrefix("APNS_KEY_FILE: no such file: (a value of \(pem.utf8.count) bytes that is no absolute or ./ path, not shown"), "\(error.message)")
        }
        // The service account's JSON as Google hands it out, with a key made here.
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        let keyLine = String(rsa.split(separator: "\n")[1].prefix(20))
        let json = String(decoding: try JSONSerialization.data(withJSONObject: ["type": "service_account", "project_id": "p", "private_key": rsa]), as: UTF8.self)
        do {
            _ = try GoogleServiceAccount(file: json, setting: "GOOGLE_APPLICATION_CREDENTIALS")
            Issue.record("a service account's JSON was taken for a file")
        } catch let error as PushConfigurationError {
            #expect(!error.message.contains(keyLine) && !error.message.contains("project_id"), "\(error.message)")
            #expect(error.message.hasPrefix("GOOGLE_APPLICATION_CREDENTIALS: no such file: (a value of"), "\(error.message)")
        }
        // Without its PEM armour: base64 alone.
        let bare = pem.split(separator: "\n").dropFirst().dropLast().joined()
        do {
            _ = try APNsCredentials(keyFile: bare, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "a.b")
            Issue.record("a key's base64 was taken for a file")
        } catch let error as PushConfigurationError {
            #expect(!error.message.contains(bare.prefix(20)), "\(error.message)")
        }
    }

    /// The project id goes into every FCM URL's path: one with a line break or a space made every push fail
    /// at libcurl (an attempt burned each, dead after eight) while the run exited 0.
    @Test(arguments: ["my-project\n", "my project", "../../x", "", "MyProject"])
    func aProjectIDThatIsNoProjectIDIsRefusedAtLoad(projectID: String) throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("sa.json")
        let json: [String: Any] = ["type": "service_account", "project_id": projectID, "private_key": key.pemRepresentation,
                                   "client_email": "push@demo-project.iam.gserviceaccount.com", "token_uri": "https://127.0.0.1:1/token"]
        try JSONSerialization.data(withJSONObject: json).write(to: file)
        do {
            _ = try GoogleServiceAccount(file: file.path)
            Issue.record("accepted project_id \(projectID.debugDescription)")
        } catch let error as PushConfigurationError {
            #expect(error.message.contains("FCM_SERVICE_ACCOUNT_FILE") && error.message.contains("project_id"), "\(error.message)")
        }
    }
}
