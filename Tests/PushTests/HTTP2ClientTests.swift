import FakePush
import Foundation
@testable import HTTP2
import Push
import Testing
import TestSupport

/// The libcurl HTTP/2 client against the local TLS fake: real TLS, real ALPN, real multiplexing.
@Suite struct HTTP2ClientTests {
    let push: PushEnvironment

    init() throws { push = try PushEnvironment() }

    /// PUSH_CURL_VERBOSE's trace holds the authorization header and the device token in the path: it printed
    /// them whole for Apple's and Google's hosts too. It traces transfers to this machine (a fake) only.
    @Test func theCurlTraceIsForALocalFakeOnly() {
        for local in ["https://127.0.0.1:8443/3/device/ab", "https://localhost/x", "https://[::1]:9/x"] {
            #expect(Transfer.traces(local, asked: true), "\(local)")
            #expect(!Transfer.traces(local, asked: false), "\(local)")
        }
        for remote in ["https://api.push.apple.com/3/device/ab", "https://api.sandbox.push.apple.com:443/3/device/ab",
                       "https://fcm.googleapis.com/v1/projects/p/messages:send", "https://oauth2.googleapis.com/token",
                       "https://127.0.0.1.example.com/x"] {
            #expect(!Transfer.traces(remote, asked: true), "\(remote)")
        }
    }

    func apnsRequests(_ count: Int, to push: PushEnvironment? = nil) throws -> [HTTPRequest] {
        let push = push ?? self.push
        let credentials = try APNsCredentials(keyFile: push.apnsKeyFile, keyID: PushEnvironment.keyID, teamID: PushEnvironment.teamID, topic: PushEnvironment.topic)
        let provider = APNsProvider(credentials: credentials, productionEndpoint: push.server.baseURL, sandboxEndpoint: push.server.baseURL)
        return (0..<count).map { i in
            let message = PushMessage(notificationID: UUID(), category: "inactivity", title: "T", body: "B \(i)", data: [], badge: 1, expiresAt: nil)
            return provider.request(message, target: PushTarget(provider: .apns, token: String(format: "%064x", i + 1), apnsEnvironment: .production), tag: i)
        }
    }

