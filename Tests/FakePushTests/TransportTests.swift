import FakePush
import Foundation
import Testing
import TestSupport

@Suite struct TransportTests {
    @Test func tlsNegotiatesHTTP2ThroughALPN() throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()), extraArguments: ["-v"])
        #expect(response.httpVersion == "2")
        #expect(response.stderr.contains("ALPN: server accepted h2"))
        #expect(harness.server.connectionCount == 1)
    }

    @Test func http11OnlyClientIsRefusedAtTheConnection() throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()), extraArguments: ["--http1.1"])
        #expect(response.exitCode != 0)
        #expect(response.status == 0)
        #expect(harness.server.requests().isEmpty)
        #expect(harness.server.connectionCount == 0)
    }

    @Test func unknownPathsGet404() throws {
        let harness = try Harness()
        let response = try harness.curl(Harness.Request(path: "/batch", body: "{}"))
        #expect(response.status == 404)
        #expect(harness.server.requests().map(\.provider) == [.unknown])
    }

    @Test func streamLimitStartsAsConfiguredAndRisesAfterAValidProviderToken() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 1 }
        let output = try nghttp(harness, path: "/3/device/\(Tokens.apns())", headers: [
            "authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)",
        ])
        #expect(receivedStreamLimits(output) == [1, 1000])
    }

    @Test func fcmConnectionsAreLoweredTo100Streams() throws {
        let harness = try Harness()
        let output = try nghttp(harness, path: "/v1/projects/\(Harness.project)/messages:send", headers: ["authorization: Bearer x"])
        #expect(receivedStreamLimits(output) == [1000, 100])
    }

    @Test func apnsGoawayCarriesTheShutdownReason() throws {
        let harness = try Harness()
        harness.server.inject(.goaway)
        let output = try nghttp(harness, path: "/3/device/\(Tokens.apns())", headers: [
            "authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)",
        ])
        let goaway = try #require(output.split(separator: "\n").first { $0.contains("recv GOAWAY") })
        let details = output[output.range(of: "recv GOAWAY")!.lowerBound...].prefix(400)
        #expect(goaway.contains("recv GOAWAY"))
        #expect(details.contains("last_stream_id=0"))
        #expect(details.contains("error_code=NO_ERROR"))
        #expect(details.contains(#"{"reason":"Shutdown"}"#))
    }

    @Test func stopClosesThePortAndCanBeCalledTwice() throws {
        let harness = try Harness()
        let before = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        harness.server.stop()
        harness.server.stop()
        let after = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        #expect(before.status == 200)
        #expect(after.status == 0)
        #expect(after.exitCode != 0)
        #expect(harness.server.receivedCount == 1)
    }

    @Test func unusableCertificateIsAConfigurationError() throws {
        let configuration = FakePushServer.Configuration(certificateChainPEM: "not a certificate", privateKeyPEM: "")
        let server = try FakePushServer(configuration: configuration)
        #expect(throws: FakePushError.self) { try server.start() }
    }

    @Test func acceptedPushesAreReportedForDisplay() throws {
        let lines = DisplayedLines()
        let harness = try Harness { $0.onAccepted = { lines.append($0.displayLine) } }
        let token = Tokens.apns()
        _ = try harness.curl(.apns(token, jwt: try harness.apnsJWT()))
        let fcmToken = Tokens.fcm()
        _ = try harness.curl(.fcm(FCMTests.message(fcmToken), accessToken: try harness.accessToken()))
        #expect(lines.all == [
            "APNs …\(token.suffix(6)) (\(Harness.topic)): \"Hi\" — There",
            "FCM …\(fcmToken.suffix(6)): \"Hei\" — Du har en ny melding",
        ])
    }

    /// The SETTINGS_MAX_CONCURRENT_STREAMS values the server sent, in order, from `nghttp -v` output.
    private func receivedStreamLimits(_ output: String) -> [Int] {
        var limits: [Int] = []
        var inReceivedSettings = false
        for line in output.split(separator: "\n") {
            if line.contains(" frame <") { inReceivedSettings = line.contains("recv SETTINGS frame") }
            if inReceivedSettings, let range = line.range(of: "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") {
                limits.append(Int(line[range.upperBound...].dropLast()) ?? -1)
            }
        }
        return limits
    }

    /// Runs `nghttp -v` (POST, body `{}`) against the fake and returns what it printed.
    private func nghttp(_ harness: Harness, path: String, headers: [String]) throws -> String {
        let body = harness.directory.appendingPathComponent("nghttp-body-\(UUID().uuidString).json")
        try FileManager.default.createDirectory(at: harness.directory, withIntermediateDirectories: true)
        try Data(#"{"aps":{}}"#.utf8).write(to: body)
        let arguments = ["-v", "-n", "-d", body.path] + headers.flatMap { ["-H", $0] } + [harness.baseURL + path]
        return try ProcessRunner.run("/usr/bin/nghttp", arguments, timeout: 30).stdout
    }
}

/// Lines collected from the server's threads.
final class DisplayedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) {
        lock.lock()
        lines.append(line)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }
}
