import ArgumentParser
import FakePush
import Foundation

/// Runs the fake APNs + FCM + OAuth server for demos and benchmarks until SIGINT or SIGTERM.
@main
struct FakePushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fake-push",
        abstract: "A local fake APNs, FCM HTTP v1 and Google OAuth token server (TLS + HTTP/2 on one port, or two with --google-port).",
        discussion: """
            Routes POST /3/device/{token} (APNs), POST /v1/projects/{project}/messages:send (FCM) and \
            POST /token (OAuth). Prints "listening on https://<host>:<port>" when ready (with --google-port, a \
            second line: "FCM and OAuth listening on https://<host>:<port>"). \
            Configuration errors exit 78, a port that cannot be bound 69.
            """)

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8443
    @Option(name: .customLong("google-port"), help: "Serve FCM and OAuth on this port of their own, APNs alone on --port, as the real hosts are (0 picks a free one).")
    var googlePort: Int?
    @Option(help: "Server certificate chain (PEM).") var cert: String
    @Option(help: "Server private key (PEM).") var key: String
    @Option(name: .customLong("apns-key-id"), help: "APNs Key ID (the JWT's kid).") var apnsKeyID: String?
    @Option(name: .customLong("apns-team-id"), help: "APNs Team ID (the JWT's iss).") var apnsTeamID: String?
    @Option(name: .customLong("apns-public-key"), help: "APNs key: its public key PEM, or the .p8 itself.")
    var apnsPublicKey: String?
    @Option(name: .customLong("topic"), help: "Allowed bundle ID (repeatable).") var topics: [String] = []
    @Option(name: .customLong("fcm-project"), help: "Firebase project ID.") var fcmProject = "demo-project"
    @Option(help: "The service account's client_email.") var serviceAccountEmail: String?
    @Option(help: "Service-account key: public key PEM, private key PEM, or the service-account JSON file.")
    var serviceAccountPublicKey: String?
    @Option(help: "Seconds an OAuth access token lives.") var oauthTokenLifetime = 3599
    @Option(help: "Event-loop threads (default: one per core).") var threads: Int?
    @Flag(help: "Answer unknown tokens 400 BadDeviceToken / 404 UNREGISTERED instead of accepting well-formed ones.")
    var strictTokens = false
    @Flag(name: .customLong("no-record"), help: "Count requests without keeping them (benchmarks).") var noRecord = false
    @Option(help: ArgumentHelp("Answer every APNs and FCM request after this many milliseconds (a real provider's round trip).", valueName: "ms"))
    var latency: Double = 0
    @Option(name: .customLong("initial-streams"), help: ArgumentHelp("SETTINGS_MAX_CONCURRENT_STREAMS of a new connection until its first request shows the service: 1 as APNs (default), or 'widest' for clients that cannot start with one stream (h2load in benchmarks).", valueName: "n|widest"))
    var initialStreams = "1"
    @Flag(name: .customLong("print"), help: "Print each accepted push as one line, like a phone would show it.")
    var printPushes = false
    @Option(name: .customLong("fault"), help: ArgumentHelp(
        "Answer the next requests with a provider's failure (repeatable): NAME[=VALUE][*COUNT][@PROVIDER], e.g. 503=120*5@apns, 429*3@fcm, slow=2, goaway. Faults: \(FaultSpec.names.joined(separator: ", ")). Without @, a fault hits the providers it is for (status codes: APNs and FCM sends). Each request takes the oldest fault left for its provider.",
        valueName: "fault"))
    var faults: [String] = []

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be from 0 to 65535 (0 picks a free one)") }
        if let googlePort {
            guard (0...65_535).contains(googlePort) else { throw ValidationError("--google-port must be from 0 to 65535 (0 picks a free one)") }
            guard googlePort != port || port == 0 else { throw ValidationError("--google-port must differ from --port") }
        }
        if let threads, !(1...64).contains(threads) { throw ValidationError("--threads must be from 1 to 64") }
        guard latency.isFinite && (0...60_000).contains(latency) else { throw ValidationError("--latency must be from 0 to 60000 milliseconds") }
        guard (0...86_400).contains(oauthTokenLifetime) else { throw ValidationError("--oauth-token-lifetime must be from 0 to 86400 seconds") }
        guard initialStreams == "widest" || Int(initialStreams).map({ (1...10_000).contains($0) }) == true else {
            throw ValidationError("--initial-streams must be a number from 1 to 10000, or widest")
        }
        for fault in faults {
            do { _ = try FaultSpec.parse(fault) } catch { throw ValidationError("--fault \(error)") }
        }
    }

    func run() throws {
        let configuration: FakePushServer.Configuration
        do {
            configuration = try makeConfiguration()
        } catch {
            FileHandle.standardError.write(Data("fake-push: \(error)\n".utf8))
            throw ExitCode(78)
        }
        let server: FakePushServer
        do {
            server = try FakePushServer(configuration: configuration)
            try server.start()
        } catch let error as FakePushError {
            FileHandle.standardError.write(Data("fake-push: \(error)\n".utf8))
            if case .bindFailed = error { throw ExitCode(69) }
            throw ExitCode(78)
        }
        for fault in faults {
            let spec = try FaultSpec.parse(fault) // checked in `validate`
            server.inject(spec.fault, count: spec.count, provider: spec.provider)
        }
        var listening = "listening on \(server.baseURL)\n"
        if googlePort != nil { listening += "FCM and OAuth listening on \(server.googleBaseURL)\n" }
        FileHandle.standardOutput.write(Data(listening.utf8))

        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
            source.setEventHandler {
                server.stop()
                FileHandle.standardError.write(Data(
                    "fake-push: stopped after \(server.receivedCount) requests, \(server.acceptedCount) accepted\n".utf8))
                Foundation.exit(0)
            }
            source.resume()
            Self.signalSources.withLock { $0.append(source) }
        }
        dispatchMain()
    }

    /// Keeps the signal sources alive while `dispatchMain` runs.
    private static let signalSources = NSLockedArray()

    private func makeConfiguration() throws -> FakePushServer.Configuration {
        var configuration = FakePushServer.Configuration(
            certificateChainPEM: try read(cert, "--cert"), privateKeyPEM: try read(key, "--key"))
        configuration.host = host
        configuration.port = port
        configuration.googlePort = googlePort
        if let threads { configuration.threads = threads }

        switch (apnsKeyID, apnsTeamID, apnsPublicKey) {
        case let (keyID?, teamID?, path?):
            let pem = try TestKeys.p256PublicKeyPEM(from: try read(path, "--apns-public-key"))
            configuration.apnsKeys = [APNsKey(keyID: keyID, teamID: teamID, publicKeyPEM: pem)]
        case (nil, nil, nil):
            break
        default:
            throw ValidationError("--apns-key-id, --apns-team-id and --apns-public-key go together")
        }
        configuration.apnsTopics = Set(topics)

        configuration.fcmProjectID = fcmProject
        switch (serviceAccountEmail, serviceAccountPublicKey) {
        case let (email?, path?):
            configuration.serviceAccountEmail = email
            configuration.serviceAccountPublicKeyPEM = try TestKeys.rsaPublicKeyPEM(
                from: try read(path, "--service-account-public-key"))
        case (nil, nil):
            break
        default:
            throw ValidationError("--service-account-email and --service-account-public-key go together")
        }
        configuration.oauthTokenLifetime = oauthTokenLifetime
        configuration.acceptUnknownTokens = !strictTokens
        configuration.recordRequests = !noRecord
        guard latency >= 0 && latency <= 60_000 else { throw ValidationError("--latency must be from 0 to 60000 ms") }
        configuration.responseLatency = latency / 1000
        configuration.initialMaxConcurrentStreams = Int(initialStreams) // nil: widest (checked in `validate`)
        if printPushes {
            configuration.onAccepted = { push in
                FileHandle.standardOutput.write(Data((push.displayLine + "\n").utf8))
            }
        }
        return configuration
    }

    private func read(_ path: String, _ flag: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ValidationError("\(flag): cannot read \(path)")
        }
    }
}

/// A lock-protected array of signal sources (they must outlive `run`).
final class NSLockedArray: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let lock = NSLock()

    func withLock(_ body: (inout [DispatchSourceSignal]) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        body(&sources)
    }
}
