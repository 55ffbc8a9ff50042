import Delivery
import Foundation
import HTTP2
import Push
import Testing
import TestSupport

/// One APNs provider token per process and key, as the fact sheet asks: push-deliver's workers (an engine
/// each, made from the same settings) send the same token, minted once behind a lock, and one worker's
/// refresh after ExpiredProviderToken serves the others instead of leaving them "not cured".
@Suite struct SharedProviderTokenTests {
    let push: PushEnvironment

    init() throws { push = try PushEnvironment() }

    func message() -> PushMessage {
        PushMessage(notificationID: UUID(), category: "inactivity", title: "T", body: "B", data: [], badge: 1, expiresAt: nil)
    }

    func authorization(_ provider: any PushProvider) -> String? {
        let target = PushTarget(provider: .apns, token: String(repeating: "ab", count: 32), apnsEnvironment: .production)
        return provider.request(message(), target: target, tag: 0).headers.first { $0.0 == "authorization" }?.1
    }

    @Test func theWorkersOfOneProcessSendOneToken() throws {
        let settings = try PushSettings.load(try DeliveryOptions.parse([]), environment: push.variables)
        let workers = try (0..<4).map { _ in try #require(try settings.providers()[.apns]) }
        let sent = Set(workers.compactMap(authorization))
        #expect(sent.count == 1, "one token for every worker, not one each: \(sent.count)")
        #expect(settings.apnsTokens?.minted == 1)
    }

    @Test func tokensMintedFromManyThreadsAtOnceAreOne() throws {
        let settings = try PushSettings.load(try DeliveryOptions.parse([]), environment: push.variables)
        let factory = try #require(settings.apnsTokens)
        let lock = NSLock()
        nonisolated(unsafe) var tokens: [String] = []
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let token = factory.token()
            lock.withLock { tokens.append(token) }
        }
        #expect(Set(tokens).count == 1)
        #expect(factory.minted == 1)
    }

    @Test func theWorkersOfOneProcessAskForOneFCMAccessToken() throws {
        let settings = try PushSettings.load(try DeliveryOptions.parse([]), environment: push.variables)
        let workers = try (0..<4).map { _ in try #require(try settings.providers()[.fcm]) }
        for worker in workers { try worker.prepare() }
        let oauth = push.server.requests().filter { $0.provider == .oauth }
        #expect(oauth.count == 1, "one access token for every worker, not one each: \(oauth.count)")
        let sent = Set(workers.map { provider in
            provider.request(message(), target: PushTarget(provider: .fcm, token: String(repeating: "f", count: 152)), tag: 0)
                .headers.first { $0.0 == "authorization" }?.1 ?? ""
        })
        #expect(sent.count == 1)
    }

    @Test func aRefreshAfter401ThatAnotherWorkerMadeServesTheRest() throws {
        let settings = try PushSettings.load(try DeliveryOptions.parse([]), environment: push.variables)
        let tokens = try #require(settings.fcmTokens)
        let first = try tokens.token()
        // Worker A's push was answered 401: a fresh token.
        let fresh = try tokens.refresh(replacing: first)
        #expect(fresh != first)
        // Worker B's push with the same old token, answered 401 a moment later: the fresh one, no new fetch.
        #expect(try tokens.refresh(replacing: first) == fresh)
        #expect(push.server.requests().filter { $0.provider == .oauth }.count == 2)
    }

    @Test func aRefreshAnotherWorkerMadeServesTheRest() throws {
        var now = Date(timeIntervalSince1970: 1_781_510_400)
        let factory = APNsTokenFactory(credentials: try APNsCredentials(keyFile: push.apnsKeyFile, keyID: PushEnvironment.keyID,
                                                                        teamID: PushEnvironment.teamID, topic: PushEnvironment.topic),
                                       clock: { now })
        let first = factory.token()
        now += 25 * 60
        // Worker A is told its token expired: a fresh one.
        let fresh = try #require(factory.refreshAfterExpiry(of: first))
        #expect(fresh != first)
        // Worker B, told the same of the same old token a moment later: the fresh one, not "none within 20 minutes".
        now += 1
        #expect(factory.refreshAfterExpiry(of: first) == fresh)
        #expect(factory.minted == 2)
        // The fresh one called expired within 20 minutes: the clock is off, no new token.
        #expect(factory.refreshAfterExpiry(of: fresh) == nil)
    }

    /// PUSH_CA_FILE is added to the system's CAs, for every host the run talks to: left set from a test or a
    /// proxy setup, it is trusted for Apple's and Google's own servers too, and nothing ever failed to show
    /// it. The run says so; against a test provider it says nothing.
    @Test func aCAFileForAppleOrGooglesOwnServersIsSaid() throws {
        #expect(try PushSettings.load(try DeliveryOptions.parse([]), environment: push.variables).warnings.isEmpty)
        var real = push.variables
        real["APNS_ENDPOINT"] = nil
        let warnings = try PushSettings.load(try DeliveryOptions.parse([]), environment: real).warnings
        #expect(warnings.count == 1 && warnings[0].contains("https://api.push.apple.com") && warnings[0].contains("PUSH_CA_FILE"), "\(warnings)")
    }
}
