import CCurl
import Foundation

/// An HTTP/2 client on libcurl's multi interface: requests to one host are multiplexed over one TLS
/// connection, reused for the client's whole life, with at most `window` requests in flight (queuing
/// far more than the server's concurrent-stream limit inside libcurl is slow).
///
/// A new connection carries one request until it has answered. Until then the client cannot know the
/// server's stream limit: the server's SETTINGS may still be on the way when libcurl sends, and APNs
/// allows one stream until a valid provider token, refusing the others (REFUSED_STREAM). libcurl 7.88
/// answers a refused stream by dropping the connection and retrying on a new one, so a full window on a
/// new connection churns connections, which Apple treats as an attack, and gives up on some requests.
/// The server's SETTINGS comes before its first answer, so after that answer libcurl keeps to the limit.
///
/// libcurl 7.88 writes every HTTP/2 frame with a send of its own (a request's HEADERS, its DATA, and the
/// RST_STREAM it sends as it lets go of a finished stream), and with TCP_NODELAY each leaves as a TCP
/// segment of its own: three per push, each waking the server. The client corks its connections
/// (TCP_CORK) and pushes out what waits every ``requestsPerPush`` new requests, and always before it waits
/// for an answer, so nothing is held back while the client sleeps: many pushes leave as one segment.
///
/// Requests that carry different ``HTTPRequest/connectionKey``s never share a connection: a request whose key
/// differs from the one before it waits until nothing is in flight, the client then closes its connections and
/// the request opens a new one. APNs counts provider-token updates per connection, and answers a token that
/// replaces another within 20 minutes of the first being seen there with `TooManyProviderTokenUpdates`, so a
/// connection opened late in a token's life must not carry the next one.
///
/// Thread rules: a client (its `CURLM` and the `CURL` handles it pools) is used from one thread at
/// a time. It is not `Sendable`.
public final class HTTP2Client {
    /// How the client connects.
    public struct Configuration: Sendable {
        /// Extra CA bundle (PEM) to trust, for private or test setups. TLS verification is always on.
        public var caFile: String?
        public var connectTimeout: Duration = .seconds(10)
        /// Per request, from being handed to libcurl to the last byte of the answer.
        public var requestTimeout: Duration = .seconds(30)
        /// Requests in flight at once, per client, once every connection has answered (one before).
        /// Keep it at or under the server's SETTINGS_MAX_CONCURRENT_STREAMS (APNs ~1000, FCM ~100).
        public var window: Int = 100
        /// Connections per host. One is what APNs asks for; more only for throughput.
        public var connectionsPerHost: Int = 1
        /// The most of a response body kept. A longer one (a proxy's error page, a broken endpoint) is cut
        /// off there: the stream is cancelled and the response comes back with what was kept, its status
        /// and its headers. APNs and FCM answers are at most a few KB; 100 streams may be in flight.
        public var maximumResponseBody = 64 * 1024
        /// The most response header bytes kept per response; headers beyond are dropped.
        public var maximumResponseHeaderBytes = 16 * 1024

        public init(caFile: String? = nil, window: Int = 100) {
            self.caFile = caFile
            self.window = window
        }
    }

    public let configuration: Configuration
    /// libcurl's multi handle: the transfers and the connections it keeps. Replaced (with its connections
    /// closed) when the requests' connection key changes.
    private var multi: UnsafeMutableRawPointer
    private var idle: [Transfer] = []
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    /// What libcurl's socket, timer and open/close-socket callbacks tell the client.
    private let watch: SocketWatch
    /// Requests in flight to a host with no connection that has answered yet (they open or wait for one).
    private var unprovenRequests = 0
    /// The connection key of the last request started that had one: the connections open now carried it.
    private var connectionKey: Int?
    /// A request taken from `next` with a new connection key, waiting for what is in flight to finish.
    private var waitingForNewConnection: HTTPRequest?
    /// Requests a connection's GOAWAY kept off the wire (curl 16 with no answer), to start again before new ones.
    private var resendAfterGoaway: [HTTPRequest] = []
    /// The tags of the requests started again so (each once per `run`).
    private var resentOnce = Set<Int>()
    /// When the client last had a request in flight: after half a second without, its connections are checked for
    /// what the server said meanwhile before the next request goes out (``SocketWatch/idleConnectionHasNews()``).
    private var lastBusy = ContinuousClock.now
    /// New requests handed to libcurl before they are sent and pushed out together: enough that several share
    /// a segment, few enough that the server starts on them while the client prepares the next ones (one
    /// push for a window of 100 makes the two take turns). With `make bench-outbox` on 2 cores, 16 to 64 did
    /// equally well (push-bench 38,000–39,000 pushes/s), 4 and 8 less (34,000 and 37,000), 100 worst (25,000).
    static let requestsPerPush = 32

