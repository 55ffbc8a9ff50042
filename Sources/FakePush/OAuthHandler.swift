import Foundation

/// The fake Google OAuth 2.0 token endpoint for service accounts (JWT bearer grant, RFC 7523).
extension FakePushCore {
    private static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    private static let googleTokenURL = "https://oauth2.googleapis.com/token"
    private static let acceptedScopes = [
        "https://www.googleapis.com/auth/firebase.messaging",
        "https://www.googleapis.com/auth/cloud-platform",
    ]

    func handleOAuth(_ request: FakeRequest) -> HandlerOutcome {
        // Google's token endpoint allows about as many streams as FCM: widen a connection still at its start.
        request.connection.widenMaxConcurrentStreams(to: configuration.fcmMaxConcurrentStreams)
        return HandlerOutcome(response: oauthResponse(request))
    }

    private func oauthResponse(_ request: FakeRequest) -> FakeResponse {
        let contentType = request.header("content-type")?.lowercased() ?? ""
        let form = contentType.hasPrefix("application/x-www-form-urlencoded")
            ? Self.parseForm(String(decoding: request.body.readableBytesView, as: UTF8.self)) : [:]
        guard request.method == "POST", let grantType = form["grant_type"] else {
            return oauthError(400, "invalid_request", "Required parameter is missing: grant_type")
        }
        guard grantType == Self.jwtBearerGrant else {
            return oauthError(400, "unsupported_grant_type", "Invalid grant_type: \(grantType)")
        }
        guard let assertion = form["assertion"] else {
            return oauthError(400, "invalid_request", "Required parameter is missing: assertion")
        }
        guard let claims = serviceAccountVerifier.verify(assertion) else {
            return oauthError(400, "invalid_grant", "Invalid JWT Signature.")
        }
        guard claims.issuer == configuration.serviceAccountEmail else {
            return oauthError(400, "invalid_grant", "Invalid grant: account not found")
        }
        let tokenURL = self.tokenURL.withLock { $0 }
        guard let audience = claims.audience, audience == tokenURL || audience == Self.googleTokenURL else {
            return oauthError(400, "invalid_grant", "Invalid JWT: Failed audience check.")
        }
        let now = configuration.now()
        let nowSeconds = Int64(now.timeIntervalSince1970)
        guard let issuedAt = claims.issuedAt, let expiresAt = claims.expiresAt,
              expiresAt > issuedAt, expiresAt - issuedAt <= 3600,
              abs(issuedAt - nowSeconds) <= 300, expiresAt > nowSeconds
        else {
            return oauthError(400, "invalid_grant",
                              "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        }
        let scopes = (claims.scope ?? "").split(separator: " ").map(String.init)
        guard scopes.contains(where: Self.acceptedScopes.contains) else {
            return oauthError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }

        var random = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let suffix = String((0..<64).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        let accessToken = "ya29.fake-" + suffix
        let lifetime = configuration.oauthTokenLifetime
        issuedAccessTokens.withLock { tokens in
            tokens = tokens.filter { $0.value.expiresAt > now }
            tokens[accessToken] = IssuedAccessToken(expiresAt: now.addingTimeInterval(TimeInterval(lifetime)),
                                                    scope: scopes.joined(separator: " "))
        }
        let body = JSONValue.object([
            JSONMember("access_token", .string(accessToken)),
            JSONMember("expires_in", .number(String(lifetime))),
            JSONMember("token_type", .string("Bearer")),
        ]).googleStyleText
        return FakeResponse(status: 200, headers: [("content-type", "application/json; charset=utf-8")], body: body)
    }

    /// `{"error": code, "error_description": description}` as Google's token endpoint answers.
    func oauthError(_ status: Int, _ code: String, _ description: String?) -> FakeResponse {
        var members = [JSONMember("error", .string(code))]
        if let description { members.append(JSONMember("error_description", .string(description))) }
        return FakeResponse(status: status, headers: [("content-type", "application/json; charset=utf-8")],
                            body: JSONValue.object(members).googleStyleText)
    }

    /// The token endpoint's answer to an injected fault, or nil when the fault does not change the answer.
    func oauthFaultResponse(_ fault: Fault) -> FakeResponse? {
        switch fault {
        case .oauthInvalidGrant: return oauthError(400, "invalid_grant", "Invalid JWT Signature.")
        case .oauthServerError, .status503, .status503Until: return oauthError(503, "temporarily_unavailable", "The service is currently unavailable.")
        case .status500: return oauthError(500, "internal_failure", "Internal error encountered.")
        case .oauthInternalFailure: return oauthError(400, "internal_failure", "Internal error encountered.")
        case .oauthMalformedAccessToken:
            let body = JSONValue.object([JSONMember("access_token", .string("ya29.fake\r\nx-injected: 1")), JSONMember("expires_in", .number("3599")),
                                         JSONMember("token_type", .string("Bearer"))]).googleStyleText
            return FakeResponse(status: 200, headers: [("content-type", "application/json; charset=utf-8")], body: body)
        case .tooManyRequests: return oauthError(429, "rate_limit_exceeded", "Rate limit exceeded.")
        case .payloadTooLarge, .expiredProviderToken, .invalidProviderToken, .fcmThirdPartyAuth,
             .slow, .dropConnection, .goaway, .shutdown, .proxyErrorPage:
            return nil
        }
    }

    /// Decodes `application/x-www-form-urlencoded` (first value wins).
    static func parseForm(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String? {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = decode(parts[0]) else { continue }
            let value = parts.count > 1 ? decode(parts[1]) : ""
            if let value, fields[name] == nil { fields[name] = value }
        }
        return fields
    }
}
