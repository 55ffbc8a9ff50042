import Crypto
import FakePush
import Foundation
import Testing
import TestSupport

@Suite struct APNsTests {
    @Test func validProviderTokenGets200WithEmptyBodyAndEchoedAPNsID() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let id = "123e4567-e89b-12d3-a456-426614174000"
        var request = Harness.Request.apns(token, jwt: try harness.apnsJWT())
        request.headers.append(("apns-id", id))
        let response = try harness.curl(request)

        #expect(response.httpVersion == "2")
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(response.header("apns-id") == id)
        #expect(harness.server.acceptedCount == 1)
    }

    @Test func missingAPNsIDGetsAGeneratedLowerCaseUUID() throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        let id = try #require(response.header("apns-id"))
        #expect(UUID(uuidString: id) != nil)
        #expect(id == id.lowercased())
        #expect(harness.server.requests().first?.responseHeader("apns-id") == id)
    }

    @Test func providerTokenProblemsGet403WithApplesReasons() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let otherKey = TestCertificates.apnsKey()
        let responses = try harness.curl([
            .apns(token, jwt: nil),
            .apns(token, jwt: try harness.apnsJWT(issuedAt: Date().addingTimeInterval(-3601))),
            .apns(token, jwt: try harness.apnsJWT(key: .init(pemRepresentation: otherKey.pkcs8PEM))),
            .apns(token, jwt: try harness.apnsJWT(keyID: "ZZZ999ZZZZ")),
            .apns(token, jwt: "not.a.jwt"),
            // A valid token with its parts padded with "=": JWTs are base64url without padding (RFC 7515 §2).
            .apns(token, jwt: try harness.apnsJWT().split(separator: ".").map { part in
                part + String(repeating: "=", count: (4 - part.count % 4) % 4)
            }.joined(separator: ".")),
        ])
        #expect(responses.map(\.status) == [403, 403, 403, 403, 403, 403])
        #expect(responses.map { $0.json?["reason"] as? String } == [
            "MissingProviderToken", "ExpiredProviderToken", "InvalidProviderToken", "InvalidProviderToken",
            "InvalidProviderToken", "InvalidProviderToken",
        ])
        #expect(responses.allSatisfy { $0.header("apns-id") != nil })
    }

    @Test func issuedAtAsANumericStringIsAccepted() throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT(iatAsString: true)))
        #expect(response.status == 200)
    }

    @Test func aNewProviderTokenWithinTwentyMinutesOnOneConnectionGets429() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let firstIssued = Date().addingTimeInterval(-60)
        let first = try harness.apnsJWT(issuedAt: firstIssued)
        let second = try harness.apnsJWT()
        let responses = try harness.curl([.apns(token, jwt: first), .apns(token, jwt: second), .apns(token, jwt: first)])

        // The connection is unusable after the 429 until the 20 minutes have passed, even with the old token
        // (fact sheet §1.5, forum 675879); a new connection may use the new token.
        #expect(responses.map(\.status) == [200, 429, 429])
        #expect(responses.map { $0.json?["reason"] as? String } == [nil, "TooManyProviderTokenUpdates", "TooManyProviderTokenUpdates"])
        #expect(try harness.curl(.apns(token, jwt: second)).status == 200)
        let recorded = harness.server.requests()
        try #require(recorded.count == 4)
        #expect(Set(recorded.prefix(3).map(\.connectionID)).count == 1)
        #expect(recorded[3].connectionID != recorded[0].connectionID)
        #expect(recorded[0].jwtIssuedAt == Int(firstIssued.timeIntervalSince1970))
        #expect(recorded[1].jwtIssuedAt != recorded[0].jwtIssuedAt)
    }

    /// A token signed with another key of the same team: APNs wants a connection per key (fact sheet §1.5).
    @Test func anotherKeyOnOneConnectionGets403UnrelatedKeyIdInToken() throws {
        let other = P256.Signing.PrivateKey()
        let harness = try Harness {
            $0.tokenRefreshFloor = 0
            $0.apnsKeys.append(APNsKey(keyID: "OTHERKEY01", teamID: Harness.teamID, publicKeyPEM: other.publicKey.pemRepresentation))
        }
        let token = Tokens.apns()
        let responses = try harness.curl([
            .apns(token, jwt: try harness.apnsJWT(issuedAt: Date().addingTimeInterval(-60))),
            .apns(token, jwt: try harness.apnsJWT(keyID: "OTHERKEY01", key: other)),
        ])
        #expect(responses.map(\.status) == [200, 403])
        #expect(responses[1].json?["reason"] as? String == "UnrelatedKeyIdInToken")
        let alone = try harness.curl(.apns(token, jwt: try harness.apnsJWT(keyID: "OTHERKEY01", key: other)))
        #expect(alone.status == 200, "on a connection of its own")
    }

    @Test func aTokenFromAnotherConnectionDoesNotCountAsAnUpdate() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let first = try harness.curl(.apns(token, jwt: try harness.apnsJWT(issuedAt: Date().addingTimeInterval(-60))))
        let second = try harness.curl(.apns(token, jwt: try harness.apnsJWT()))
        #expect(first.status == 200)
        #expect(second.status == 200)
        #expect(harness.server.connectionCount == 2)
    }

    @Test func aNewProviderTokenAfterTheRefreshFloorIsAccepted() throws {
        let harness = try Harness { $0.tokenRefreshFloor = 0 }
        let token = Tokens.apns()
        let responses = try harness.curl([
            .apns(token, jwt: try harness.apnsJWT(issuedAt: Date().addingTimeInterval(-60))),
            .apns(token, jwt: try harness.apnsJWT()),
        ])
        #expect(responses.map(\.status) == [200, 200])
        let recorded = harness.server.requests()
        try #require(recorded.count == 2)
        #expect(recorded[0].jwtIssuedAt != recorded[1].jwtIssuedAt)
        #expect(recorded[0].connectionID == recorded[1].connectionID)
    }

    @Test(arguments: [
        ([("apns-push-type", "alert"), ("apns-push-type", "alert"), ("apns-topic", Harness.topic)], "DuplicateHeaders"),
        ([("apns-push-type", "banner"), ("apns-topic", Harness.topic)], "InvalidPushType"),
        ([("apns-id", "not-a-uuid"), ("apns-topic", Harness.topic)], "BadMessageId"),
        ([("apns-expiration", "tomorrow"), ("apns-topic", Harness.topic)], "BadExpirationDate"),
        ([("apns-priority", "7"), ("apns-topic", Harness.topic)], "BadPriority"),
        ([("apns-push-type", "background"), ("apns-priority", "10"), ("apns-topic", Harness.topic)], "BadPriority"),
        // Left out, the priority is 10.
        ([("apns-push-type", "background"), ("apns-topic", Harness.topic)], "BadPriority"),
        ([("apns-push-type", "alert")], "MissingTopic"),
        ([("apns-push-type", "voip"), ("apns-topic", Harness.topic)], "BadTopic"),
        ([("apns-push-type", "alert"), ("apns-topic", "com.example.other")], "TopicDisallowed"),
        ([("apns-topic", Harness.topic), ("apns-collapse-id", String(repeating: "c", count: 65))], "BadCollapseId"),
    ])
    func headerProblemsGet400WithApplesReasons(headers: [(String, String)], reason: String) throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT(), headers: headers))
        #expect(response.status == 400)
        #expect(response.body == #"{"reason":"\#(reason)"}"#)
    }

    @Test func wellFormedHeadersOfEveryKindAreAccepted() throws {
        let harness = try Harness()
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT(), headers: [
            ("apns-push-type", "voip"), ("apns-topic", Harness.topic + ".voip"), ("apns-priority", "5"),
            ("apns-expiration", "0"), ("apns-collapse-id", String(repeating: "c", count: 64)),
            ("apns-id", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"),
        ]))
        #expect(response.status == 200)
        #expect(response.header("apns-id") == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
    }

    @Test func payloadOf4096BytesIsAcceptedAnd4097IsTooLarge() throws {
        let harness = try Harness()
        func payload(size: Int) -> String {
            let prefix = #"{"aps":{},"pad":""#, suffix = #""}"#
            return prefix + String(repeating: "x", count: size - prefix.utf8.count - suffix.utf8.count) + suffix
        }
        let token = Tokens.apns()
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl([
            .apns(token, jwt: jwt, body: payload(size: 4096)),
            .apns(token, jwt: jwt, body: payload(size: 4097)),
            .apns(token, jwt: jwt, body: payload(size: 5120),
                  headers: [("apns-push-type", "voip"), ("apns-topic", Harness.topic + ".voip")]),
        ])
        #expect(responses.map(\.status) == [200, 413, 200])
        #expect(responses[1].body == #"{"reason":"PayloadTooLarge"}"#)
    }

    @Test func emptyAndNonJSONBodiesGet400() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl([
            .apns(token, jwt: jwt, body: ""),
            .apns(token, jwt: jwt, body: "hello"),
            .apns(token, jwt: jwt, body: #"{"alert":"no aps"}"#),
        ])
        #expect(responses.map(\.body) == [
            #"{"reason":"PayloadEmpty"}"#, #"{"reason":"BadPayload"}"#, #"{"reason":"BadPayload"}"#,
        ])
    }

    @Test func registryStatesDriveTheAnswers() throws {
        let harness = try Harness { $0.acceptUnknownTokens = false }
        let tokens = (0..<7).map { _ in Tokens.apns() }
        harness.server.setToken(tokens[0], .valid)
        harness.server.setToken(tokens[1], .unregistered(timestampMilliseconds: 1_700_000_000_123))
        harness.server.setToken(tokens[2], .expired)
        harness.server.setToken(tokens[3], .wrongTopic)
        harness.server.setToken(tokens[4], .throttled)
        harness.server.setToken(tokens[5], .otherEnvironment)
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl(tokens.map { .apns($0, jwt: jwt) })

        #expect(responses.map(\.status) == [200, 410, 410, 400, 429, 400, 400])
        #expect(responses.map(\.body) == [
            "",
            #"{"reason":"Unregistered","timestamp":1700000000123}"#,
            #"{"reason":"ExpiredToken"}"#,
            #"{"reason":"DeviceTokenNotForTopic"}"#,
            #"{"reason":"TooManyRequests"}"#,
            #"{"reason":"BadDeviceToken"}"#,
            #"{"reason":"BadDeviceToken"}"#,  // unknown, and acceptUnknownTokens is off
        ])
    }

    @Test func malformedDeviceTokenIsBadDeviceTokenEvenWhenUnknownTokensAreAccepted() throws {
        let harness = try Harness()
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl([.apns("xyz-not-hex", jwt: jwt), .apns("abc", jwt: jwt)])
        #expect(responses.map(\.body) == [#"{"reason":"BadDeviceToken"}"#, #"{"reason":"BadDeviceToken"}"#])
    }

    @Test func pathAndMethodProblemsGetApplesReasons() throws {
        let harness = try Harness()
        let jwt = try harness.apnsJWT()
        var get = Harness.Request.apns(Tokens.apns(), jwt: jwt)
        get.method = "PUT"
        var other = Harness.Request.apns(Tokens.apns(), jwt: jwt)
        other.path = "/3/devices/abc"
        let responses = try harness.curl([get, .apns("", jwt: jwt), other])
        #expect(responses.map(\.status) == [405, 400, 404])
        #expect(responses.map(\.body) == [
            #"{"reason":"MethodNotAllowed"}"#, #"{"reason":"MissingDeviceToken"}"#, #"{"reason":"BadPath"}"#,
        ])
    }

    @Test func requestsAreRecordedWithHeadersBodyAndConnection() throws {
        let harness = try Harness()
        let token = Tokens.apns()
        let issued = Date().addingTimeInterval(-120)
        let jwt = try harness.apnsJWT(issuedAt: issued)
        _ = try harness.curl([.apns(token, jwt: jwt), .apns(token, jwt: jwt)])

        let recorded = harness.server.requests()
        try #require(recorded.count == 2)
        #expect(recorded.allSatisfy { $0.provider == .apns && $0.method == "POST" && $0.status == 200 })
        #expect(recorded[0].deviceToken == token)
        #expect(recorded[0].header("APNs-Topic") == Harness.topic)
        #expect(recorded[0].header("authorization") == "bearer \(jwt)")
        #expect(((recorded[0].json as? [String: Any])?["aps"] as? [String: Any])?["alert"] != nil)
        #expect(recorded[0].connectionID == recorded[1].connectionID)
        #expect(recorded[0].streamID < recorded[1].streamID)
        #expect(recorded.allSatisfy { $0.jwtIssuedAt == Int(issued.timeIntervalSince1970) })
        #expect(harness.server.acceptedCount == 2)
        harness.server.clearRecorded()
        #expect(harness.server.requests().isEmpty)
        #expect(harness.server.acceptedCount == 0)
    }

    @Test func withRecordingOffRequestsAreOnlyCounted() throws {
        let harness = try Harness { $0.recordRequests = false }
        let jwt = try harness.apnsJWT()
        _ = try harness.curl([.apns(Tokens.apns(), jwt: jwt), .apns("zz", jwt: jwt)])
        #expect(harness.server.requests().isEmpty)
        #expect(harness.server.receivedCount == 2)
        #expect(harness.server.acceptedCount == 1)
    }

    @Test func injected503CarriesRetryAfterAndIsUsedOnce() throws {
        let harness = try Harness()
        harness.server.inject(.status503(retryAfter: 30))
        let token = Tokens.apns()
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl([.apns(token, jwt: jwt), .apns(token, jwt: jwt)])
        #expect(responses.map(\.status) == [503, 200])
        #expect(responses[0].body == #"{"reason":"ServiceUnavailable"}"#)
        #expect(responses[0].header("retry-after") == "30")
        #expect(harness.server.requests().first?.fault == .status503(retryAfter: 30))
    }

    @Test func injectedFaultsMapToApplesErrors() throws {
        let harness = try Harness()
        harness.server.inject(.status500)
        harness.server.inject(.tooManyRequests(retryAfter: nil))
        harness.server.inject(.payloadTooLarge)
        harness.server.inject(.expiredProviderToken)
        harness.server.inject(.invalidProviderToken)
        harness.server.inject(.shutdown)
        let token = Tokens.apns()
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl((0..<6).map { _ in .apns(token, jwt: jwt) })
        #expect(responses.map(\.status) == [500, 429, 413, 403, 403, 503])
        #expect(responses.map { $0.json?["reason"] as? String } == [
            "InternalServerError", "TooManyRequests", "PayloadTooLarge", "ExpiredProviderToken", "InvalidProviderToken",
            "Shutdown",
        ])
    }

    @Test func goawayLeavesTheRequestUnansweredAndTheNextConnectionWorks() throws {
        let harness = try Harness()
        harness.server.inject(.goaway)
        let refused = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        let retried = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))

        // libcurl 7.88 fails the transfer ("received GOAWAY, error=0, last_stream=0"); retrying is the client's job.
        #expect(refused.status == 0)
        #expect(refused.exitCode != 0)
        #expect(retried.status == 200)
        let recorded = harness.server.requests()
        try #require(recorded.count == 2)
        #expect(recorded.map(\.status) == [0, 200])
        #expect(recorded[0].fault == .goaway)
        #expect(recorded[0].connectionID != recorded[1].connectionID)
    }

    @Test func droppedConnectionGivesCurlNoAnswer() throws {
        let harness = try Harness()
        harness.server.inject(.dropConnection)
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        #expect(response.status == 0)
        #expect(response.exitCode != 0)
        #expect(harness.server.requests().map(\.status) == [0])
    }

    /// A delayed answer the client gave up on (its connection closed first) was never given: its record says
    /// status 0 and it is not counted accepted. It said 200 before, so a client that took an unanswered push
    /// for sent matched the fake's record.
    @Test func aDelayedAnswerTheClientGaveUpOnIsRecordedAsNeverGiven() throws {
        let harness = try Harness()
        harness.server.inject(.slow(seconds: 1.5))
        let response = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()), extraArguments: ["--max-time", "0.5"])
        #expect(response.status == 0)
        usleep(2_000_000) // past the delay
        #expect(harness.server.requests().map(\.status) == [0])
        #expect(harness.server.receivedCount == 1)
        #expect(harness.server.acceptedCount == 0)
    }

    /// A test that clears the recording while an answer is still to come: the answer, once written, lands in no
    /// other request's record (it was kept by its index: out of range, a crash of the whole test process).
    @Test func anAnswerWrittenAfterTheRecordingWasClearedChangesNothingKept() throws {
        let harness = try Harness()
        harness.server.inject(.slow(seconds: 1))
        let started = Date()
        let slow = try harness.startCurl([.apns(Tokens.apns(), jwt: try harness.apnsJWT())])
        while harness.server.receivedCount == 0 && Date().timeIntervalSince(started) < 10 { usleep(10_000) }
        harness.server.clearRecorded()
        let response = try slow.finish()[0]
        #expect(response.status == 200)
        #expect(harness.server.requests().isEmpty, "the cleared request stays cleared")
        let next = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        #expect(next.status == 200)
        #expect(harness.server.requests().map(\.status) == [200])
    }

    /// A graceful GOAWAY names the streams taken in hand (an answer still to come included) and lets them be
    /// answered before the connection closes (RFC 9113 §6.8). It named only the streams answered, and closed at
    /// once: the pending answer was lost, and its push was recorded 200 all the same.
    @Test func aGracefulGoawayLetsTheStreamsItNamesBeAnswered() throws {
        let harness = try Harness { $0.initialMaxConcurrentStreams = 10 }
        harness.server.inject(.slow(seconds: 1))
        harness.server.inject(.goaway)
        let jwt = try harness.apnsJWT()
        let responses = try harness.curl([.apns(Tokens.apns(), jwt: jwt), .apns(Tokens.apns(), jwt: jwt)], extraArguments: ["-Z"])
        let recorded = harness.server.requests()
        let first = recorded.filter { $0.connectionID == recorded[0].connectionID }.sorted { $0.streamID < $1.streamID }
        try #require(first.count == 2)
        #expect(first.map(\.fault) == [.slow(seconds: 1), .goaway], "the first stream is the slow one")
        #expect(first.map(\.status) == [200, 0], "the slow one answered after the GOAWAY; the other never")
        // The GOAWAY told curl the second stream was not taken in hand, so it sent that one again on a new
        // connection; the slow one, answered, went once.
        #expect(recorded.filter { $0.deviceToken == first[0].deviceToken }.count == 1)
        #expect(recorded.filter { $0.deviceToken == first[1].deviceToken }.map(\.status) == [0, 200])
        #expect(responses.map(\.status) == [200, 200], "\(responses.map(\.stderr))")
    }

    @Test func slowFaultAnswersLateWithoutBlockingTheEventLoop() throws {
        let harness = try Harness()  // one event-loop thread
        harness.server.inject(.slow(seconds: 1.5))
        let started = Date()
        let slow = try harness.startCurl([.apns(Tokens.apns(), jwt: try harness.apnsJWT())])
        while harness.server.receivedCount == 0 && Date().timeIntervalSince(started) < 10 { usleep(10_000) }

        let quick = try harness.curl(.apns(Tokens.apns(), jwt: try harness.apnsJWT()))
        let quickDone = Date().timeIntervalSince(started)
        let slowResponse = try slow.finish()[0]
        #expect(quick.status == 200)
        #expect(quickDone < 1.5)
        #expect(slowResponse.status == 200)
        #expect(Date().timeIntervalSince(started) >= 1.5)
    }
}
