import ArgumentParser
import Foundation
import HTTP2
import Push
#if canImport(Glibc)
import Glibc
#endif

/// Sends N pushes through our HTTP/2 client (payload building, provider token, libcurl multiplexing)
/// to an endpoint, usually the local fake, and prints pushes per second and CPU seconds.
@main
struct PushBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-bench",
        abstract: "Benchmark: send N APNs or FCM pushes through the engine's client and print pushes/s and CPU seconds.")

    @Option(help: "apns or fcm.") var provider: String = "apns"
    @Option(help: "How many pushes.") var count: Int = 100_000
    @Option(help: "Requests in flight.") var window: Int = 100
    @Option(help: ArgumentHelp("Endpoint, e.g. https://127.0.0.1:8443.", valueName: "url")) var endpoint: String
    @Option(help: ArgumentHelp("CA bundle to trust.", valueName: "path")) var caFile: String?
    @Option(help: ArgumentHelp("APNs .p8 key.", valueName: "path")) var apnsKeyFile: String?
    @Option var apnsKeyID: String = "ABC123DEFG"
    @Option var apnsTeamID: String = "DEF123GHIJ"
    @Option var apnsTopic: String = "no.likeperson.app"
    @Option(help: ArgumentHelp("FCM service-account JSON.", valueName: "path")) var serviceAccountFile: String?

    @Option(help: "Connections side by side, each on its own thread (push-deliver --workers).") var workers: Int = 1

    func validate() throws {
        guard (1...10_000_000).contains(count) else { throw ValidationError("--count must be from 1 to 10000000") }
        guard (1...1000).contains(window) else { throw ValidationError("--window must be from 1 to 1000 (push-deliver's PUSH_CONCURRENCY)") }
        guard (1...32).contains(workers) else { throw ValidationError("--workers must be from 1 to 32") }
    }

    func run() throws {
        // The device tokens, made before the clock starts: in production they arrive as column values.
        let tokens = (0..<count).map { provider == "apns" ? PushBenchCommand.apnsToken($0) : PushBenchCommand.fcmToken($0) }
        let cpuBefore = cpuSeconds()
        let started = Date()
        let outcome: (ok: Int, failed: Int, firstFailure: String?)
        if workers <= 1 {
            outcome = try send(0..<count, tokens: tokens)
        } else {
            let total = Totals()
            let group = DispatchGroup()
            let share = (count + workers - 1) / workers
            for worker in 0..<workers {
                let range = min(count, worker * share)..<min(count, (worker + 1) * share)
                group.enter()
                Thread {
                    defer { group.leave() }
                    let result = (try? self.send(range, tokens: tokens)) ?? (0, range.count, "worker \(worker + 1) failed to start")
                    total.add(result)
                }.start()
            }
            group.wait()
            outcome = total.value
        }
        let wall = Date().timeIntervalSince(started)
        let cpu = cpuSeconds() - cpuBefore
        // One line the benchmark script reads: "push-bench[-xN] PROVIDER: …" (N connections when more than one).
        print(String(format: "push-bench%@ %@: %d ok, %d failed in %.3f s: %.0f pushes/s, %.3f CPU s (window %d)",
                     workers == 1 ? "" : "-x\(workers)", provider, outcome.ok, outcome.failed, wall, Double(outcome.ok) / wall, cpu, window))
        if let firstFailure = outcome.firstFailure { print("first failure: \(firstFailure.prefix(300))") }
        if outcome.failed > 0 { throw ExitCode(1) }
    }

    /// Sends the pushes numbered `range` over one client of its own.
    func send(_ range: Range<Int>, tokens: [String]) throws -> (ok: Int, failed: Int, firstFailure: String?) {
        var configuration = HTTP2Client.Configuration(caFile: caFile, window: window)
        configuration.requestTimeout = .seconds(60)
        let client = try HTTP2Client(configuration)
        let pushProvider: any PushProvider
        switch provider {
        case "apns":
            guard let apnsKeyFile else { throw ValidationError("--apns-key-file is required for apns") }
            pushProvider = APNsProvider(credentials: try APNsCredentials(keyFile: apnsKeyFile, keyID: apnsKeyID, teamID: apnsTeamID, topic: apnsTopic),
                                        productionEndpoint: endpoint, sandboxEndpoint: endpoint)
        case "fcm":
            guard let serviceAccountFile else { throw ValidationError("--service-account-file is required for fcm") }
            pushProvider = try FCMProvider(account: GoogleServiceAccount(file: serviceAccountFile), endpoint: endpoint, http: configuration)
        default:
            throw ValidationError("--provider must be apns or fcm")
        }
        try pushProvider.prepare()
        let kind: PushTarget.Provider = provider == "apns" ? .apns : .fcm
        var next = range.lowerBound
        var ok = 0, failed = 0
        var firstFailure: String?
        client.run(next: {
            guard next < range.upperBound else { return nil }
            defer { next += 1 }
            // In production the notification id comes from the database; Foundation's UUID() reads
            // /dev/urandom on every call (open, read, close), which would dominate this loop.
            let message = PushMessage(notificationID: PushBenchCommand.uuid(next), category: "inactivity", title: "Har du noe å registrere?",
                                      body: "Hei Kari! Det er 20 dager siden du sist registrerte en aktivitet.",
                                      data: [("route", "/activities/new")], badge: 1, expiresAt: Date().addingTimeInterval(86_400))
            return pushProvider.request(message, target: PushTarget(provider: kind, token: tokens[next], apnsEnvironment: .production), tag: next)
        }, completed: { _, result in
            if case .success(let response) = result, response.status == 200 { ok += 1 } else {
                failed += 1
                if firstFailure == nil { firstFailure = "\(result)" }
            }
        })
        return (ok, failed, firstFailure)
    }

    /// A version-4-shaped UUID made from a counter.
    static func uuid(_ n: Int) -> UUID {
        let v = UInt64(n)
        return UUID(uuid: (0x6d, 0x65, 0x6e, 0x74, 0x6f, 0x72, 0x40, 0x00, 0x80, 0x00,
                           UInt8(truncatingIfNeeded: v >> 40), UInt8(truncatingIfNeeded: v >> 32), UInt8(truncatingIfNeeded: v >> 24),
                           UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)))
    }

    /// The APNs device token of push `n`: 64 hex digits.
    static func apnsToken(_ n: Int) -> String { String(repeating: "0", count: 48) + hex16(n + 1) }

    /// The FCM registration token of push `n`.
    static func fcmToken(_ n: Int) -> String { "bench\(n):APA91b" + String(repeating: "x", count: 134) }

    /// `n` as 16 lower-case hex digits.
    static func hex16(_ n: Int) -> String {
        let digits = String(n, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
    }
}

/// The workers' counts, added up under a lock.
final class Totals: @unchecked Sendable {
    private let lock = NSLock()
    private var sum = (ok: 0, failed: 0, firstFailure: String?.none)

    func add(_ result: (ok: Int, failed: Int, firstFailure: String?)) {
        lock.withLock {
            sum.ok += result.ok
            sum.failed += result.failed
            sum.firstFailure = sum.firstFailure ?? result.firstFailure
        }
    }

    var value: (ok: Int, failed: Int, firstFailure: String?) { lock.withLock { sum } }
}
