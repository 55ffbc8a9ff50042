import Foundation
import HTTP2
import JobKit
import Push
import TextCoding

/// The push configuration of a run: which providers are set up, where they are, and how hard to
/// push. Read from flags, then environment variables; anything missing or malformed is a
/// `JobFailure(.config)` naming the variable and the file.
public struct PushSettings: Sendable {
    public var apns: APNsCredentials? {
        didSet { apnsTokens = apns.map { APNsTokenFactory(credentials: $0) } }
    }
    /// The one APNs token factory of these settings: every engine made from them (push-deliver's workers)
    /// sends the same provider token.
    public private(set) var apnsTokens: APNsTokenFactory?
    public var apnsEndpoint = APNsRequestBuilder.productionEndpoint
    public var apnsSandboxEndpoint = APNsRequestBuilder.sandboxEndpoint
    /// The APNs environments pushed to (`APNS_ENVIRONMENTS`): a key Apple restricted to one environment cannot
    /// push to the other, and a token of that other environment (a development build's, in a production
    /// database) is then settled as failed, saying why, instead of stopping that environment every run.
    public var apnsEnvironments: Set<PushTarget.APNsEnvironment> = [.production, .sandbox]
    public var fcm: GoogleServiceAccount? {
        didSet { fcmTokens = nil }
    }
    /// The one set of FCM access tokens of these settings (made by `load`, dropped when `fcm` changes): every
    /// engine made from them (push-deliver's workers) sends the same OAuth token, fetched once, as the fact
    /// sheet asks.
    public private(set) var fcmTokens: GoogleAccessTokens?
    public var fcmEndpoint = FCMRequestBuilder.endpoint
    public var http = HTTP2Client.Configuration()
    public var maxAttempts = 8

    /// What the run should say about these settings without refusing them (logged once it starts).
    public var warnings: [String] = []
    /// The key files read (APNs's `.p8`, the service account's JSON).
    public var credentialFiles: [String] = []

    /// What the key files hold now (a hash of each one's bytes, through any symlink: a secret volume swaps a
    /// link, not the file): a long-lived job reads them again when this changed since it loaded them.
    public var credentialFilesNow: [String] {
        credentialFiles.map { path in
            guard let bytes = FileManager.default.contents(atPath: path) else { return "\(path): gone" }
            // Every byte (Data's own hash reads only the first 80: two PEM keys begin alike).
            var hasher = Hasher()
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            return "\(path): \(bytes.count) \(hasher.finalize())"
        }
    }

    /// True when at least one provider is configured.
    public var isConfigured: Bool { apns != nil || fcm != nil }

    public init() {}

