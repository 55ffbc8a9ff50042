import Foundation
import NIOCore
import NIOHPACK

/// A request whose headers and body have fully arrived on one HTTP/2 stream.
struct FakeRequest {
    var method: String
    /// `:path` without its query string.
    var path: String
    /// `:path` as sent.
    var rawPath: String
    /// All header fields, pseudo-headers included, in arrival order.
    var headers: HPACKHeaders
    var body: ByteBuffer
    var streamID: Int
    var connection: ConnectionContext
    var receivedAt: Date

    /// The single value of `name`, or nil when absent.
    func header(_ name: String) -> String? { headers.first(name: name) }

    /// The body bytes as an array.
    var bodyBytes: [UInt8] { body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? [] }
}

/// What the fake answers on a stream.
struct FakeResponse {
    var status: Int
    var headers: [(String, String)] = []
    var body: String = ""
}

/// What a provider handler decided about one request.
struct HandlerOutcome {
    var response: FakeResponse
    /// APNs: the provider token's `iat`, when readable.
    var jwtIssuedAt: Int64? = nil
    /// FCM: `validate_only` was true.
    var validateOnly = false
    /// Filled for an accepted push when someone listens (``FakePushServer/Configuration/onAccepted``).
    var accepted: AcceptedPush? = nil
}

/// What the stream should do with a request, decided by ``FakePushCore/handle(_:)``.
enum StreamPlan {
    /// Write the response now, or after `delay`, then do `afterwards`; `answered` once it is written (the
    /// request's record shows the answer, and an accepted push counts, only then: a delayed answer the
    /// connection's end cut off was never given).
    case respond(FakeResponse, delay: TimeAmount?, afterwards: AfterResponse, answered: @Sendable () -> Void)
    /// Answer nothing: send GOAWAY (last-stream-id below this stream) with optional debug data, then close.
    case goAway(debugData: String?)
    /// Answer nothing: close the TCP connection.
    case drop
}

/// What happens on the connection once a response is written.
enum AfterResponse {
    case nothing
    /// Send GOAWAY naming this stream as the last one processed (with optional debug data), then close.
    case goAway(debugData: String?)
}

/// Which services a listening port stands for (``FakePushServer/Configuration/googlePort``).
enum Listener: Sendable {
    /// APNs, FCM and OAuth on one port.
    case every
    /// APNs alone, as `api.push.apple.com`.
    case apple
    /// FCM and OAuth, as Google's hosts.
    case google
}

/// The server's behaviour, independent of sockets: routing, the three providers, faults, the registry and
/// the recordings. Shared by every connection; safe to use from any thread.
final class FakePushCore: Sendable {
    let configuration: FakePushServer.Configuration
    let apnsVerifier: APNsTokenVerifier
    /// The key ids that may not push to this server's environment (restricted to the other one).
    let apnsKeysForTheOtherEnvironment: Set<String>
    let serviceAccountVerifier: ServiceAccountVerifier
    /// `"<baseURL>/token"`, known once the port is bound.
    let tokenURL = Locked<String>("")

    let registry = Locked([String: TokenState]())
    let faults = Locked(FaultQueue())
    let recording = Locked(RecordingState())
    let issuedAccessTokens = Locked([String: IssuedAccessToken]())
    let fcmQuota = Locked(QuotaWindow())
    private let connectionCounter = Locked(0)
    /// The most streams one connection has had open at once, over all connections.
    let peakOpenStreams = Locked(0)

    /// An OAuth access token the fake issued.
    struct IssuedAccessToken: Sendable {
        var expiresAt: Date
        var scope: String
    }

    init(configuration: FakePushServer.Configuration) throws {
        self.configuration = configuration
        self.apnsVerifier = try APNsTokenVerifier(keys: configuration.apnsKeys)
        let environment: APNsKey.Environment = configuration.apnsDevelopment ? .development : .production
        self.apnsKeysForTheOtherEnvironment = Set(configuration.apnsKeys.filter { $0.environment.map { $0 != environment } ?? false }.map(\.keyID))
        self.serviceAccountVerifier = try ServiceAccountVerifier(publicKeyPEM: configuration.serviceAccountPublicKeyPEM)
    }

    /// The next connection number (from 1).
    func nextConnectionID() -> Int {
        connectionCounter.withLock { counter in
            counter += 1
            return counter
        }
    }

    var connectionsAccepted: Int { connectionCounter.withLock { $0 } }

    /// A connection reached `count` open streams, more than it had before.
    func notePeakOpenStreams(_ count: Int) {
        peakOpenStreams.withLock { $0 = max($0, count) }
    }

    /// The stream limit a new connection on `listener` advertises before it has shown its provider.
    func initialMaxConcurrentStreams(on listener: Listener) -> Int {
        switch listener {
        case .every:
            return configuration.initialMaxConcurrentStreams
                ?? max(configuration.apnsMaxConcurrentStreams, configuration.fcmMaxConcurrentStreams)
        case .apple:
            return configuration.initialMaxConcurrentStreams ?? configuration.apnsMaxConcurrentStreams
        case .google:
            return configuration.fcmMaxConcurrentStreams
        }
    }

    // MARK: Routing

    /// Which provider a path belongs to.
    static func route(_ path: String) -> Provider {
        if path.hasPrefix("/3/") || path == "/3" { return .apns }
        if path.hasPrefix("/v1/projects/") { return .fcm }
        if path == "/token" { return .oauth }
        return .unknown
    }

    /// Which provider answers a path on `listener`: Apple's host answers every path as APNs does (404
    /// `BadPath` off `/3/device/`), Google's has no APNs route (its 404 page).
    static func route(_ path: String, on listener: Listener) -> Provider {
        let provider = route(path)
        switch listener {
        case .every: return provider
        case .apple: return .apns
        case .google: return provider == .apns ? .unknown : provider
        }
    }

