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

    /// Configured to, the fake narrows an APNs connection to one stream after an error answer and widens it
    /// again after a success, as Apple's servers were seen doing (fact sheet §1.6, §1.8 item 10).
    @Test func aConnectionNarrowsToOneStreamAfterAnErrorWhenConfigured() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 1; $0.apnsNarrowAfterError = true }
        let bad = Tokens.apns()
        harness.server.setToken(bad, .badDeviceToken)
        let headers = ["authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)"]
        // A fresh connection each: its first valid token widens it, the error narrows it at once.
        #expect(receivedStreamLimits(try nghttp(harness, path: "/3/device/\(bad)", headers: headers)) == [1, 1000, 1])
        #expect(receivedStreamLimits(try nghttp(harness, path: "/3/device/\(Tokens.apns())", headers: headers)) == [1, 1000])
        // Not configured (the default): an error leaves the limit alone.
        let plain = try Harness { $0.initialMaxConcurrentStreams = 1 }
        plain.server.setToken(bad, .badDeviceToken)
        let plainHeaders = ["authorization: bearer \(try plain.apnsJWT())", "apns-topic: \(Harness.topic)"]
        #expect(receivedStreamLimits(try nghttp(plain, path: "/3/device/\(bad)", headers: plainHeaders)) == [1, 1000])
    }

    @Test func fcmConnectionsStartAtOneStreamLikeAPNsAndAreWidenedTo100() throws {
        let harness = try Harness()
        let output = try nghttp(harness, path: "/v1/projects/\(Harness.project)/messages:send", headers: ["authorization: Bearer x"])
        #expect(receivedStreamLimits(output) == [1, 100])
    }

    /// With a port of their own for Google's services, as the real hosts are, each port answers its own service
    /// only (another's path gets that host's 404) and a new connection advertises its own service's stream limit:
    /// APNs one until a valid provider token, Google about 100 from the start.
    @Test func googlesServicesOnAPortOfTheirOwnAnswerAsGoogleAndAPNsAsApple() throws {
        let harness = try Harness { $0.googlePort = 0 }
        #expect(harness.server.googlePort != harness.server.port && harness.server.googlePort != 0)
        let apple = harness.server.baseURL, google = harness.server.googleBaseURL
        let fcmPath = "/v1/projects/\(Harness.project)/messages:send"
        let apnsPath = "/3/device/\(Tokens.apns())"
        let apnsHeaders = ["authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)"]
        #expect(receivedStreamLimits(try nghttp(harness, base: apple, path: apnsPath, headers: apnsHeaders)) == [1, 1000])
        #expect(receivedStreamLimits(try nghttp(harness, base: google, path: fcmPath, headers: ["authorization: Bearer x"])) == [100])
        _ = try nghttp(harness, base: apple, path: fcmPath, headers: ["authorization: Bearer x"])
        _ = try nghttp(harness, base: google, path: apnsPath, headers: apnsHeaders)
        let answers = harness.server.requests().map { "\($0.provider) \($0.status) \($0.responseBody)" }
        #expect(answers.count == 4)
        #expect(answers[0].hasPrefix("apns 200"))
        #expect(answers[1].hasPrefix("fcm 401"), "\(answers)")
        #expect(answers[2].hasPrefix("apns 404") && answers[2].contains("BadPath"), "an FCM path on Apple's host: \(answers)")
        #expect(answers[3].hasPrefix("unknown 404") && !answers[3].contains("BadPath"), "an APNs path on Google's host: \(answers)")
        // The OAuth flow and an FCM send on Google's port, the assertion's audience that port's token URL.
        let token = try harness.accessToken()
        let sent = try harness.curl(.fcm(#"{"message":{"token":"\#(Tokens.fcm())","data":{"k":"v"}}}"#, accessToken: token))
        #expect(sent.status == 200, "\(sent.body)")
        let onApple = try harness.curl(Harness.Request(path: "/token", formFields: [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                                                                                  ("assertion", try harness.assertion())], base: apple))
        #expect(onApple.status == 404 && onApple.body.contains("BadPath"), "no token endpoint on Apple's host: \(onApple.body)")
    }

    /// By default a new connection allows one stream, as APNs does until a valid provider token: the fake is
    /// as strict as the strictest service it stands for, unless a benchmark asks for the widest start.
    @Test func byDefaultANewConnectionAllowsOneStreamUntilAValidProviderToken() throws {
        let harness = try Harness()
        let output = try nghttp(harness, path: "/3/device/\(Tokens.apns())", headers: [
            "authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)",
        ])
        #expect(receivedStreamLimits(output) == [1, 1000])
        let wide = try Harness { $0.initialMaxConcurrentStreams = nil }
        let widest = try nghttp(wide, path: "/3/device/\(Tokens.apns())", headers: [
            "authorization: bearer \(try wide.apnsJWT())", "apns-topic: \(Harness.topic)",
        ])
        #expect(receivedStreamLimits(widest).first == 1000)
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

    /// A server recycling its connection (`goAwayAfterStreams`, fact sheet §1.8 item 9): after its first request
    /// it sends a graceful GOAWAY naming that stream and answers it; the stream past it is not taken in hand.
    @Test func goawayAfterNStreamsNamesTheLastOneTakenInHandAndRefusesTheRest() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 10; $0.goAwayAfterStreams = 1 }
        let output = try nghttp(harness, path: "/3/device/\(Tokens.apns())", headers: [
            "authorization: bearer \(try harness.apnsJWT())", "apns-topic: \(Harness.topic)",
        ], extra: ["-m", "2"])
        let details = try #require(output.range(of: "recv GOAWAY").map { output[$0.lowerBound...].prefix(300) }, "\(output)")
        #expect(details.contains("last_stream_id=1") && details.contains("error_code=NO_ERROR"), "\(details)")
        #expect(harness.server.requests().map(\.status) == [200], "one taken in hand and answered")
    }

    @Test func aStreamOverTheLimitBeforeTheSettingsAckIsRefused() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 1 }
        let events = try rawHTTP2(harness, acknowledgeSettings: false)
        #expect(events.contains("SETTINGS max_concurrent_streams=1"))
        #expect(events.contains("RST_STREAM stream=3 error=7"), "REFUSED_STREAM (0x7): \(events)")
        #expect(events.contains("HEADERS stream=1"), "the first stream is still answered: \(events)")
        #expect(!events.contains { $0.hasPrefix("GOAWAY") })
        #expect(harness.server.refusedStreamCount == 1)
        #expect(harness.server.streamLimitViolationCount == 0)
        #expect(harness.server.requests().count == 1)
    }

    @Test func aStreamOverAnAcknowledgedLimitEndsTheConnectionWithGoaway() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 1 }
        let events = try rawHTTP2(harness, acknowledgeSettings: true)
        #expect(events.contains("GOAWAY last_stream_id=0 error=1 Maximum active streams violated for this endpoint."),
                "PROTOCOL_ERROR (0x1) with APNs' text: \(events)")
        #expect(events.last == "EOF", "the connection is closed: \(events)")
        #expect(!events.contains { $0.hasPrefix("RST_STREAM") || $0.hasPrefix("HEADERS") })
        #expect(harness.server.streamLimitViolationCount == 1)
        #expect(harness.server.refusedStreamCount == 0)
    }

    @Test func anFCMConnectionOverItsLimitGetsFCMsGoaway() throws {
        let fcmPath = "/v1/projects/\(Harness.project)/messages:send"
        // Two streams at once on a fresh connection, over the one stream it starts with.
        let fresh = try Harness { $0.initialMaxConcurrentStreams = 1 }
        let events = try rawHTTP2(fresh, acknowledgeSettings: true, path: fcmPath)
        #expect(events.contains("GOAWAY last_stream_id=0 error=1 exceeded_max_concurrent_streams"),
                "PROTOCOL_ERROR (0x1) with FCM's text (fact sheet §2, item 8): \(events)")
        #expect(events.last == "EOF", "the connection is closed: \(events)")
        // And after a first request was answered, over FCM's own limit (here 1).
        let warm = try Harness {
            $0.initialMaxConcurrentStreams = 1
            $0.fcmMaxConcurrentStreams = 1
        }
        let later = try rawHTTP2(warm, acknowledgeSettings: true, path: fcmPath, warmUp: true)
        #expect(later.contains("HEADERS stream=1"), "the first request is answered: \(later)")
        #expect(later.contains("GOAWAY last_stream_id=1 error=1 exceeded_max_concurrent_streams"), "\(later)")
        #expect(warm.server.streamLimitViolationCount == 1)
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

    /// Opens two APNs streams at once on a fresh connection, speaking HTTP/2 frame by frame (nghttp and curl
    /// keep to the server's limit once they know it; this client does not). Stream 1 stays open (its body is
    /// sent only after stream 3), so stream 3 is the second open stream. With `acknowledgeSettings` false both go
    /// out before the server's SETTINGS is even read; with true the client first acknowledges it. Returns what
    /// the server sent, one line per frame (`SETTINGS max_concurrent_streams=N`, `RST_STREAM stream=N error=N`,
    /// `HEADERS stream=N`, `GOAWAY last_stream_id=N error=N <debug data>`), and `EOF` when the server closed
    /// the connection (`TIMEOUT` after 5 s of silence), unless stream 1 was answered first. `path` is the
    /// streams' path (an APNs device path by default). With `warmUp` a complete request on stream 1 is answered
    /// first, and the two streams are 3 and 5.
    /// A stream the client resets is closed at once (RFC 9113 §5.1.2), even when the reset and the next stream's
    /// HEADERS come in one read (libcurl corks its connection): the fake counted it until the read was done,
    /// and ended the connection for a limit the client had kept.
    @Test func aStreamTheClientResetNoLongerCountsAgainstTheLimit() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 1 }
        let events = try rawHTTP2(harness, acknowledgeSettings: true, resetFirst: true)
        #expect(events.contains("HEADERS stream=3"), "the next stream is answered: \(events)")
        #expect(!events.contains { $0.hasPrefix("GOAWAY") }, "\(events)")
        #expect(harness.server.streamLimitViolationCount == 0)
    }

    private func rawHTTP2(_ harness: Harness, acknowledgeSettings: Bool, path: String? = nil, warmUp: Bool = false,
                          resetFirst: Bool = false) throws -> [String] {
        let script = #"""
        import socket, ssl, struct, sys
        port, ca, path, ack, warm = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode(), sys.argv[4] == "1", sys.argv[5] == "1"
        reset = sys.argv[6] == "1"
        context = ssl.create_default_context(cafile=ca)
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
        sock.settimeout(5)
        def frame(kind, flags, stream, payload=b""):
            return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
        def field(name, value):  # HPACK literal without indexing, new name, no Huffman
            return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
        def headers(stream, end_stream):
            block = (field(b":method", b"POST") + field(b":scheme", b"https") + field(b":authority", b"127.0.0.1")
                     + field(b":path", path))
            return frame(1, 0x4 | (0x1 if end_stream else 0), stream, block)
        pending = b""
        def read_frame():
            global pending
            while len(pending) < 9 or len(pending) < 9 + int.from_bytes(pending[:3], "big"):
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    return "TIMEOUT"
                except ConnectionError:
                    data = b""
                if not data:
                    return "EOF"
                pending += data
            length = int.from_bytes(pending[:3], "big")
            kind, flags, stream = pending[3], pending[4], int.from_bytes(pending[5:9], "big") & 0x7FFFFFFF
            payload, pending = pending[9:9 + length], pending[9 + length:]
            return kind, flags, stream, payload
        def report(kind, flags, stream, payload):
            if kind == 4 and not flags & 1:
                for i in range(0, len(payload), 6):
                    if int.from_bytes(payload[i:i + 2], "big") == 3:
                        print("SETTINGS max_concurrent_streams=%d" % int.from_bytes(payload[i + 2:i + 6], "big"))
            elif kind == 3:
                print("RST_STREAM stream=%d error=%d" % (stream, int.from_bytes(payload[:4], "big")))
            elif kind == 1:
                print("HEADERS stream=%d" % stream)
            elif kind == 7:
                print("GOAWAY last_stream_id=%d error=%d %s" % (int.from_bytes(payload[:4], "big") & 0x7FFFFFFF,
                      int.from_bytes(payload[4:8], "big"), payload[8:].decode()))
            sys.stdout.flush()
        def read_until(done, missing=None):
            # Reads and reports frames until done(frame); at the end of the stream or a timeout, exits with
            # `missing` when given, else prints what ended it.
            while True:
                received = read_frame()
                if isinstance(received, str):
                    if missing:
                        sys.exit(missing + received)
                    print(received)
                    return
                report(*received)
                if done(received):
                    return
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
        if ack:
            read_until(lambda f: f[0] == 4 and not f[1] & 1, "no SETTINGS from the server: ")
            sock.sendall(frame(4, 1, 0))
        first, second = (3, 5) if warm else (1, 3)
        if reset:
            # Stream 1 opened and reset (CANCEL), then stream 3, all in one write.
            sock.sendall(headers(1, False) + frame(3, 0, 1, struct.pack(">I", 8)) + headers(3, True))
            read_until(lambda f: f[0] == 7 or (f[0] == 1 and f[2] == 3))
            sys.exit(0)
        if warm:
            sock.sendall(headers(1, True))
            read_until(lambda f: f[0] == 1 and f[2] == 1, "no answer to the first request: ")
        sock.sendall(headers(first, False) + headers(second, True))
        body_sent = []
        def first_answered(f):
            if f[0] == 3 and f[2] == second and not body_sent:
                # The second stream was refused: finish the first, which must still be answered.
                sock.sendall(frame(0, 1, first, b'{"aps":{}}'))
                body_sent.append(True)
            return f[0] == 1 and f[2] == first
        read_until(first_answered)
        """#
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", script, String(harness.server.port), harness.caPath,
                                                                 path ?? "/3/device/\(Tokens.apns())", acknowledgeSettings ? "1" : "0",
                                                                 warmUp ? "1" : "0", resetFirst ? "1" : "0"], timeout: 30)
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// Runs `nghttp -v` (POST, body `{}`) against the fake and returns what it printed.
    private func nghttp(_ harness: Harness, base: String? = nil, path: String, headers: [String], extra: [String] = []) throws -> String {
        let body = harness.directory.appendingPathComponent("nghttp-body-\(UUID().uuidString).json")
        try FileManager.default.createDirectory(at: harness.directory, withIntermediateDirectories: true)
        try Data(#"{"aps":{}}"#.utf8).write(to: body)
        let arguments = ["-v", "-n", "-d", body.path] + extra + headers.flatMap { ["-H", $0] } + [(base ?? harness.baseURL) + path]
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
