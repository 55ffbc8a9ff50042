import Crypto
import _CryptoExtras
import FakePush
import Foundation
import TestSupport

/// A fake server on a free loopback port with throwaway credentials, driven by the real `curl`.
final class Harness: @unchecked Sendable {
    static let keyID = "ABC123DEFG"
    static let teamID = "DEF123GHIJ"
    static let topic = "no.likeperson.app"
    static let project = "demo-project"
    static let email = "push@demo-project.iam.gserviceaccount.com"
    static let firebaseScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Keys shared by every test in the process (RSA generation is slow).
    static let keys = SharedKeys()

    let server: FakePushServer
    let directory: URL
    let caPath: String
    /// Seconds added to the real clock, as the fake sees it.
    let clockOffset = ClockOffset()

    init(configure: (inout FakePushServer.Configuration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-push-test-\(UUID().uuidString)")
        let tls = try TestCertificates.make(in: directory)
        caPath = tls.caPEMPath
        var configuration = FakePushServer.Configuration(
            certificateChainPEM: tls.certificatePEM, privateKeyPEM: tls.privateKeyPEM,
            apnsKeys: [APNsKey(keyID: Self.keyID, teamID: Self.teamID, publicKeyPEM: Self.keys.apnsPublicPEM)],
            apnsTopics: [Self.topic], fcmProjectID: Self.project,
            serviceAccountEmail: Self.email, serviceAccountPublicKeyPEM: Self.keys.serviceAccountPublicPEM)
        configuration.threads = 1
        let offset = clockOffset
        configuration.now = { Date().addingTimeInterval(offset.seconds) }
        configure(&configuration)
        server = try FakePushServer(configuration: configuration)
        try server.start()
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    var baseURL: String { server.baseURL }

    /// Where `request` goes: the base it names, or its service's port (Google's for FCM and OAuth, which is
    /// APNs's unless the server has a ``FakePushServer/Configuration/googlePort``).
    func url(_ request: Request) -> String {
        if let base = request.base { return base + request.path }
        let google = request.path.hasPrefix("/v1/") || request.path == "/token"
        return (google ? server.googleBaseURL : server.baseURL) + request.path
    }

    // MARK: Credentials

    /// An APNs provider token signed with the test key (raw R‖S, as Apple requires).
    func apnsJWT(issuedAt: Date = Date(), keyID: String = Harness.keyID, teamID: String = Harness.teamID,
                 iatAsString: Bool = false, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let iat = Int(issuedAt.timeIntervalSince1970)
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = iatAsString ? #"{"iss":"\#(teamID)","iat":"\#(iat)"}"# : #"{"iss":"\#(teamID)","iat":\#(iat)}"#
        let signingInput = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try (key ?? Self.keys.apnsPrivateKey).signature(for: Data(signingInput.utf8))
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// A service-account assertion (RS256) for the token endpoint.
    func assertion(issuer: String = Harness.email, audience: String? = nil, scope: String = Harness.firebaseScope,
                   issuedAt: Date = Date(), lifetime: Int = 3600, key: _RSA.Signing.PrivateKey? = nil) throws -> String {
        let iat = Int(issuedAt.timeIntervalSince1970)
        let header = #"{"alg":"RS256","typ":"JWT","kid":"0123456789abcdef"}"#
        let claims = #"{"iss":"\#(issuer)","scope":"\#(scope)","aud":"\#(audience ?? server.googleBaseURL + "/token")","iat":\#(iat),"exp":\#(iat + lifetime)}"#
        let signingInput = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try (key ?? Self.keys.serviceAccountPrivateKey).signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// Runs the OAuth flow with curl and returns the access token.
    func accessToken() throws -> String {
        let response = try curl(.oauth(assertion: try assertion()))
        guard response.status == 200, let token = response.json?["access_token"] as? String else {
            throw TestSetupError("token endpoint answered \(response.status): \(response.body)")
        }
        return token
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    // MARK: curl

    /// One request for curl to make.
    struct Request {
        var method = "POST"
        var path: String
        var headers: [(String, String)] = []
        var body: String? = nil
        var formFields: [(String, String)] = []
        /// Where to send it (`https://host:port`); nil: the port of the service its path belongs to.
        var base: String? = nil

        /// An APNs push to `token` with the usual headers.
        static func apns(_ token: String, jwt: String?, body: String = #"{"aps":{"alert":{"title":"Hi","body":"There"}}}"#,
                         headers: [(String, String)] = [("apns-push-type", "alert"), ("apns-topic", Harness.topic)]) -> Request {
            var all = headers
            if let jwt { all.insert(("authorization", "bearer \(jwt)"), at: 0) }
            return Request(path: "/3/device/\(token)", headers: all, body: body)
        }

        /// An FCM send with `body` as the JSON.
        static func fcm(_ body: String, accessToken: String?, project: String = Harness.project) -> Request {
            var headers = [("content-type", "application/json")]
            if let accessToken { headers.insert(("authorization", "Bearer \(accessToken)"), at: 0) }
            return Request(path: "/v1/projects/\(project)/messages:send", headers: headers, body: body)
        }

        /// A token request with the JWT-bearer grant.
        static func oauth(assertion: String, grantType: String = "urn:ietf:params:oauth:grant-type:jwt-bearer") -> Request {
            Request(path: "/token", formFields: [("grant_type", grantType), ("assertion", assertion)])
        }
    }

    /// What curl got back.
    struct Response {
        var exitCode: Int32
        var httpVersion: String
        var status: Int
        var headers: [(String, String)]
        var body: String
        var stderr: String

        func header(_ name: String) -> String? {
            headers.first { $0.0 == name.lowercased() }?.1
        }

        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
    }

    /// Makes one request with `curl --http2` against the fake.
    func curl(_ request: Request, extraArguments: [String] = []) throws -> Response {
        try curl([request], extraArguments: extraArguments)[0]
    }

    /// Makes several requests in one curl run (`--next`), so they share one HTTP/2 connection.
    func curl(_ requests: [Request], extraArguments: [String] = []) throws -> [Response] {
        try startCurl(requests, extraArguments: extraArguments).finish()
    }

    /// A curl run in progress.
    struct CurlRun {
        var process: ProcessRunner.Running
        var directory: URL
        var count: Int

        /// Waits for curl and reads what each request got.
        func finish() throws -> [Response] {
            let result = try process.wait(timeout: 30)
            let lines = result.stdout.split(separator: "\n").map(String.init)
            return (0..<count).map { index in
                let parts = index < lines.count ? lines[index].split(separator: " ").map(String.init) : []
                let rawHeaders = (try? String(contentsOf: directory.appendingPathComponent("h\(index)"), encoding: .utf8)) ?? ""
                let headers: [(String, String)] = rawHeaders.components(separatedBy: "\r\n").dropFirst().compactMap { line in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                return Response(
                    exitCode: result.status,
                    httpVersion: parts.first ?? "",
                    status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0,
                    headers: headers,
                    body: (try? String(contentsOf: directory.appendingPathComponent("b\(index)"), encoding: .utf8)) ?? "",
                    stderr: result.stderr)
            }
        }
    }

    /// Starts curl on `requests` (one connection, `--next`) without waiting for it.
    func startCurl(_ requests: [Request], extraArguments: [String] = []) throws -> CurlRun {
        let run = directory.appendingPathComponent("curl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        var arguments: [String] = []
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            arguments += ["-s", "--http2", "--cacert", caPath, "-X", request.method,
                          "-D", run.appendingPathComponent("h\(index)").path,
                          "-o", run.appendingPathComponent("b\(index)").path,
                          "-w", "%{http_version} %{http_code}\\n"]
            arguments += extraArguments
            for (name, value) in request.headers { arguments += ["-H", "\(name): \(value)"] }
            if let body = request.body {
                let file = run.appendingPathComponent("in\(index)")
                try Data(body.utf8).write(to: file)
                arguments += ["--data-binary", "@" + file.path]
            }
            for (name, value) in request.formFields { arguments += ["--data-urlencode", "\(name)=\(value)"] }
            arguments.append(url(request))
        }
        return CurlRun(process: try ProcessRunner.start("/usr/bin/curl", arguments), directory: run, count: requests.count)
    }
}

/// Keys made once per test process.
final class SharedKeys: Sendable {
    let apnsPrivateKey: P256.Signing.PrivateKey
    let apnsPublicPEM: String
    let serviceAccountPrivateKey: _RSA.Signing.PrivateKey
    let serviceAccountPublicPEM: String

    init() {
        let apns = TestCertificates.apnsKey()
        apnsPrivateKey = try! P256.Signing.PrivateKey(pemRepresentation: apns.pkcs8PEM)
        apnsPublicPEM = apns.publicKeyPEM
        let account = TestCertificates.serviceAccountKey()
        serviceAccountPrivateKey = try! _RSA.Signing.PrivateKey(pemRepresentation: account.privatePEM)
        serviceAccountPublicPEM = account.publicPEM
    }
}

/// A shift of the fake's clock, settable while it runs.
final class ClockOffset: @unchecked Sendable {
    private let lock = NSLock()
    private var value: TimeInterval = 0

    var seconds: TimeInterval {
        get { lock.lock(); defer { lock.unlock() }; return value }
        set { lock.lock(); value = newValue; lock.unlock() }
    }
}

/// Device tokens that look real.
enum Tokens {
    /// A 64-hex-digit APNs token, different each call.
    static func apns() -> String {
        (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// An FCM registration token of the usual shape (`<22 chars>:APA91b<134 chars>`), different each call.
    static func fcm() -> String {
        let random = (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "")
        return String(random.prefix(22)) + ":APA91b" + String(String(repeating: random, count: 3).prefix(134))
    }
}