    /// Fails when libcurl was built without HTTP/2.
    public init(_ configuration: Configuration) throws {
        HTTP2Client.globalInit
        guard let info = ccurl_version_info(), info.pointee.features & Int32(CCURL_VERSION_HTTP2) != 0 else {
            throw HTTPTransportError(.notHTTP2, "this libcurl has no HTTP/2 support: install libcurl4-openssl-dev (libcurl 7.62 or later with nghttp2)")
        }
        self.configuration = configuration
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            throw HTTPTransportError(.connect, "epoll_create1 failed: \(String(cString: strerror(errno)))")
        }
        watch = SocketWatch(epoll: epoll)
        guard let multi = HTTP2Client.makeMulti(configuration, watch: watch) else {
            close(epoll)
            throw HTTPTransportError(.connect, "curl_multi_init failed")
        }
        self.multi = multi
    }

    /// A multi handle set up for `configuration`, reporting to `watch`; nil when libcurl cannot make one.
    private static func makeMulti(_ configuration: Configuration, watch: SocketWatch) -> UnsafeMutableRawPointer? {
        guard let multi = curl_multi_init() else { return nil }
        ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CCURLPIPE_MULTIPLEX))
        ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.connectionsPerHost)
        ccurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.window)
        // libcurl's socket interface: libcurl says which sockets to watch and when to call back; the
        // client waits on them with epoll and hands libcurl only what is ready, so an answer on one
        // stream costs no poll() of every transfer (what curl_multi_perform + curl_multi_poll do).
        let context = Unmanaged.passUnretained(watch).toOpaque()
        ccurl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, context)
        ccurl_multi_setopt_socket_function(multi) { _, fd, what, context, _ in
            let watch = Unmanaged<SocketWatch>.fromOpaque(context!).takeUnretainedValue()
            return ccurl_epoll_watch(watch.epoll, fd, what) == 0 ? 0 : -1
        }
        ccurl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, context)
        ccurl_multi_setopt_timer_function(multi) { _, milliseconds, context in
            let watch = Unmanaged<SocketWatch>.fromOpaque(context!).takeUnretainedValue()
            watch.timerDeadline = milliseconds < 0 ? nil : ContinuousClock.now + .milliseconds(milliseconds)
            return 0
        }
        return multi
    }

    deinit {
        for transfer in active.values { curl_multi_remove_handle(multi, transfer.easy) }
        active.removeAll()
        idle.removeAll()
        curl_multi_cleanup(multi)
        close(watch.epoll)
    }

    private static let globalInit: Void = { curl_global_init(Int(CCURL_GLOBAL_ALL)) }()

    /// Sends every request `next` yields, keeping up to `window` in flight, and calls `completed`
    /// for each as it finishes (in completion order). `next` is asked again after every completion,
    /// so work that a completion creates (a resend) is picked up. Returns when `next` returns nil
    /// and nothing is in flight. `tick` is called after every wait (at least once a second while
    /// anything is in flight), for work that must not wait for the next answer.
    public func run(next: () -> HTTPRequest?, completed: (HTTPRequest, Result<HTTPResponse, HTTPTransportError>) -> Void,
                    tick: () -> Void = {}) {
        var exhausted = false
        while true {
            var startedSincePush = 0
            while !exhausted && active.count < currentWindow {
                guard let request = waitingForNewConnection ?? resendAfterGoaway.popLast() ?? next() else { exhausted = true; break }
                waitingForNewConnection = nil
                if let key = request.connectionKey, key != connectionKey {
                    if connectionKey != nil {
                        guard active.isEmpty else { waitingForNewConnection = request; break }
                        guard closeConnections() else {
                            completed(request, .failure(HTTPTransportError(.notStarted, "\(HTTP2Client.origin(request.url)): no new connection: curl_multi_init failed")))
                            continue
                        }
                    }
                    connectionKey = key
                }
                if let startBy = request.startBy, ContinuousClock.now > startBy {
                    completed(request, .failure(HTTPTransportError(.notStarted, "\(HTTP2Client.origin(request.url)): not started in time")))
                    continue
                }
                if active.isEmpty && ContinuousClock.now - lastBusy > .milliseconds(500) && watch.idleConnectionHasNews() {
                    // A GOAWAY (or the close) that came while idle: the next request goes on a new connection.
                    _ = closeConnections()
                }
                start(request)
                startedSincePush += 1
                if startedSincePush == HTTP2Client.requestsPerPush {
                    sendStarted()
                    startedSincePush = 0
                }
            }
            if active.isEmpty {
                watch.pushCorked()
                resentOnce.removeAll()
                return
            }
            wait()
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                guard let transfer = active.removeValue(forKey: easy) else { continue }
                // Which connection answered: libcurl knows it only until the handle is removed.
                if transfer.answered(code) && watch.unansweredConnections > 0 { connectionAnswered(transfer) }
                curl_multi_remove_handle(multi, easy)
                if transfer.unproven {
                    transfer.unproven = false
                    unprovenRequests -= 1
                }
                let result = finish(transfer, code: code)
                let request = transfer.request!
                // No answer at all (libcurl's own "tried 5 times before giving up" is not taken: it also resends a
                // request whose reused connection died after the server took it). Sending it again now is no more a
                // risk of a second delivery than the retry it replaces, which sent it again 15-30 s later.
                let neverOnTheWire = code == CURLE_HTTP2 && transfer.responseHeaders.isEmpty
                transfer.reset()
                idle.append(transfer)
                if neverOnTheWire && resentOnce.insert(request.tag).inserted {
                    // libcurl 7.88 puts a request on a connection whose GOAWAY it has read (the server recycled it,
                    // or closed it idle): "Error in the HTTP2 framing layer" (curl 16), no answer. libcurl drops that
                    // connection; the request goes again at once, once, on a new one (as a retry it waited 15-30 s
                    // with an attempt counted, and went again all the same).
                    resendAfterGoaway.append(request)
                    exhausted = false
                    continue
                }
                completed(request, result)
                if active.isEmpty { lastBusy = ContinuousClock.now }
                // A completion may have produced more work (a resend after a credential refresh): ask again.
                exhausted = false
            }
            tick()
        }
    }

    /// Closes every connection, with nothing in flight: libcurl closes the connections it keeps only with its
    /// multi handle, so the client takes a new one. False when libcurl cannot make one (out of memory); the
    /// old one is then kept.
    private func closeConnections() -> Bool {
        guard let fresh = HTTP2Client.makeMulti(configuration, watch: watch) else { return false }
        curl_multi_cleanup(multi)
        multi = fresh
        watch.timerDeadline = nil
        watch.forgetConnections()
        return true
    }

    /// `configuration.window`, or 1 while a connection has not answered or a request is on its way to a host
    /// without an answered connection (no socket yet: libcurl opens it only once it runs the transfer).
    private var currentWindow: Int {
        watch.unansweredConnections == 0 && unprovenRequests == 0 ? configuration.window : 1
    }

    /// `transfer` got an answer: its connection (if libcurl still has it open) has now shown its settings.
    private func connectionAnswered(_ transfer: Transfer) {
        var socket = curl_socket_t(CCURL_SOCKET_BAD)
        guard ccurl_easy_getinfo_socket(transfer.easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK,
              socket != curl_socket_t(CCURL_SOCKET_BAD), let url = transfer.request?.url else { return }
        watch.answered(socket, origin: HTTP2Client.originPrefix(url))
    }

    /// Has libcurl send the requests just added (their handles are due at once) and pushes them out.
    private func sendStarted() {
        var running: Int32 = 0
        curl_multi_socket_action(multi, curl_socket_t(CCURL_SOCKET_TIMEOUT), 0, &running)
        watch.pushCorked()
    }

    /// Waits for a socket libcurl watches to be ready, or for libcurl's timer, and lets libcurl act on it.
    /// Never blocks longer than a second, so a lost timer cannot hang a job (libcurl's own timeouts
    /// still bound every transfer). When the timer is already due, ready sockets are still collected
    /// (without waiting), so libcurl learns of them along with the timeout. What libcurl wrote is pushed
    /// out before the client sleeps and after libcurl acted.
    private func wait() {
        var timeout: Int32 = 1000
        if let deadline = watch.timerDeadline {
            let left = ContinuousClock.now.duration(to: deadline)
            timeout = left <= .zero ? 0 : Int32(min(1000, left.milliseconds + 1))
        }
        if timeout > 0 { watch.pushCorked() }
        let ready = ccurl_epoll_wait(watch.epoll, &watch.readyFDs, &watch.readyMasks, Int32(watch.readyFDs.count), timeout)
        var running: Int32 = 0
        for index in 0..<max(0, Int(ready)) {
            curl_multi_socket_action(multi, watch.readyFDs[index], watch.readyMasks[index], &running)
        }
        if let deadline = watch.timerDeadline, deadline <= ContinuousClock.now {
            watch.timerDeadline = nil
            curl_multi_socket_action(multi, curl_socket_t(CCURL_SOCKET_TIMEOUT), 0, &running)
        } else if ready <= 0 && watch.timerDeadline == nil {
            // A second with no event and no timer: let libcurl look at everything (cheap, and it cannot
            // be left waiting for a callback it failed to make).
            curl_multi_socket_action(multi, curl_socket_t(CCURL_SOCKET_TIMEOUT), 0, &running)
        }
        watch.pushCorked()
    }

    /// Sends `requests` and returns their results in the same order.
    public func send(_ requests: [HTTPRequest]) -> [Result<HTTPResponse, HTTPTransportError>] {
        var results = [Result<HTTPResponse, HTTPTransportError>?](repeating: nil, count: requests.count)
        var index = 0
        run(next: {
            guard index < requests.count else { return nil }
            var request = requests[index]
            request.tag = index
            index += 1
            return request
        }, completed: { request, result in results[request.tag] = result })
        return results.map { $0! }
    }

    private func start(_ request: HTTPRequest) {
        let transfer = idle.popLast() ?? Transfer(configuration: configuration, watch: watch)
        transfer.prepare(request)
        if !watch.hasAnsweredConnection(to: request.url) {
            transfer.unproven = true
            unprovenRequests += 1
        }
        active[transfer.easy] = transfer
        curl_multi_add_handle(multi, transfer.easy)
    }

    private func finish(_ transfer: Transfer, code: CURLcode) -> Result<HTTPResponse, HTTPTransportError> {
        guard transfer.answered(code) else {
            let detail = transfer.errorText.isEmpty ? String(cString: curl_easy_strerror(code)) : transfer.errorText
            let url = transfer.request?.url ?? "?"
            switch code {
            case CURLE_OPERATION_TIMEDOUT:
                // Timed out before the request went out (the connection or its TLS handshake never completed: a
                // firewall that drops packets): nothing reached the provider, so it is no attempt.
                var pretransfer: curl_off_t = 0
                ccurl_easy_getinfo_off(transfer.easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer)
                if pretransfer == 0 {
                    return .failure(HTTPTransportError(.connect, "\(HTTP2Client.origin(url)): cannot connect: \(detail)"))
                }
                return .failure(HTTPTransportError(.timeout, "\(HTTP2Client.origin(url)): timed out: \(detail)"))
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR:
                return .failure(HTTPTransportError(.connect, "\(HTTP2Client.origin(url)): cannot connect: \(detail)"))
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
                return .failure(HTTPTransportError(.untrusted, "\(HTTP2Client.origin(url)): TLS refused: \(detail) (check PUSH_CA_FILE, or a proxy that intercepts TLS)"))
            case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
                return .failure(HTTPTransportError(.unusableURL, "\(HTTP2Client.origin(url)): libcurl cannot use the URL: \(detail) (curl \(code.rawValue); check the endpoint setting)"))
            default:
                return .failure(HTTPTransportError(.broken, "\(HTTP2Client.origin(url)): \(detail) (curl \(code.rawValue))"))
            }
        }
        var version = 0
        ccurl_easy_getinfo_long(transfer.easy, CURLINFO_HTTP_VERSION, &version)
        var status = 0
        ccurl_easy_getinfo_long(transfer.easy, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headers: transfer.responseHeaders, body: transfer.responseBody,
                                     bodyCutOff: transfer.bodyCutOff, withoutHTTP2: version != CURL_HTTP_VERSION_2_0))
    }

    /// `scheme://authority` of a URL as written (what comes before the path, query or fragment): the key of
    /// the connection libcurl uses for it.
    static func originPrefix(_ url: String) -> String {
        let bytes = url.utf8
        var index = bytes.startIndex
        if let scheme = url.range(of: "://") { index = scheme.upperBound.samePosition(in: bytes) ?? index }
        while index != bytes.endIndex, !isPathStart(bytes[index]) { index = bytes.index(after: index) }
        return String(url[..<index])
    }

    /// Whether `url` begins with `origin` (from ``originPrefix(_:)``) and its path, query or fragment follows.
    static func url(_ url: String, isOn origin: String) -> Bool {
        let bytes = url.utf8
        guard bytes.starts(with: origin.utf8) else { return false }
        let rest = bytes.index(bytes.startIndex, offsetBy: origin.utf8.count)
        return rest == bytes.endIndex || isPathStart(bytes[rest])
    }

    private static func isPathStart(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
    }

    /// `https://host:port` of a URL, for messages (paths hold device tokens).
    public static func origin(_ url: String) -> String {
        guard let components = URLComponents(string: url), let host = components.host else { return "?" }
        return "\(components.scheme ?? "https")://\(host)" + (components.port.map { ":\($0)" } ?? "")
    }
}

