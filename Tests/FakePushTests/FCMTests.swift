import _CryptoExtras
import FakePush
import Foundation
import Testing
import TestSupport

@Suite struct FCMTests {
    /// A minimal valid send body for `token`.
    static func message(_ token: String, _ extra: String = "") -> String {
        #"{"message":{"token":"\#(token)","notification":{"title":"Hei","body":"Du har en ny melding"}\#(extra)}}"#
    }

    @Test func oauthFlowIssuesATokenThatFCMAccepts() throws {
        let harness = try Harness()
        let tokenResponse = try harness.curl(.oauth(assertion: try harness.assertion()))
        #expect(tokenResponse.status == 200)
        let accessToken = try #require(tokenResponse.json?["access_token"] as? String)
        #expect(accessToken.hasPrefix("ya29.fake-"))
        #expect(tokenResponse.json?["expires_in"] as? Int == 3599)
        #expect(tokenResponse.json?["token_type"] as? String == "Bearer")

        let send = try harness.curl(.fcm(Self.message(Tokens.fcm()), accessToken: accessToken))
        #expect(send.status == 200)
        let name = try #require(send.json?["name"] as? String)
        #expect(name.hasPrefix("projects/\(Harness.project)/messages/"))
        #expect(name != "projects/\(Harness.project)/messages/fake_message")
        #expect(send.header("content-type") == "application/json; charset=UTF-8")
        #expect(harness.server.requests().map(\.provider) == [.oauth, .fcm])
    }

    @Test func googleAuthsFixedAudienceIsAcceptedToo() throws {
        let harness = try Harness()
        let response = try harness.curl(.oauth(assertion: try harness.assertion(audience: "https://oauth2.googleapis.com/token")))
        #expect(response.status == 200)
    }