    /// A URL libcurl cannot use (a port out of range) is our setting at fault, and nothing went out: it was taken
    /// for a broken connection, the provider's trouble, and each push spent an attempt on it.
    @Test func aURLLibcurlCannotUseIsOurSetupNotABrokenConnection() throws {
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile))
        let results = client.send([HTTPRequest(url: "https://127.0.0.1:99999/3/device/ab", headers: [], body: [])])
        guard case .failure(let error) = results.first else { Issue.record("\(results)"); return }
        #expect(error.isOurSetup && error.kind == .unusableURL, "\(error)")
        #expect(push.server.requests().isEmpty)
    }

    @Test func manyRequestsAreMultiplexedOverOneTLSConnection() throws {
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 50))
        let requests = try apnsRequests(310)  // one provider token for all
        let results = client.send(Array(requests.prefix(300)))
        let failures = results.filter { (try? $0.get().status) != 200 }
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        let recorded = push.server.requests()
        #expect(recorded.count == 300)
        #expect(Set(recorded.map(\.connectionID)).count == 1)
        // The connection is kept for the client's life: a second batch reuses it.
        let second = client.send(Array(requests.suffix(10)))
        #expect(second.allSatisfy { (try? $0.get().status) == 200 }, "\(second.prefix(2))")
        #expect(Set(push.server.requests().map(\.connectionID)).count == 1)
    }

    @Test func theServersStreamLimitHoldsBackWhatTheWindowWouldAllow() throws {
        // APNs' way: one stream until a valid provider token, then a limit (here 10, under our window of 100).
        let push = try PushEnvironment {
            $0.initialMaxConcurrentStreams = 1
            $0.apnsMaxConcurrentStreams = 10
        }
        let credentials = try APNsCredentials(keyFile: push.apnsKeyFile, keyID: PushEnvironment.keyID, teamID: PushEnvironment.teamID, topic: PushEnvironment.topic)
        let provider = APNsProvider(credentials: credentials, productionEndpoint: push.server.baseURL, sandboxEndpoint: push.server.baseURL)
        let requests = (0..<200).map { i in
            provider.request(PushMessage(notificationID: UUID(), category: "inactivity", title: "T", body: "B", data: [], badge: 1, expiresAt: nil),
                             target: PushTarget(provider: .apns, token: String(format: "%064x", i + 1), apnsEnvironment: .production), tag: i)
        }
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 100))
        let results = client.send(requests)
        let failures = results.filter { (try? $0.get().status) != 200 }
        #expect(failures.isEmpty, "a stream over the server's limit is refused: \(failures.prefix(3))")
        #expect(push.server.requests().count == 200)
        #expect(Set(push.server.requests().map(\.connectionID)).count == 1, "waited for a free stream, no second connection")
    }

    @Test func aNewConnectionCarriesOneStreamUntilItsFirstAnswer() throws {
        // APNs advertises one stream until a valid provider token and refuses streams over its limit before the
        // client has acknowledged it. libcurl answers a refused stream by dropping the connection and retrying on a
        // new one, so a client that fills its window on a new connection churns connections (Apple treats rapid
        // connect/disconnect as an attack) and gives up on some pushes. Whether the server's SETTINGS arrives
        // before libcurl sends is a race on loopback (never over a real network), so several clients each start
        // a connection.
        let push = try PushEnvironment { $0.initialMaxConcurrentStreams = 1 }
        let clients = 5
        for _ in 0..<clients {
            let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 100))
            let results = client.send(try apnsRequests(150, to: push))
            let failures = results.filter { (try? $0.get().status) != 200 }
            #expect(failures.isEmpty, "\(failures.count) of 150 not answered 200, e.g. \(failures.prefix(2))")
        }
        #expect(push.server.acceptedCount == 150 * clients)
        #expect(push.server.connectionCount == clients, "one connection per client, not one per refused stream")
        #expect(Set(push.server.requests().map(\.connectionID)).count == clients)
        #expect(push.server.refusedStreamCount == 0)
        #expect(push.server.streamLimitViolationCount == 0)
        // After the first answer the window opens: the rest are multiplexed, not sent one by one.
        #expect(push.server.peakOpenStreams > 1)
    }

    @Test func aNewConnectionKeyWaitsForTheOldConnectionToEmptyAndGoesOutOnANewOne() throws {
        // APNs counts provider-token updates per connection: a token that replaces another there within 20
        // minutes of the first being seen is TooManyProviderTokenUpdates, and so is every request after it. Two
        // tokens a minute apart; 150 requests with each, the second 150 under a new key, taken while a window
        // of the first is still in flight.
        let credentials = try APNsCredentials(keyFile: push.apnsKeyFile, keyID: PushEnvironment.keyID, teamID: PushEnvironment.teamID, topic: PushEnvironment.topic)
        func provider(tokensAt clock: @escaping () -> Date) -> APNsProvider {
            APNsProvider(credentials: credentials, productionEndpoint: push.server.baseURL, sandboxEndpoint: push.server.baseURL, clock: clock)
        }
        func requests(_ range: Range<Int>, key: Int, from provider: APNsProvider) -> [HTTPRequest] {
            range.map { i in
                var request = provider.request(PushMessage(notificationID: UUID(), category: "inactivity", title: "T", body: "B", data: [], badge: 1, expiresAt: nil),
                                               target: PushTarget(provider: .apns, token: String(format: "%064x", i + 1), apnsEnvironment: .production), tag: i)
                request.connectionKey = key
                return request
            }
        }
        let older = provider(tokensAt: { Date().addingTimeInterval(-60) }), newer = provider(tokensAt: Date.init)
        let old = requests(0..<150, key: 7, from: older)
        let new = requests(150..<300, key: 8, from: newer)
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 50))
        let results = client.send(old + new)

        let failures = results.filter { (try? $0.get().status) != 200 }
        #expect(failures.isEmpty, "\(failures.count) not answered 200, e.g. \(failures.prefix(2))")
        let recorded = push.server.requests()
        #expect(recorded.count == 300)
        let oldAuthorization = old[0].headers.first { $0.0 == "authorization" }?.1
        #expect(recorded.prefix(150).allSatisfy { $0.header("authorization") == oldAuthorization }, "the new key waited for the old requests")
        #expect(Set(recorded.prefix(150).map(\.connectionID)).count == 1)
        #expect(Set(recorded.suffix(150).map(\.connectionID)).count == 1)
        #expect(recorded.first?.connectionID != recorded.last?.connectionID, "the new token went out on a new connection")
        #expect(push.server.connectionCount == 2)
        #expect(push.server.refusedStreamCount == 0, "the new connection started with one stream")
        // The same key again goes on the new connection.
        let again = client.send(requests(300..<310, key: 8, from: newer))
        #expect(again.allSatisfy { (try? $0.get().status) == 200 }, "\(again.prefix(2))")
        #expect(push.server.connectionCount == 2)
    }

    @Test func aRequestThatWaitedForANewConnectionPastItsStartByIsNotSent() throws {
        // A push may not outlive the claim on its delivery: one that waited for the old connection to empty
        // until its start-by passed comes back not started, and nothing goes out.
        let push = try PushEnvironment()
        push.server.inject(.slow(seconds: 1), count: 1)
        var requests = try apnsRequests(2, to: push)
        requests[0].connectionKey = 1
        requests[1].connectionKey = 2
        requests[1].startBy = ContinuousClock.now + .milliseconds(300)
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile))
        let results = client.send(requests)

        #expect((try? results[0].get().status) == 200)
        guard case .failure(let error) = results[1] else { Issue.record("sent: \(results[1])"); return }
        #expect(error.kind == .notStarted, "\(error)")
        #expect(push.server.receivedCount == 1)
    }

    @Test func corkedRequestsAreNeverLeftWaitingForTheKernel() throws {
        // The client corks its connections so a few pushes share a TCP segment. What waits behind a cork the
        // kernel sends on its own only after 200 ms: a request not pushed out before the client waits would
        // take that long, every time. Lone requests, and batches that are no multiple of the requests pushed
        // out together, each come back in far less.
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 100))
        var requests = try apnsRequests(1 + 10 + 3 + 9 + 45 + 7)[...]  // one provider token for all
        _ = client.send([requests.removeFirst()])  // the connection and its TLS handshake
        var slow: [Duration] = []
        for count in [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 9, 45, 1, 1, 1, 1, 1, 1, 1] {
            let batch = Array(requests.prefix(count))
            requests.removeFirst(count)
            var results: [Result<HTTPResponse, HTTPTransportError>] = []
            let took = ContinuousClock().measure { results = client.send(batch) }
            #expect(results.count == count && results.allSatisfy { (try? $0.get().status) == 200 }, "\(results.prefix(2))")
            if took >= .milliseconds(150) { slow.append(took) }
        }
        // A busy machine may stall a few; a request held behind the cork stalls every one.
        #expect(slow.count < 10, "requests waited for the kernel to send them: \(slow)")
        #expect(push.server.requests().count == 1 + 10 + 3 + 9 + 45 + 7)
    }

    @Test func aHugeAnswerIsCutOffAndTheConnectionKept() throws {
        // A proxy in the way answers one stream of many with a page of 8 MB, then another with one just over
        // the cap: the client keeps 64 KB of each, cancels that stream and hands back the status to classify;
        // the other streams in flight are answered at once (not after the request timeout), on the same
        // connection.
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 20))
        var requests = try apnsRequests(81)[...]  // one provider token for all
        _ = client.send([requests.removeFirst()])  // the connection has answered: the whole window is open
        for pageSize in [8 << 20, 70_000] {
            push.server.inject(.proxyErrorPage(bytes: pageSize))
            let batch = Array(requests.prefix(40))
            requests.removeFirst(40)
            var results: [Result<HTTPResponse, HTTPTransportError>] = []
            let took = ContinuousClock().measure { results = client.send(batch) }
            #expect(took < .seconds(10), "the streams beside the cut-off one waited: \(took)")
            let answers = results.compactMap { try? $0.get() }
            #expect(answers.count == 40, "every request got its answer: \(results.filter { (try? $0.get()) == nil }.prefix(2))")
            let page = answers.filter { $0.status == 502 }
            #expect(page.count == 1)
            #expect(page.first?.body.count == client.configuration.maximumResponseBody)
            #expect(page.first?.bodyCutOff == true)
            #expect(page.first.map { $0.bodyText.hasPrefix("<html>") } == true)
            #expect(answers.filter { $0.status == 200 }.count == 39)
            #expect(answers.filter { $0.bodyCutOff }.count == 1)
        }
        #expect(Set(push.server.requests().map(\.connectionID)).count == 1)
    }

    @Test func aCutOffAnswerStillOpensTheWindow() throws {
        // A new connection carries one request until its first answer. A proxy whose every answer is a page
        // over the cap still answers: the rest go out together, not one at a time.
        let push = try PushEnvironment { $0.initialMaxConcurrentStreams = 100 }
        push.server.inject(.proxyErrorPage(bytes: 70_000), count: 30)
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile, window: 20))
        let results = client.send(try apnsRequests(30, to: push))
        #expect(results.allSatisfy { (try? $0.get())?.bodyCutOff == true })
        #expect(push.server.peakOpenStreams > 1, "the window stayed at one stream")
    }

    @Test func headersBeyondTheCapAreDroppedButNotTheOnesAnAnswerIsJudgedBy() throws {
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile))
        let transfer = Transfer(configuration: client.configuration, watch: SocketWatch(epoll: -1))
        func feed(_ line: String) { Array(line.utf8).withUnsafeBufferPointer { transfer.header($0) } }
        feed("HTTP/2 200\r\n")
        for i in 0..<40 { feed("x-padding-\(i): \(String(repeating: "p", count: 500))\r\n") }
        feed("apns-id: 7c66b8c7-52cb-4c9d-83c1-799a70a38eb2\r\n")
        feed("Retry-After: 30\r\n")
        feed("x-late: dropped\r\n")
        for _ in 0..<10_000 { feed("apns-id: 00000000-0000-4000-8000-000000000000\r\n") } // a flood of one kept header
        let names = transfer.responseHeaders.map(\.0)
        #expect(names.count < 40, "headers beyond 16 KB are not kept")
        #expect(names.suffix(2) == ["apns-id", "retry-after"])
        #expect(transfer.responseHeaders.last?.1 == "30")
        #expect(transfer.responseHeaders.first { $0.0 == "apns-id" }?.1 == "7c66b8c7-52cb-4c9d-83c1-799a70a38eb2", "the first one")
    }

    @Test func tlsVerificationIsAlwaysOn() throws {
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: nil))
        let result = client.send(try apnsRequests(1))[0]
        guard case .failure(let error) = result else {
            Issue.record("a certificate from an unknown CA was accepted")
            return
        }
        #expect(error.kind == .untrusted, "a certificate nobody we trust signed: our setting (78), not an outage")
        #expect(push.server.requests().isEmpty)
    }

    @Test func aHungAnswerTimesOutInsteadOfHangingTheJob() throws {
        var configuration = HTTP2Client.Configuration(caFile: push.caFile)
        configuration.requestTimeout = .milliseconds(500)
        let client = try HTTP2Client(configuration)
        push.server.inject(.slow(seconds: 5))
        let started = Date()
        let result = client.send(try apnsRequests(1))[0]
        #expect(Date().timeIntervalSince(started) < 3)
        guard case .failure(let error) = result else {
            Issue.record("no timeout")
            return
        }
        #expect(error.kind == .timeout)
    }

    /// A host whose packets are dropped (a firewall): the connection is never completed, so the request never
    /// went out. That is "cannot connect" (no attempt, the endpoint stops for the run), not a timeout after
    /// sending (an attempt): else every push burns an attempt and dies while the firewall lasts.
    @Test func aConnectionThatNeverCompletesIsCannotConnectNotATimeout() throws {
        // A port that takes TCP connections (the kernel's backlog) but never answers the TLS handshake.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 8) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        #expect(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        var configuration = HTTP2Client.Configuration(caFile: push.caFile)
        configuration.connectTimeout = .milliseconds(500)
        let client = try HTTP2Client(configuration)
        let request = HTTPRequest(url: "https://127.0.0.1:\(port)/3/device/" + String(repeating: "a", count: 64), headers: [], body: [], tag: 0)
        let started = Date()
        guard case .failure(let error) = client.send([request])[0] else {
            Issue.record("an answer from a port that never answers")
            return
        }
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(error.kind == .connect, "\(error)")
        #expect(APNsOutcome.classify(.failure(error)) == .unreachable(reason: error.message))
    }

    @Test func aServerWithoutHTTP2IsReadAndSaidToBeSo() throws {
        // An HTTPS server that only speaks HTTP/1.1 (Python's), with the same test certificate.
        // It listens on a port the system picks, and says which in a file (a port picked here could be taken).
        let script = """
        import http.server, ssl, sys, os
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.send_response(200); self.send_header('content-length', '0'); self.end_headers()
            def log_message(self, *a): pass
        s = http.server.HTTPServer(('127.0.0.1', 0), H)
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[1], sys.argv[2])
        c.set_alpn_protocols(['http/1.1'])
        s.socket = c.wrap_socket(s.socket, server_side=True)
        open(sys.argv[3] + '.tmp', 'w').write(str(s.server_address[1])); os.rename(sys.argv[3] + '.tmp', sys.argv[3])
        s.timeout = 10
        s.handle_request()
        """
        let dir = push.directory
        let portFile = dir.appendingPathComponent("h1.port")
        try push.server.configuration.certificateChainPEM.write(to: dir.appendingPathComponent("h1.pem"), atomically: true, encoding: .utf8)
        try push.server.configuration.privateKeyPEM.write(to: dir.appendingPathComponent("h1.key"), atomically: true, encoding: .utf8)
        let server = try ProcessRunner.start("/usr/bin/python3", ["-c", script, dir.appendingPathComponent("h1.pem").path,
                                                                  dir.appendingPathComponent("h1.key").path, portFile.path])
        defer { kill(server.pid, SIGKILL); _ = try? server.wait() }
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: portFile.path) && Date() < deadline { usleep(20_000) }
        let port = try String(contentsOf: portFile, encoding: .utf8)
        let client = try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile))
        let request = HTTPRequest(url: "https://127.0.0.1:\(port)/3/device/abcd", headers: [], body: Array("{}".utf8))
        // The answer is read (the request was sent and answered), and said to have come without HTTP/2: the
        // caller stops (a push-deliver test shows it records the answer first).
        guard case .success(let response) = client.send([request])[0] else {
            Issue.record("the HTTP/1.1 answer was not read")
            return
        }
        #expect(response.status == 200)
        #expect(response.withoutHTTP2)
    }
}