/// The sockets libcurl asked the client to watch (an epoll set), the timer it asked for, and the connections
/// it opened. A separate object so libcurl's callbacks never touch the client itself, not even while it is
/// being torn down (curl_multi_cleanup closes the connections it kept, through the close-socket callback).
final class SocketWatch {
    let epoll: Int32
    /// When libcurl wants `curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`; nil when it set no timer.
    var timerDeadline: ContinuousClock.Instant?
    /// What one epoll_wait returned: sockets and their CURL_CSELECT_* masks.
    var readyFDs = [curl_socket_t](repeating: 0, count: 16)
    var readyMasks = [Int32](repeating: 0, count: 16)
    /// The connections libcurl has open (a few: one per host), each with the origin it answered for, or nil
    /// until its first answer, and whether it is corked.
    private(set) var connections: [(socket: curl_socket_t, origin: String?, corked: Bool)] = []
    /// Connections that have not answered yet.
    private(set) var unansweredConnections = 0

    /// Whether a connection kept while the client was idle has something to read: the server said something
    /// meanwhile (a GOAWAY: it closed an idle connection, `IdleTimeout`), which libcurl, watching no socket
    /// between transfers, has not read. libcurl 7.88 would put the next request on it and fail it with
    /// "Error in the HTTP2 framing layer" (curl 16).
    func idleConnectionHasNews() -> Bool {
        for connection in connections {
            var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 0) > 0 { return true }
        }
        return false
    }

    init(epoll: Int32) { self.epoll = epoll }

    /// libcurl opened a connection's socket.
    func opened(_ socket: curl_socket_t) {
        connections.append((socket, nil, ccurl_cork_socket(socket) == 0))
        unansweredConnections += 1
    }

    /// Sends what libcurl wrote to the corked connections and what still waits behind their cork.
    func pushCorked() {
        for connection in connections where connection.corked { _ = ccurl_push_socket(connection.socket) }
    }

    /// The multi handle was replaced: its connections are gone, closed or not through ``closed(_:)``.
    func forgetConnections() {
        connections.removeAll()
        unansweredConnections = 0
    }

    /// libcurl closed a socket (a connection, or a connection attempt that lost or failed).
    func closed(_ socket: curl_socket_t) {
        guard let index = connections.firstIndex(where: { $0.socket == socket }) else { return }
        if connections[index].origin == nil { unansweredConnections -= 1 }
        connections.remove(at: index)
    }

    /// The connection on `socket` answered a request to `origin`.
    func answered(_ socket: curl_socket_t, origin: String) {
        guard let index = connections.firstIndex(where: { $0.socket == socket }), connections[index].origin == nil else { return }
        connections[index].origin = origin
        unansweredConnections -= 1
    }

    /// Whether a connection that has answered serves `url`'s host.
    func hasAnsweredConnection(to url: String) -> Bool {
        for connection in connections {
            if let origin = connection.origin, HTTP2Client.url(url, isOn: origin) { return true }
        }
        return false
    }
}

