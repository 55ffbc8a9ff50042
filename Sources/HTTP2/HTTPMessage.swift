/// One HTTP request to send over HTTP/2.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// The caller's handle for this request (a delivery id, an index): handed back with the response.
    public var tag: Int
    /// Requests with different keys never share a connection; nil: any connection. For credentials a server
    /// tracks per connection (APNs provider tokens): see ``HTTP2Client``.
    public var connectionKey: Int?
    /// Not started after this instant (it may wait in the client for a new connection): it comes back as a
    /// ``HTTPTransportError/Kind/notStarted`` failure instead, and nothing was sent. Nil: no limit.
    public var startBy: ContinuousClock.Instant?

    public init(method: String = "POST", url: String, headers: [(String, String)], body: [UInt8], tag: Int = 0) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.tag = tag
    }
}

/// A response as received.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names in lower case, in the order received.
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// The body was longer than the client keeps (``HTTP2Client/Configuration/maximumResponseBody``): `body`
    /// is its beginning, and the rest was refused.
    public var bodyCutOff: Bool
    /// The answer came over HTTP/1.1: ALPN did not negotiate h2 (a proxy in between, or not the provider's
    /// server). Read all the same: the request was sent and answered, and an answer thrown away sent the push
    /// again on every run. The caller decides whether to go on.
    public var withoutHTTP2: Bool

    public init(status: Int, headers: [(String, String)], body: [UInt8], bodyCutOff: Bool = false, withoutHTTP2: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyCutOff = bodyCutOff
        self.withoutHTTP2 = withoutHTTP2
    }

    /// For messages about an answer that was not understood: says when its body was cut off, else nothing.
    public var cutOffNote: String { bodyCutOff ? " (its body was cut off after \(body.count) bytes)" : "" }

    /// The first header with this (case-insensitive) name.
    public func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.0 == name }?.1
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A request that got no HTTP answer.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// Could not connect (name lookup, refused, the TLS handshake broke off or never completed): the
        /// request never went out.
        case connect
        /// TLS refused what we gave it: the CA file cannot be read, or the server's certificate is not
        /// trusted by it (our setting, or a proxy that intercepts TLS), so trying again cannot help.
        case untrusted
        /// The connect or request timeout passed.
        case timeout
        /// The server does not speak HTTP/2 (APNs refuses HTTP/1.1; so do we).
        case notHTTP2
        /// libcurl cannot use the request's URL (a port out of range, a scheme it does not support): it comes
        /// from our settings, and nothing went out.
        case unusableURL
        /// The connection broke mid-request (reset, GOAWAY, protocol error).
        case broken
        /// Never started, so nothing was sent: its ``HTTPRequest/startBy`` passed while it waited, or the client
        /// could not make a new connection for it.
        case notStarted
    }

    public var kind: Kind
    public var message: String

    /// Our setup is at fault (a libcurl without HTTP/2, a CA file that cannot verify the server, an endpoint
    /// libcurl cannot use): trying again cannot help.
    public var isOurSetup: Bool { kind == .notHTTP2 || kind == .untrusted || kind == .unusableURL }

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
