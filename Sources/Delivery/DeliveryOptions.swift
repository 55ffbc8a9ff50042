import ArgumentParser

/// Push settings as flags. Each flag has an environment variable of the same meaning; the flag wins.
public struct DeliveryOptions: ParsableArguments, Sendable {
    @Option(name: .long, help: ArgumentHelp("APNs signing key (.p8). Env: APNS_KEY_FILE.", valueName: "path"))
    public var apnsKeyFile: String?
    @Option(name: .long, help: ArgumentHelp("APNs key id (10 characters). Env: APNS_KEY_ID.", valueName: "id"))
    public var apnsKeyID: String?
    @Option(name: .long, help: ArgumentHelp("Apple team id (10 characters). Env: APNS_TEAM_ID.", valueName: "id"))
    public var apnsTeamID: String?
    @Option(name: .long, help: ArgumentHelp("The app's bundle id, sent as apns-topic. Env: APNS_TOPIC.", valueName: "bundle-id"))
    public var apnsTopic: String?
    @Option(name: .long, help: ArgumentHelp("APNs production endpoint. Env: APNS_ENDPOINT. Default https://api.push.apple.com.", valueName: "url"))
    public var apnsEndpoint: String?
    @Option(name: .long, help: ArgumentHelp("APNs sandbox endpoint. Env: APNS_SANDBOX_ENDPOINT. Default https://api.sandbox.push.apple.com.", valueName: "url"))
    public var apnsSandboxEndpoint: String?
    @Option(name: .long, help: ArgumentHelp("The APNs environments the key serves: production, sandbox, or both (comma-separated). Env: APNS_ENVIRONMENTS. Default both.", valueName: "list"))
    public var apnsEnvironments: String?
    @Option(name: .long, help: ArgumentHelp("FCM service-account JSON. Env: FCM_SERVICE_ACCOUNT_FILE, else GOOGLE_APPLICATION_CREDENTIALS.", valueName: "path"))
    public var fcmServiceAccountFile: String?
    @Option(name: .long, help: ArgumentHelp("FCM endpoint. Env: FCM_ENDPOINT. Default https://fcm.googleapis.com.", valueName: "url"))
    public var fcmEndpoint: String?
    @Option(name: .long, help: ArgumentHelp("Extra CA bundle (PEM) to trust, for private or test setups. Env: PUSH_CA_FILE.", valueName: "path"))
    public var pushCAFile: String?
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Requests in flight per connection. Env: PUSH_CONCURRENCY. Default 100.", valueName: "n"))
    public var pushConcurrency: Int?
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Attempts before a delivery is dead. Env: PUSH_MAX_ATTEMPTS. Default 8.", valueName: "n"))
    public var pushMaxAttempts: Int?

    public init() {}

    /// A flag given empty (`--apns-key-file "$KEY"` with `KEY` unset) is a mistake, not "use the environment".
    public func validate() throws {
        let flags: [(String, String?)] = [
            ("--apns-key-file", apnsKeyFile), ("--apns-key-id", apnsKeyID), ("--apns-team-id", apnsTeamID), ("--apns-topic", apnsTopic),
            ("--apns-endpoint", apnsEndpoint), ("--apns-sandbox-endpoint", apnsSandboxEndpoint), ("--apns-environments", apnsEnvironments),
            ("--fcm-service-account-file", fcmServiceAccountFile), ("--fcm-endpoint", fcmEndpoint), ("--push-ca-file", pushCAFile),
        ]
        for (flag, value) in flags where value?.trimmingCharacters(in: .whitespaces).isEmpty == true {
            throw ValidationError("\(flag) is empty: give a value, or leave the flag out to use the environment")
        }
        // A bad flag is a usage error (64), named as the flag; the same value from the environment is a
        // configuration error (78, `PushSettings.load`).
        if let n = pushConcurrency, !DeliveryOptions.concurrencies.contains(n) {
            throw ValidationError("--push-concurrency must be from 1 to 1000, got \(n)")
        }
        if let n = pushMaxAttempts, !DeliveryOptions.maxAttempts.contains(n) {
            throw ValidationError("--push-max-attempts must be from 1 to 100, got \(n)")
        }
    }

    static let concurrencies = 1...1000
    static let maxAttempts = 1...100
}