/// One pooled `CURL` easy handle and the buffers of its current request. The options that never
/// change are set once when the handle is made; a request sets only its URL, body and headers.
final class Transfer {
    let easy: UnsafeMutableRawPointer
    var request: HTTPRequest?
    /// `PUSH_CURL_VERBOSE=1` makes libcurl trace every transfer on stderr. The trace holds the authorization
    /// header and the device token in the path, so it is for a fake on this machine only: a transfer to any
    /// other host is not traced (said once on stderr).
    static let verbose = ProcessInfo.processInfo.environment["PUSH_CURL_VERBOSE"] == "1"
    private static let refusedVerbose = OnceFlag()

    /// Whether libcurl may trace a transfer to `url`: asked for, and its host is this machine.
    static func traces(_ url: String, asked: Bool = verbose) -> Bool {
        guard asked else { return false }
        let host = URLComponents(string: url)?.host?.lowercased() ?? ""
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        let loopbackIPv4 = octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
        if host == "localhost" || host == "::1" || host == "[::1]" || loopbackIPv4 { return true }
        if refusedVerbose.setFirstTime() {
            FileHandle.standardError.write(Data("PUSH_CURL_VERBOSE ignored for \(HTTP2Client.origin(url)): its trace would print the provider credentials and device tokens; it traces transfers to this machine (a local fake) only\n".utf8))
        }
        return false
    }
    /// Whether a proxy variable libcurl honours is set (it ignores upper-case HTTP_PROXY on purpose).
    static let proxyFromEnvironment: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].contains { !(environment[$0] ?? "").isEmpty }
    }()
    /// The request goes to a host without an answered connection (see ``HTTP2Client/currentWindow``).
    var unproven = false
    var responseBody: [UInt8] = []
    var responseHeaders: [(String, String)] = []
    /// The body went past `maximumBody` and the rest was refused.
    var bodyCutOff = false
    /// Whether the server answered: the transfer completed, or its body was cut off (the refusal is libcurl's
    /// CURLE_WRITE_ERROR).
    func answered(_ code: CURLcode) -> Bool { code == CURLE_OK || (code == CURLE_WRITE_ERROR && bodyCutOff) }
    let maximumBody: Int
    let maximumHeaderBytes: Int
    private var headerBytes = 0
    var headerList: UnsafeMutablePointer<curl_slist>?
    private var headerLine: [UInt8] = []
    /// libcurl writes error details here during the transfer, so it must outlive every call: heap memory.
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    init(configuration: HTTP2Client.Configuration, watch: SocketWatch) {
        easy = curl_easy_init()!
        maximumBody = configuration.maximumResponseBody
        maximumHeaderBytes = configuration.maximumResponseHeaderBytes
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        let me = Unmanaged.passUnretained(self).toOpaque()
        ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        ccurl_easy_setopt_long(easy, CURLOPT_VERBOSE, 0)
        ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
        ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
        // libcurl reads the proxy variables on every request. When none is set, say so once; when one is,
        // libcurl keeps applying them (and no_proxy) as always.
        if !Transfer.proxyFromEnvironment { ccurl_easy_setopt_string(easy, CURLOPT_PROXY, "") }
        if let ca = configuration.caFile { ccurl_easy_setopt_string(easy, CURLOPT_CAINFO, ca) }
        ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(configuration.requestTimeout.milliseconds))
        ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        ccurl_easy_setopt_write_function(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            let kept = min(length, max(0, transfer.maximumBody - transfer.responseBody.count))
            data!.withMemoryRebound(to: UInt8.self, capacity: length) {
                transfer.responseBody.append(contentsOf: UnsafeBufferPointer(start: $0, count: kept))
            }
            guard kept == length else {
                // Too long: libcurl cancels the stream on the short count (CURLE_WRITE_ERROR).
                transfer.bodyCutOff = true
                return 0
            }
            return length
        }
        ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        ccurl_easy_setopt_header_function(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            data!.withMemoryRebound(to: UInt8.self, capacity: length) {
                transfer.header(UnsafeBufferPointer(start: $0, count: length))
            }
            return length
        }
        ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
        // libcurl makes and closes connection sockets through the client, which so learns when a connection is
        // new (one request until it answers). libcurl keeps these callbacks with the connection and calls the
        // close one from curl_multi_cleanup too: the watch outlives it.
        let watchContext = Unmanaged.passUnretained(watch).toOpaque()
        ccurl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, watchContext)
        ccurl_easy_setopt_opensocket_function(easy) { context, purpose, address in
            let socket = ccurl_open_socket(address!)
            if socket >= 0 && purpose == CURLSOCKTYPE_IPCXN {
                Unmanaged<SocketWatch>.fromOpaque(context!).takeUnretainedValue().opened(socket)
            }
            return socket
        }
        ccurl_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, watchContext)
        ccurl_easy_setopt_closesocket_function(easy) { context, socket in
            Unmanaged<SocketWatch>.fromOpaque(context!).takeUnretainedValue().closed(socket)
            return close(socket)
        }
    }

    deinit {
        curl_slist_free_all(headerList)
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
    }

    var errorText: String { String(cString: errorBuffer) }

    func prepare(_ request: HTTPRequest) {
        self.request = request
        ccurl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        if Transfer.verbose { ccurl_easy_setopt_long(easy, CURLOPT_VERBOSE, Transfer.traces(request.url) ? 1 : 0) }
        ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method == "POST" ? nil : request.method)
        if request.method == "POST" || !request.body.isEmpty {
            ccurl_easy_setopt_long(easy, CURLOPT_POST, 1)
            // COPYPOSTFIELDS copies the body: libcurl does not copy plain POSTFIELDS.
            ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            request.body.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    _ = ccurl_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, $0)
                }
            }
        } else {
            ccurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        }
        curl_slist_free_all(headerList)
        headerList = nil
        for (name, value) in request.headers {
            // "name: value" NUL-terminated in a reused buffer (curl_slist_append copies it).
            headerLine.removeAll(keepingCapacity: true)
            headerLine.append(contentsOf: name.utf8)
            headerLine.append(UInt8(ascii: ":"))
            headerLine.append(UInt8(ascii: " "))
            headerLine.append(contentsOf: value.utf8)
            headerLine.append(0)
            headerList = headerLine.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { curl_slist_append(headerList, $0.baseAddress) }
            }
        }
        // libcurl adds "Expect: 100-continue" to large POSTs over HTTP/1.1 and "Accept: */*" to every
        // request; an empty value suppresses each.
        headerList = curl_slist_append(headerList, "expect:")
        headerList = curl_slist_append(headerList, "accept:")
        ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
    }

    /// Response headers kept even beyond `maximumHeaderBytes`: what the push outcomes are decided by.
    static let alwaysKeptHeaders: Set<[UInt8]> = [Array("apns-id".utf8), Array("retry-after".utf8)]

    /// One response header line, as libcurl hands it over: `name: value\r\n`, or the status line.
    func header(_ line: UnsafeBufferPointer<UInt8>) {
        if line.count >= 5 && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T") && line[2] == UInt8(ascii: "T") && line[3] == UInt8(ascii: "P") {
            responseHeaders.removeAll(keepingCapacity: true) // a new response (after 100 Continue, or a retry)
            headerBytes = 0
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        var name = [UInt8](line[..<colon])
        for i in name.indices where name[i] >= 65 && name[i] <= 90 { name[i] += 32 }
        // Beyond the cap only the headers an answer is classified by are kept.
        headerBytes += line.count
        if headerBytes > maximumHeaderBytes {
            // Beyond the cap, only the first of each header an answer is judged by (a flood of them is no less a flood).
            guard Transfer.alwaysKeptHeaders.contains(name) else { return }
            let text = String(decoding: name, as: UTF8.self)
            guard !responseHeaders.contains(where: { $0.0 == text }) else { return }
        }
        var start = colon + 1
        var end = line.count
        while start < end && (line[start] == 32 || line[start] == 9) { start += 1 }
        while end > start && (line[end - 1] == 10 || line[end - 1] == 13 || line[end - 1] == 32) { end -= 1 }
        responseHeaders.append((String(decoding: name, as: UTF8.self), String(decoding: UnsafeBufferPointer(rebasing: line[start..<end]), as: UTF8.self)))
    }

    func reset() {
        request = nil
        responseBody.removeAll(keepingCapacity: true)
        responseHeaders.removeAll(keepingCapacity: true)
        bodyCutOff = false
        headerBytes = 0
        errorBuffer[0] = 0
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// True the first time it is set, false after: for saying something once per process.
final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var set = false

    func setFirstTime() -> Bool {
        lock.withLock {
            defer { set = true }
            return !set
        }
    }
}