    @Test func badAssertionsGetGooglesInvalidGrantAnswers() throws {
        let harness = try Harness()
        let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let stale = Date().addingTimeInterval(-600)
        let responses = try harness.curl([
            .oauth(assertion: try harness.assertion(key: otherKey)),
            .oauth(assertion: try harness.assertion(issuer: "someone@else.iam.gserviceaccount.com")),
            .oauth(assertion: try harness.assertion(audience: "https://example.com/token")),
            .oauth(assertion: try harness.assertion(lifetime: 7200)),
            .oauth(assertion: try harness.assertion(issuedAt: stale)),
            .oauth(assertion: try harness.assertion(scope: "https://www.googleapis.com/auth/devstorage.read_only")),
            .oauth(assertion: try harness.assertion(), grantType: "client_credentials"),
        ])
        #expect(responses.map(\.status) == [400, 400, 400, 400, 400, 400, 400])
        #expect(responses.map { $0.json?["error"] as? String } == [
            "invalid_grant", "invalid_grant", "invalid_grant", "invalid_grant", "invalid_grant", "invalid_scope",
            "unsupported_grant_type",
        ])
        let shortLived = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
        #expect(responses.prefix(5).map { $0.json?["error_description"] as? String } == [
            "Invalid JWT Signature.", "Invalid grant: account not found", "Invalid JWT: Failed audience check.",
            shortLived, shortLived,
        ])
    }

    @Test func missingOrUnknownBearerGets401WithoutFcmError() throws {
        let harness = try Harness()
        let responses = try harness.curl([
            .fcm(Self.message(Tokens.fcm()), accessToken: nil),
            .fcm(Self.message(Tokens.fcm()), accessToken: "ya29.made-up"),
        ])
        #expect(responses.map(\.status) == [401, 401])
        let error = try #require(responses[1].json?["error"] as? [String: Any])
        #expect(error["status"] as? String == "UNAUTHENTICATED")
        #expect(error["message"] as? String == "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
        #expect(error["details"] == nil)
        #expect((responses[0].json?["error"] as? [String: Any])?["message"] as? String
                    == "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
    }

    @Test func expiredAccessTokenGets401() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        harness.clockOffset.seconds = 3600
        let response = try harness.curl(.fcm(Self.message(Tokens.fcm()), accessToken: accessToken))
        #expect(response.status == 401)
        #expect((response.json?["error"] as? [String: Any])?["status"] as? String == "UNAUTHENTICATED")
    }

    @Test func anotherProjectGets403PermissionDenied() throws {
        let harness = try Harness()
        let response = try harness.curl(.fcm(Self.message(Tokens.fcm()), accessToken: try harness.accessToken(),
                                             project: "someone-elses-project"))
        #expect(response.status == 403)
        let error = try #require(response.json?["error"] as? [String: Any])
        #expect(error["status"] as? String == "PERMISSION_DENIED")
        #expect((error["message"] as? String)?.hasPrefix("Permission 'cloudmessaging.messages.create' denied") == true)
    }

    @Test func nonStringDataValueGetsGooglesExactBadRequest() throws {
        let harness = try Harness()
        let response = try harness.curl(.fcm(#"{"message":{"token":"\#(Tokens.fcm())","data":{"count":12,"kind":"x"}}}"#,
                                             accessToken: try harness.accessToken()))
        #expect(response.status == 400)
        let expected: [String: Any] = ["error": [
            "code": 400, "message": "Invalid value at 'message.data[0].value' (TYPE_STRING), 12", "status": "INVALID_ARGUMENT",
            "details": [[
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [[
                    "field": "message.data[0].value",
                    "description": "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
                ]],
            ]],
        ]]
        #expect(NSDictionary(dictionary: try #require(response.json)).isEqual(to: expected))
        #expect(response.body.hasPrefix("{\n  \"error\": {\n    \"code\": 400,"))
    }

    @Test func snakeCaseAndLowerCamelCaseAreBothAccepted() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        let responses = try harness.curl([
            .fcm(Self.message(Tokens.fcm(), #","android":{"collapse_key":"k","priority":"high","ttl":"3600s","notification":{"channel_id":"c","notification_priority":"priority_high"}}"#),
                 accessToken: accessToken),
            .fcm(Self.message(Tokens.fcm(), #","android":{"collapseKey":"k","priority":"NORMAL","ttl":"1.5s","directBootOk":true,"notification":{"channelId":"c","notificationCount":3}},"fcmOptions":{"analyticsLabel":"campaign_1"}"#),
                 accessToken: accessToken),
        ])
        #expect(responses.map(\.status) == [200, 200])
    }

    @Test func unknownFieldGetsInvalidJSONPayload() throws {
        let harness = try Harness()
        let response = try harness.curl(.fcm(Self.message(Tokens.fcm(), #","key":"unknown""#), accessToken: try harness.accessToken()))
        #expect(response.status == 400)
        let error = try #require(response.json?["error"] as? [String: Any])
        let description = #"Invalid JSON payload received. Unknown name "key" at 'message': Cannot find field."#
        #expect(error["message"] as? String == description)
        let details = try #require(error["details"] as? [[String: Any]])
        #expect(details.first?["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest")
        #expect((details.first?["fieldViolations"] as? [[String: String]]) == [["field": "message", "description": description]])
    }

    @Test func messageMustHaveExactlyOneTarget() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        let responses = try harness.curl([
            .fcm(#"{"message":{"notification":{"title":"t"}}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"token":"\#(Tokens.fcm())","topic":"news"}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"topic":"news","data":{"k":"v"}}}"#, accessToken: accessToken),
        ])
        #expect(responses.map(\.status) == [400, 400, 200])
        #expect((responses[0].json?["error"] as? [String: Any])?["message"] as? String == "Recipient of the message is not set.")
        #expect((responses[1].json?["error"] as? [String: Any])?["message"] as? String
                    == "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set 'topic'")
    }

    @Test func fcmsOwnChecksRejectReservedKeysBadTTLsAndBigMessages() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        let token = Tokens.fcm()
        // Payload size counts keys and values: "data" (4) + "p" (1) + the value.
        func sized(_ total: Int) -> String {
            #"{"message":{"token":"\#(token)","data":{"p":"\#(String(repeating: "x", count: total - 5))"}}}"#
        }
        let responses = try harness.curl([
            .fcm(#"{"message":{"token":"\#(token)","data":{"from":"me"}}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"token":"\#(token)","data":{"google.x":"1"}}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"token":"\#(token)","android":{"ttl":"2419201s"}}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"token":"\#(token)","android":{"ttl":"1h"}}}"#, accessToken: accessToken),
            .fcm(#"{"message":{"token":"\#(token)","android":{"priority":"urgent"}}}"#, accessToken: accessToken),
            .fcm(sized(4096), accessToken: accessToken),
            .fcm(sized(4097), accessToken: accessToken),
        ])
        #expect(responses.map(\.status) == [400, 400, 400, 400, 400, 200, 400])
        let messages = responses.map { ($0.json?["error"] as? [String: Any])?["message"] as? String }
        #expect(messages[0] == "Invalid data payload key: from")
        #expect(messages[3] == "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', Illegal duration format; duration must end with 's'")
        #expect(messages[4] == #"Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "urgent""#)
        #expect(messages[6] == "Android message is too big")
    }

    /// The `apns` block's headers are APNs's, passed through: refused as the APNs route refuses them, with APNs's
    /// reason in an ApnsError detail (the fake took any string, so a regression in the shared header helpers showed
    /// on the APNs route only). A data-only message to iOS may carry priority 5 only.
    @Test func anAPNsBlockIsCheckedAsAPNsChecksItsHeaders() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        let token = Tokens.fcm()
        func message(_ headers: String, notification: Bool = true) -> String {
            let shown = notification ? #","notification":{"title":"t"}"# : ""
            return #"{"message":{"token":"\#(token)"\#(shown),"apns":{"headers":{\#(headers)}}}}"#
        }
        let cases: [(String, Bool, String?)] = [
            (#""apns-priority":"10","apns-push-type":"alert","apns-expiration":"1700000000","apns-collapse-id":"c""#, true, nil),
            (#""apns-priority":"7""#, true, "BadPriority"),
            (#""apns-expiration":"tomorrow""#, true, "BadExpirationDate"),
            (#""apns-push-type":"bogus""#, true, "InvalidPushType"),
            (#""apns-collapse-id":"\#(String(repeating: "x", count: 65))""#, true, "BadCollapseId"),
            (#""apns-push-type":"background","apns-priority":"10""#, true, "BadPriority"),
            (#""apns-priority":"10""#, false, "BadPriority"),
            (#""apns-priority":"5""#, false, nil),
        ]
        let responses = try harness.curl(cases.map { .fcm(message($0.0, notification: $0.1), accessToken: accessToken) })
        for (response, expected) in zip(responses, cases) {
            let details = ((response.json?["error"] as? [String: Any])?["details"] as? [[String: Any]]) ?? []
            let reason = details.first { ($0["@type"] as? String)?.hasSuffix("ApnsError") == true }?["reason"] as? String
            #expect(response.status == (expected.2 == nil ? 200 : 400) && reason == expected.2, "\(expected.0): \(response.status) \(response.body)")
        }
    }

    @Test func registryStatesDriveGooglesErrors() throws {
        let harness = try Harness()
        let tokens = (0..<4).map { _ in Tokens.fcm() }
        harness.server.setToken(tokens[0], .fcmUnregistered)
        harness.server.setToken(tokens[1], .senderIDMismatch)
        harness.server.setToken(tokens[2], .thirdPartyAuthError)
        let accessToken = try harness.accessToken()
        let responses = try harness.curl(
            tokens.map { .fcm(Self.message($0), accessToken: accessToken) } + [.fcm(Self.message("short-token"), accessToken: accessToken)])

        #expect(responses.map(\.status) == [404, 403, 401, 200, 400])
        func errorCode(_ response: Harness.Response) -> String? {
            ((response.json?["error"] as? [String: Any])?["details"] as? [[String: Any]])?
                .first { $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }?["errorCode"] as? String
        }
        #expect(responses.map(errorCode) == ["UNREGISTERED", "SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR", nil, "INVALID_ARGUMENT"])
        let unregistered = try #require(responses[0].json?["error"] as? [String: Any])
        #expect(unregistered["message"] as? String == "Requested entity was not found.")
        #expect(unregistered["status"] as? String == "NOT_FOUND")
        let expectedInvalid: [String: Any] = ["error": [
            "code": 400, "message": "The registration token is not a valid FCM registration token", "status": "INVALID_ARGUMENT",
            "details": [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "INVALID_ARGUMENT"]],
        ]]
        #expect(NSDictionary(dictionary: try #require(responses[4].json)).isEqual(to: expectedInvalid))
    }

    @Test func validateOnlyChecksButDoesNotDeliver() throws {
        let harness = try Harness()
        let accessToken = try harness.accessToken()
        let unregistered = Tokens.fcm()
        harness.server.setToken(unregistered, .fcmUnregistered)
        let responses = try harness.curl([
            .fcm(#"{"validate_only":true,"message":{"token":"\#(Tokens.fcm())"}}"#, accessToken: accessToken),
            .fcm(#"{"validateOnly":true,"message":{"token":"\#(unregistered)"}}"#, accessToken: accessToken),
        ])
        #expect(responses.map(\.status) == [200, 404])
        #expect(responses[0].json?["name"] as? String == "projects/\(Harness.project)/messages/fake_message")
        #expect(harness.server.requests().filter { $0.provider == .fcm }.map(\.validateOnly) == [true, true])
    }

    @Test func injected503And429CarryRetryAfterAndSkipTheTokenRequest() throws {
        let harness = try Harness()
        harness.server.inject(.status503(retryAfter: 7))
        harness.server.inject(.tooManyRequests(retryAfter: 60))
        let accessToken = try harness.accessToken()  // faults without a provider leave OAuth alone
        let responses = try harness.curl([
            .fcm(Self.message(Tokens.fcm()), accessToken: accessToken),
            .fcm(Self.message(Tokens.fcm()), accessToken: accessToken),
            .fcm(Self.message(Tokens.fcm()), accessToken: accessToken),
        ])
        #expect(responses.map(\.status) == [503, 429, 200])
        #expect(responses.map { $0.header("retry-after") } == ["7", "60", nil])
        let unavailable = try #require(responses[0].json?["error"] as? [String: Any])
        #expect(unavailable["status"] as? String == "UNAVAILABLE")
        let quota = try #require(responses[1].json?["error"] as? [String: Any])
        #expect(quota["status"] as? String == "RESOURCE_EXHAUSTED")
        let types = (quota["details"] as? [[String: Any]])?.compactMap { $0["@type"] as? String }
        #expect(types == ["type.googleapis.com/google.firebase.fcm.v1.FcmError", "type.googleapis.com/google.rpc.QuotaFailure"])
    }

    @Test func injectedOAuthFaultsHitOnlyTheTokenEndpoint() throws {
        let harness = try Harness()
        harness.server.inject(.oauthInvalidGrant)
        harness.server.inject(.oauthServerError)
        let responses = try harness.curl([
            .oauth(assertion: try harness.assertion()), .oauth(assertion: try harness.assertion()),
            .oauth(assertion: try harness.assertion()),
        ])
        #expect(responses.map(\.status) == [400, 503, 200])
        #expect(responses[0].json?["error"] as? String == "invalid_grant")
    }

    @Test func perMinuteQuotaAnswers429WithQuotaExceeded() throws {
        let harness = try Harness { $0.fcmQuotaPerMinute = 2 }
        let accessToken = try harness.accessToken()
        let responses = try harness.curl((0..<3).map { _ in .fcm(Self.message(Tokens.fcm()), accessToken: accessToken) })
        #expect(responses.map(\.status) == [200, 200, 429])
        let retryAfter = try #require(responses[2].header("retry-after").flatMap(Int.init))
        #expect((1...60).contains(retryAfter))
        let details = (responses[2].json?["error"] as? [String: Any])?["details"] as? [[String: Any]]
        #expect(details?.first?["errorCode"] as? String == "QUOTA_EXCEEDED")
    }

    @Test func retryAfterCanBeAnHTTPDate() throws {
        let harness = try Harness()
        harness.server.inject(.status503Until(Date(timeIntervalSince1970: 784_111_777)))
        let response = try harness.curl(.fcm(Self.message(Tokens.fcm()), accessToken: try harness.accessToken()))
        #expect(response.status == 503)
        #expect(response.header("retry-after") == "Sun, 06 Nov 1994 08:49:37 GMT")
    }
}