    /// Reads the settings. `environment` is the process environment unless a test passes its own.
    public static func load(_ options: DeliveryOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PushSettings {
        func value(_ flag: String?, _ name: String) -> String? {
            if let flag, !flag.isEmpty { return flag }
            if let env = environment[name], !env.isEmpty { return env }
            return nil
        }
        var settings = PushSettings()

        let apnsValues = [("APNS_KEY_FILE", value(options.apnsKeyFile, "APNS_KEY_FILE")), ("APNS_KEY_ID", value(options.apnsKeyID, "APNS_KEY_ID")),
                          ("APNS_TEAM_ID", value(options.apnsTeamID, "APNS_TEAM_ID")), ("APNS_TOPIC", value(options.apnsTopic, "APNS_TOPIC"))]
        let given = apnsValues.filter { $0.1 != nil }
        if !given.isEmpty {
            if let missing = apnsValues.first(where: { $0.1 == nil }) {
                throw JobFailure(.config, "\(missing.0) is not set (APNs needs APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC together; \(given.map(\.0).joined(separator: ", ")) given)")
            }
            do {
                settings.apns = try APNsCredentials(keyFile: apnsValues[0].1!, keyID: apnsValues[1].1!, teamID: apnsValues[2].1!, topic: apnsValues[3].1!)
                settings.credentialFiles.append(apnsValues[0].1!)
            } catch let error as PushConfigurationError {
                throw JobFailure(.config, error.message)
            }
        }
        settings.apnsEndpoint = try endpoint(value(options.apnsEndpoint, "APNS_ENDPOINT"), name: "APNS_ENDPOINT") ?? settings.apnsEndpoint
        settings.apnsSandboxEndpoint = try endpoint(value(options.apnsSandboxEndpoint, "APNS_SANDBOX_ENDPOINT"), name: "APNS_SANDBOX_ENDPOINT") ?? settings.apnsSandboxEndpoint
        if let text = value(options.apnsEnvironments, "APNS_ENVIRONMENTS") {
            settings.apnsEnvironments = try apnsEnvironments(text)
        }

        // The message names the setting the file came from: the flag, else the variable.
        let fcmSetting = options.fcmServiceAccountFile.map({ !$0.isEmpty }) == true ? "--fcm-service-account-file"
            : environment["FCM_SERVICE_ACCOUNT_FILE"].map({ !$0.isEmpty }) == true ? "FCM_SERVICE_ACCOUNT_FILE" : "GOOGLE_APPLICATION_CREDENTIALS"
        if let file = value(options.fcmServiceAccountFile, "FCM_SERVICE_ACCOUNT_FILE") ?? value(nil, "GOOGLE_APPLICATION_CREDENTIALS") {
            do {
                settings.fcm = try GoogleServiceAccount(file: file, setting: fcmSetting)
                settings.credentialFiles.append(file)
            } catch let error as PushConfigurationError {
                throw JobFailure(.config, error.message)
            }
        }
        settings.fcmEndpoint = try endpoint(value(options.fcmEndpoint, "FCM_ENDPOINT"), name: "FCM_ENDPOINT") ?? settings.fcmEndpoint

        if let ca = value(options.pushCAFile, "PUSH_CA_FILE") {
            guard FileManager.default.isReadableFile(atPath: ca) else { throw JobFailure(.config, "PUSH_CA_FILE: no such file: \(ca)") }
            settings.http.caFile = ca
        }
        if let text = options.pushConcurrency.map(String.init) ?? environment["PUSH_CONCURRENCY"], !text.isEmpty {
            guard let n = Int(text), DeliveryOptions.concurrencies.contains(n) else { throw JobFailure(.config, "PUSH_CONCURRENCY: must be a number from 1 to 1000, got \(text)") }
            settings.http.window = n
        }
        if let text = options.pushMaxAttempts.map(String.init) ?? environment["PUSH_MAX_ATTEMPTS"], !text.isEmpty {
            guard let n = Int(text), DeliveryOptions.maxAttempts.contains(n) else { throw JobFailure(.config, "PUSH_MAX_ATTEMPTS: must be a number from 1 to 100, got \(text)") }
            settings.maxAttempts = n
        }
        if let ca = settings.http.caFile {
            // libcurl adds the file to the system's CAs: a test provider's or a proxy's CA left set is then trusted
            // for Apple's and Google's hosts too, and nothing ever fails to show it.
            var real: [String] = []
            if settings.apns != nil {
                real += [settings.apnsEndpoint, settings.apnsSandboxEndpoint].filter {
                    $0 == APNsRequestBuilder.productionEndpoint || $0 == APNsRequestBuilder.sandboxEndpoint
                }
            }
            if let account = settings.fcm {
                if settings.fcmEndpoint == FCMRequestBuilder.endpoint { real.append(settings.fcmEndpoint) }
                if (URLComponents(string: account.tokenURI)?.host ?? "").hasSuffix("googleapis.com") { real.append(account.tokenURI) }
            }
            if !real.isEmpty {
                settings.warnings.append("PUSH_CA_FILE (\(ca)) is trusted beside the system's CAs for \(real.joined(separator: ", ")): it is meant for a test provider or a TLS-inspecting proxy; unset it for Apple's and Google's own servers")
            }
        }
        if let account = settings.fcm {
            do {
                settings.fcmTokens = try GoogleAccessTokens(account: account, http: settings.http)
            } catch let error as HTTPTransportError {
                // This machine's libcurl (no HTTP/2) is the setup's to fix, not an outage to wait out.
                throw JobFailure(error.isOurSetup ? .config : .unavailable, "FCM: cannot set up the HTTP client for the OAuth token endpoint: \(error.message)")
            }
        }
        return settings
    }

    /// "production", "sandbox" or both, comma-separated.
    static func apnsEnvironments(_ text: String) throws -> Set<PushTarget.APNsEnvironment> {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let environments = names.compactMap(PushTarget.APNsEnvironment.init(rawValue:))
        guard environments.count == names.count else {
            throw JobFailure(.config, "APNS_ENVIRONMENTS: must be production, sandbox, or both comma-separated (production,sandbox), got \(JSONWriter.string(text))")
        }
        return Set(environments)
    }

    private static func endpoint(_ text: String?, name: String) throws -> String? {
        guard let text else { return nil }
        // The request paths are appended to it: no query either.
        guard HTTPSURL.isUsable(text, query: false) else {
            throw JobFailure(.config, "\(name): must be an https URL of a host (a port from 1 to 65535, no user or password, query or fragment), got \(shown(text))")
        }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// An endpoint setting as it may be shown in a message: without the user and password a URL carries, and
    /// not at all when it is no URL and may hold one.
    private static func shown(_ text: String) -> String {
        guard var components = URLComponents(string: text) else {
            return text.contains("@") ? "a value that is not a URL (not shown: it may hold a password)" : text
        }
        guard components.user != nil || components.password != nil else { return text }
        components.user = nil
        components.password = nil
        return "\(components.string ?? "?") (its user and password not shown)"
    }

    /// The providers these settings describe, ready to send.
    public func providers(clock: @escaping () -> Date = Date.init) throws -> [PushTarget.Provider: any PushProvider] {
        var providers: [PushTarget.Provider: any PushProvider] = [:]
        if let apns {
            providers[.apns] = APNsProvider(credentials: apns, productionEndpoint: apnsEndpoint, sandboxEndpoint: apnsSandboxEndpoint,
                                            clock: clock, tokens: apnsTokens)
        }
        if let fcm {
            providers[.fcm] = try FCMProvider(account: fcm, endpoint: fcmEndpoint, http: http, clock: clock, accessTokens: fcmTokens)
        }
        return providers
    }
}