    /// Decides the answer to a complete request, records it and counts it.
    func handle(_ request: FakeRequest) -> StreamPlan {
        let provider = Self.route(request.path, on: request.connection.listener)
        let fault: Fault? = provider == .unknown ? nil : faults.withLock { $0.isEmpty ? nil : $0.take(for: provider) }

        switch fault {
        case .dropConnection?:
            record(request, provider: provider, outcome: nil, fault: fault)
            return .drop
        case .goaway?:
            record(request, provider: provider, outcome: nil, fault: fault)
            return .goAway(debugData: provider == .apns ? #"{"reason":"Shutdown"}"# : nil)
        default:
            break
        }

        var delay: TimeAmount? = nil
        var afterwards = AfterResponse.nothing
        var outcome: HandlerOutcome
        switch fault {
        case .slow(let seconds)?:
            delay = .nanoseconds(Int64(max(0, seconds) * 1_000_000_000))
            outcome = handleNormally(request, provider: provider)
        case .shutdown?:
            outcome = HandlerOutcome(response: shutdownResponse(for: provider, request: request))
            afterwards = .goAway(debugData: provider == .apns ? #"{"reason":"Shutdown"}"# : nil)
        case let fault?:
            if let response = faultResponse(fault, for: provider, request: request) {
                outcome = HandlerOutcome(response: response)
            } else {
                outcome = handleNormally(request, provider: provider)
            }
        case nil:
            outcome = handleNormally(request, provider: provider)
        }
        if delay == nil, configuration.responseLatency > 0, provider == .apns || provider == .fcm {
            delay = .nanoseconds(Int64(configuration.responseLatency * 1_000_000_000))
        }

        let index = record(request, provider: provider, outcome: outcome, fault: fault, answered: false)
        let answer = outcome
        return .respond(outcome.response, delay: delay, afterwards: afterwards, answered: { [self] in
            self.answered(index, outcome: answer)
        })
    }

    /// The answer to the request recorded at `index` (nil: recording is off) was written.
    private func answered(_ recorded: (index: Int, epoch: Int)?, outcome: HandlerOutcome) {
        let accepted = outcome.response.status == 200
        recording.withLock { state in
            if accepted { state.accepted += 1 }
            guard let (index, epoch) = recorded, epoch == state.epoch, index < state.requests.count else { return }
            state.requests[index].status = outcome.response.status
            state.requests[index].responseHeaders = outcome.response.headers
            state.requests[index].responseBody = outcome.response.body
        }
        if accepted, let push = outcome.accepted { configuration.onAccepted?(push) }
    }

    private func handleNormally(_ request: FakeRequest, provider: Provider) -> HandlerOutcome {
        switch provider {
        case .apns: return handleAPNs(request)
        case .fcm: return handleFCM(request)
        case .oauth: return handleOAuth(request)
        case .unknown: return HandlerOutcome(response: GoogleErrors.notFoundPage(path: request.rawPath))
        }
    }

    private func faultResponse(_ fault: Fault, for provider: Provider, request: FakeRequest) -> FakeResponse? {
        // A proxy's page is the same whichever service is behind it.
        if case .proxyErrorPage(let bytes) = fault { return .proxyErrorPage(bytes: bytes) }
        switch provider {
        case .apns: return apnsFaultResponse(fault, request: request)
        case .fcm: return fcmFaultResponse(fault)
        case .oauth: return oauthFaultResponse(fault)
        case .unknown: return nil
        }
    }

    private func shutdownResponse(for provider: Provider, request: FakeRequest) -> FakeResponse {
        switch provider {
        case .apns:
            return apnsError(503, "Shutdown", apnsID: request.connection.responseAPNsID(for: request))
        default:
            return GoogleErrors.response(status: 503, grpcStatus: "UNAVAILABLE", message: "The service is currently unavailable.")
        }
    }

    // MARK: Recording

    /// Records a request (its answer too, unless `answered` is false: ``answered(_:outcome:)`` fills it in once
    /// written); returns where it is in the recording, nil when recording is off.
    @discardableResult
    private func record(_ request: FakeRequest, provider: Provider, outcome: HandlerOutcome?, fault: Fault?, answered: Bool = true) -> (index: Int, epoch: Int)? {
        let accepted = answered && outcome?.response.status == 200
        guard configuration.recordRequests else {
            recording.withLock { state in
                state.received += 1
                if accepted { state.accepted += 1 }
            }
            return nil
        }
        var headers: [(String, String)] = []
        headers.reserveCapacity(request.headers.count)
        for (name, value, _) in request.headers where !name.hasPrefix(":") {
            headers.append((name, value))
        }
        let recorded = RecordedRequest(
            provider: provider,
            method: request.method,
            path: request.rawPath,
            headers: headers,
            body: Data(request.body.readableBytesView),
            connectionID: request.connection.id,
            streamID: request.streamID,
            status: answered ? outcome?.response.status ?? 0 : 0,
            responseHeaders: answered ? outcome?.response.headers ?? [] : [],
            responseBody: answered ? outcome?.response.body ?? "" : "",
            jwtIssuedAt: outcome?.jwtIssuedAt.map { Int($0) },
            fault: fault,
            validateOnly: outcome?.validateOnly ?? false,
            receivedAt: request.receivedAt)
        return recording.withLock { state in
            state.received += 1
            if accepted { state.accepted += 1 }
            state.requests.append(recorded)
            return (state.requests.count - 1, state.epoch)
        }
    }
}
