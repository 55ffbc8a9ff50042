import Foundation
import HTTP2

/// One push provider as the outbox engine sees it: turn a message into a request with current
/// credentials, read the answer, and refresh credentials when the provider asks.
public protocol PushProvider: AnyObject {
    var name: String { get }
    /// Gets what sending needs up front (FCM: an access token). Throws when the provider is unusable.
    func prepare() throws(PushOutcomeError)
    func request(_ message: PushMessage, target: PushTarget, tag: Int) -> HTTPRequest
    func classify(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome
    /// After `.reauthenticate`: true when fresh credentials were obtained and a resend makes sense, false
    /// when none can be made; throws when getting them failed (FCM's token endpoint: for now, or for good).
    func refreshCredentials() throws(PushOutcomeError) -> Bool
    /// Goes up whenever the credential that requests carry changes, so a caller can tell an answer to
    /// an old credential (resend with the new one) from one to the current credential (refresh).
    var credentialGeneration: Int { get }
    /// What a push that succeeded proves right about our setup for `environment` (the host and the topic, the
    /// project): a token answered as if it could be our setup's fault is retired once a push with the same
    /// setup has succeeded.
    func setup(of environment: PushTarget.APNsEnvironment?) -> String
}

/// APNs with token authentication.
public final class APNsProvider: PushProvider {
    public let name = "apns"
    public let tokens: APNsTokenFactory
    public let builder: APNsRequestBuilder
    /// The provider token in use, with what requests carry of it.
    private var inUse: TokenInUse
    public private(set) var credentialGeneration = 0

    private struct TokenInUse {
        let token: String
        /// The `authorization` header value.
        let header: String
        /// A new token goes out on a new connection: APNs counts token updates per connection, and one that
        /// opened late in the old token's life would see the new within minutes (TooManyProviderTokenUpdates).
        /// Made from the token itself, so providers with other keys that share a client never share one either.
        let connectionKey: Int

        init(_ token: String) {
            self.token = token
            header = "bearer " + token
            connectionKey = token.hashValue
        }
    }

    /// `tokens`: the process's factory for these credentials, shared by every provider that sends with them;
    /// nil makes one of its own on `clock`.
    public init(credentials: APNsCredentials, productionEndpoint: String = APNsRequestBuilder.productionEndpoint,
                sandboxEndpoint: String = APNsRequestBuilder.sandboxEndpoint, clock: @escaping () -> Date = Date.init,
                tokens: APNsTokenFactory? = nil) {
        self.tokens = tokens ?? APNsTokenFactory(credentials: credentials, clock: clock)
        builder = APNsRequestBuilder(topic: credentials.topic, productionEndpoint: productionEndpoint, sandboxEndpoint: sandboxEndpoint)
        inUse = TokenInUse(self.tokens.token())
    }

    public func prepare() throws(PushOutcomeError) {}

    public func request(_ message: PushMessage, target: PushTarget, tag: Int) -> HTTPRequest {
        let current = tokens.token()
        if current != inUse.token {
            inUse = TokenInUse(current)
            credentialGeneration += 1
        }
        var request = builder.request(message, target: target, authorizationHeader: inUse.header, tag: tag)
        request.connectionKey = inUse.connectionKey
        return request
    }

    public func classify(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        APNsOutcome.classify(result)
    }

    public func setup(of environment: PushTarget.APNsEnvironment?) -> String {
        (environment == .sandbox ? builder.sandboxEndpoint : builder.productionEndpoint) + " topic " + builder.topic
    }

    public func refreshCredentials() throws(PushOutcomeError) -> Bool {
        guard let fresh = tokens.refreshAfterExpiry(of: inUse.token) else { return false }
        inUse = TokenInUse(fresh)
        credentialGeneration += 1
        return true
    }
}

/// FCM HTTP v1 with a service account.
public final class FCMProvider: PushProvider {
    public let name = "fcm"
    public let builder: FCMRequestBuilder
    public let accessTokens: GoogleAccessTokens
    private let clock: () -> Date
    private var accessToken: String? {
        didSet { if accessToken != oldValue { credentialGeneration += 1 } }
    }
    public private(set) var credentialGeneration = 0

    /// `accessTokens`: the process's tokens for this account, shared by every provider that sends with it;
    /// nil makes its own.
    public init(account: GoogleServiceAccount, endpoint: String = FCMRequestBuilder.endpoint, http: HTTP2Client.Configuration,
                clock: @escaping () -> Date = Date.init, accessTokens: GoogleAccessTokens? = nil) throws {
        builder = FCMRequestBuilder(projectID: account.projectID, endpoint: endpoint)
        self.accessTokens = try accessTokens ?? GoogleAccessTokens(account: account, http: http, clock: clock)
        self.clock = clock
    }

    public func prepare() throws(PushOutcomeError) {
        accessToken = try accessTokens.token()
    }

    public func request(_ message: PushMessage, target: PushTarget, tag: Int) -> HTTPRequest {
        if let fresh = try? accessTokens.token() { accessToken = fresh }
        return builder.request(message, target: target, accessToken: accessToken ?? "", now: clock(), tag: tag)
    }

    public func classify(_ result: Result<HTTPResponse, HTTPTransportError>) -> PushOutcome {
        FCMOutcome.classify(result)
    }

    public func setup(of environment: PushTarget.APNsEnvironment?) -> String { builder.url }

    public func refreshCredentials() throws(PushOutcomeError) -> Bool {
        accessToken = try accessTokens.refresh(replacing: accessToken)
        return true
    }
}
