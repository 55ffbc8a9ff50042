import Delivery
import FakePush
import Foundation
import HTTP2
import Logging
import Push
import Testing
import TestSupport

/// APNs `403 ExpiredProviderToken` that a fresh provider token cures: the engine mints one (the token in
/// use being older than Apple's 20-minute floor) and sends the push again, on a new connection (APNs counts
/// token updates per connection).
/// In-process, because the engine's and the fake's clocks must be moved past that floor.
@Suite struct ProviderTokenRefreshTests {
    let db: TestDatabase
    let f: Fixtures
    let clock = TestClock()
    let push: PushEnvironment
    let provider: APNsProvider

    /// A fake and an APNs provider on one clock the test moves.
    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        let clock = self.clock
        push = try PushEnvironment { $0.now = { clock.now } }
        let credentials = try APNsCredentials(keyFile: push.apnsKeyFile, keyID: PushEnvironment.keyID,
                                              teamID: PushEnvironment.teamID, topic: PushEnvironment.topic)
        provider = APNsProvider(credentials: credentials, productionEndpoint: push.server.baseURL,
                                sandboxEndpoint: push.server.baseURL, clock: { clock.now })
    }

    /// Mentors with one iPhone each, reminded by inactivity-check: one pending APNs delivery each.
    func pendingAPNsDeliveries(_ count: Int) throws -> [Fixtures.Device] {
        let org = try f.organization("Org")
        let devices = try (0..<count).map { i in
            try f.device(try f.mentor(org, "Mentor \(i)", lastActivityDaysAgo: 20, devices: 0), provider: "apns")
        }
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        return devices
    }

    /// Moves the engine's and the fake's clock by `seconds` as soon as the fake has taken in its first request,
    /// from another thread while the engine runs. (A timer instead raced a claim slowed by a busy machine.)
    func advanceClocksOnceTheFakeHasAPush(by seconds: TimeInterval) {
        let clock = self.clock
        let server = push.server
        DispatchQueue.global().async {
            let deadline = Date().addingTimeInterval(20)
            while server.receivedCount == 0 && Date() < deadline { usleep(2_000) }
            clock.advance(seconds)
        }
    }

    func runEngine() throws -> DeliveryReport {
        let engine = OutboxEngine(connection: f.connection, providers: [.apns: provider],
                                  client: try HTTP2Client(HTTP2Client.Configuration(caFile: push.caFile)),
                                  maxAttempts: 5, logger: Logger(label: "test"))
        return try engine.run(scope: .all)
    }

    @Test func anExpiredProviderTokenIsReplacedOnceAndThePushIsSentAgain() throws {
        let iphone = try pendingAPNsDeliveries(1)[0]
        let firstToken = provider.tokens.token()
        // 25 minutes on, the token is still within its 50-minute reuse, and APNs calls it expired once.
        clock.advance(25 * 60)
        push.server.inject(.expiredProviderToken, count: 1)
        let report = try runEngine()

        #expect(report.brokenProviders.isEmpty, "\(report.brokenProviders)")
        let sent = push.server.requests().filter { $0.provider == .apns }
        #expect(sent.map(\.status) == [403, 200])
        #expect(sent.allSatisfy { $0.deviceToken == iphone.token })
        #expect(sent.first?.header("authorization") == "bearer " + firstToken)
        #expect(sent.last?.header("authorization") != "bearer " + firstToken, "a fresh provider token")
        #expect(sent.last?.jwtIssuedAt == Int(clock.now.timeIntervalSince1970), "minted at the (moved) clock's now")
        #expect(Set(sent.map(\.connectionID)).count == 2, "the fresh token on a new connection")
        let row = try #require(try f.connection.query("SELECT state, attempts FROM deliveries").first)
        #expect(try row.decode(0, as: String.self) == "sent")
        #expect(try row.decode(1, as: Int.self) == 1, "the resend after a refresh is not a new attempt")
    }

    @Test func pushesInFlightWithTheExpiredTokenAreSentAgainWithTheOneFreshToken() throws {
        _ = try pendingAPNsDeliveries(6)
        // A new connection carries one push until it has answered, and APNs allows it one stream until a valid
        // token: the first is accepted, which widens the connection, and answered after a second, in which 25
        // minutes pass (the token in use is then past Apple's 20-minute floor). Then the other five go out
        // together with that token and all five are told it expired.
        push.server.inject(.slow(seconds: 1), count: 1)
        push.server.inject(.expiredProviderToken, count: 5)
        // The clock moves once the fake has taken in the first push (with its token, minted before): its answer
        // is a second away.
        advanceClocksOnceTheFakeHasAPush(by: 25 * 60)
        let report = try runEngine()

        #expect(report.brokenProviders.isEmpty, "one fresh token serves all: \(report.brokenProviders)")
        #expect(report.sent == 6)
        let sent = push.server.requests().filter { $0.provider == .apns }
        #expect(sent.filter { $0.status == 403 }.count == 5)
        #expect(sent.filter { $0.status == 200 }.count == 6)
        #expect(Set(sent.compactMap { $0.header("authorization") }).count == 2, "the old token and one fresh one")
    }

    @Test func aTokenReplacedSoonAfterAConnectionOpenedGoesOutOnANewConnection() throws {
        _ = try pendingAPNsDeliveries(2)
        // The token in use is 45 minutes old when the run opens its connection, and past its 50 (so replaced)
        // when the second push goes out, 6 minutes later by the clocks: on that connection the new token would
        // come 6 minutes after the old one was first seen there, which APNs answers TooManyProviderTokenUpdates
        // (and the engine stops APNs for the run).
        let first = provider.tokens.token()
        clock.advance(45 * 60)
        // A new connection carries one push until its first answer, here 3 seconds away; the clocks move once
        // the fake has the push.
        push.server.inject(.slow(seconds: 3), count: 1)
        advanceClocksOnceTheFakeHasAPush(by: 6 * 60)
        let report = try runEngine()

        #expect(report.brokenProviders.isEmpty, "\(report.brokenProviders)")
        #expect(report.sent == 2)
        let sent = push.server.requests().filter { $0.provider == .apns }
        #expect(sent.map(\.status) == [200, 200])
        #expect(sent.first?.header("authorization") == "bearer " + first)
        #expect(sent.last?.header("authorization") != "bearer " + first, "the token past its 50 minutes was replaced")
        #expect(Set(sent.map(\.connectionID)).count == 2, "the new token went out on a new connection")
    }

    /// FCM asks for an access token on every push; when the token endpoint fails near the end of the token's
    /// life, it is asked once, not per push (each ask blocks the run), and the token still in force is used.
    @Test func aFailingTokenEndpointIsAskedOnceNotOncePerPush() throws {
        let clock = self.clock
        let tokens = try GoogleAccessTokens(account: try GoogleServiceAccount(file: push.serviceAccountFile),
                                            http: HTTP2Client.Configuration(caFile: push.caFile), clock: { clock.now })
        let first = try tokens.token()
        clock.advance(56 * 60) // within the five minutes before it expires: time to fetch another
        push.server.inject(.oauthServerError, count: 1_000)
        for _ in 0..<50 { #expect(try tokens.token() == first, "the token in force, while the endpoint fails") }
        #expect(fetches(tokens, reach: 2), "the first fetch and one failed one")
        for _ in 0..<50 { #expect(try tokens.token() == first) }
        #expect(push.server.requests().filter { $0.provider == .oauth }.count == 2, "not asked again at once")
        clock.advance(31)
        _ = try? tokens.token()
        #expect(fetches(tokens, reach: 3), "asked again after a quiet spell")
        #expect(push.server.requests().filter { $0.provider == .oauth }.count == 3)
    }

    /// Waits (up to 20 s) until `tokens` has made `count` fetches.
    func fetches(_ tokens: GoogleAccessTokens, reach count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while tokens.fetched < count && Date() < deadline { usleep(2_000) }
        return tokens.fetched == count
    }

    /// The next token is fetched ahead of expiry on a thread of its own: no caller waits for it, the one that
    /// found it due included. A caller is a send loop with answers in flight: held by a slow token endpoint,
    /// libcurl timed out answers that had arrived, and those pushes went out twice.
    @Test func aFetchAheadOfExpiryHoldsNoCaller() throws {
        let clock = self.clock
        let tokens = try GoogleAccessTokens(account: try GoogleServiceAccount(file: push.serviceAccountFile),
                                            http: HTTP2Client.Configuration(caFile: push.caFile), clock: { clock.now })
        let first = try tokens.token()
        clock.advance(56 * 60) // within the five minutes before it expires
        push.server.inject(.slow(seconds: 3), count: 1, provider: .oauth)
        for _ in 0..<3 {
            var got: String?
            let took = ContinuousClock().measure { got = try? tokens.token() }
            #expect(got == first, "the token in force")
            #expect(took < .seconds(1), "did not wait for the fetch: \(took)")
        }
        #expect(fetches(tokens, reach: 2))
        let fresh = try tokens.token()
        #expect(fresh != first)
        #expect(push.server.requests().filter { $0.provider == .oauth }.count == 2, "one fetch ahead, not one per caller")
    }

    /// Callers with no token wait for the one fetch in progress instead of each making one.
    @Test func callersWithNoTokenWaitForTheOneFetch() throws {
        let tokens = try GoogleAccessTokens(account: try GoogleServiceAccount(file: push.serviceAccountFile),
                                            http: HTTP2Client.Configuration(caFile: push.caFile))
        push.server.inject(.slow(seconds: 1), count: 1, provider: .oauth)
        let got = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let token = try? tokens.token() { got.withLock { $0.append(token) } }
        }
        #expect(got.withLock { $0.count } == 4)
        #expect(Set(got.withLock { $0 }).count == 1)
        #expect(push.server.requests().filter { $0.provider == .oauth }.count == 1)
    }

    /// A token endpoint that hands out tokens already expired would be asked again for every push.
    @Test func anAccessTokenThatLivesNoTimeIsRefusedClearly() throws {
        let push = try PushEnvironment { $0.oauthTokenLifetime = 0 }
        let tokens = try GoogleAccessTokens(account: try GoogleServiceAccount(file: push.serviceAccountFile),
                                            http: HTTP2Client.Configuration(caFile: push.caFile))
        #expect {
            _ = try tokens.token()
        } throws: { error in
            guard let error = error as? PushOutcomeError, case .credentialsBroken(let reason) = error.outcome else { return false }
            return reason.contains("expires_in (0.0) is not a positive number")
        }
    }

    /// A passing trouble Google's token endpoint says with a 400 (`internal_failure`, `server_error`,
    /// `temporarily_unavailable`: google-auth retries on those) was taken for a configuration to check: FCM
    /// stopped with 78. It waits for a retry, as a 503 does. And an access token that is no bearer token (a
    /// line break in it: a token_uri that is not Google's) would go into every request's header: refused.
    @Test func aPassingTroubleSaidWithA400WaitsAndAMalformedAccessTokenIsRefused() throws {
        let push = try PushEnvironment()
        let clock = self.clock
        let tokens = try GoogleAccessTokens(account: try GoogleServiceAccount(file: push.serviceAccountFile),
                                            http: HTTP2Client.Configuration(caFile: push.caFile), clock: { clock.now })
        push.server.inject(.oauthInternalFailure, count: 1)
        #expect {
            _ = try tokens.token()
        } throws: { error in
            guard let error = error as? PushOutcomeError, case .retry(_, let reason) = error.outcome else { return false }
            return reason.contains("internal_failure")
        }
        clock.advance(31)
        push.server.inject(.oauthMalformedAccessToken, count: 1)
        #expect {
            _ = try tokens.token()
        } throws: { error in
            guard let error = error as? PushOutcomeError, case .credentialsBroken(let reason) = error.outcome else { return false }
            return reason.contains("is not a bearer token")
        }
        clock.advance(31)
        #expect(try tokens.token().hasPrefix("ya29.fake-"), "a good answer after both")
    }
}
