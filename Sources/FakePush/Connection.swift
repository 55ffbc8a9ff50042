import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Per-connection state: the APNs provider token in use, the advertised stream limit, the last FCM bearer.
///
/// Only touched on the connection's event loop (HTTP/2 stream channels share their parent's loop), hence
/// `@unchecked Sendable` without a lock.
final class ConnectionContext: @unchecked Sendable {
    /// Numbered from 1 in order of acceptance.
    let id: Int
    /// The TCP (HTTP/2 parent) channel.
    let channel: Channel

    /// The provider token this connection authenticated with (and the `authorization` value that carried it)
    /// and when the fake first saw it.
    var apnsToken: (token: String, authorization: String, verified: APNsProviderToken, firstSeen: Date)?
    /// After a `429 TooManyProviderTokenUpdates`, every APNs request on the connection gets the same answer
    /// until then (when the refresh floor since the current token was first seen has passed).
    var tokenUpdatesRefusedUntil: Date?
    /// The last FCM bearer that checked out, so the next request skips the shared table.
    var fcmBearer: (token: String, expiresAt: Date, scope: String)?
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` as last advertised.
    private(set) var advertisedMaxConcurrentStreams: Int
    /// How many SETTINGS frames the client has not acknowledged yet (the initial one counts). While any is
    /// outstanding the client may not know the last advertised limit, so a stream over it is refused, not fatal.
    private var unacknowledgedSettings = 1
    /// Streams the client opened that are not closed yet (refused ones are not counted).
    private var openStreams = 0
    /// The most streams this connection has had open at once.
    private var peakOpenStreams = 0
    /// The client broke the stream limit and the connection is closing.
    private var closingForViolation = false
    /// The highest stream ID whose request was taken in hand, answered or with its answer still to come
    /// (GOAWAY's last-stream-id: "the highest-numbered stream … on which the sender … might yet take some
    /// action", RFC 9113 §6.8).
    var highestProcessedStreamID = 0
    /// Answers waiting for their delay to pass.
    var pendingAnswers = 0
    /// A graceful GOAWAY (NO_ERROR) went out while streams were open or answers pending: the connection closes
    /// once they are done, as a server shutting down lets the streams it named finish.
    var closeWhenAnswered = false
    /// ... and once no stream is open either.
    private var waitForOpenStreams = false
    /// The last-stream-id of the GOAWAY sent, if one was: a stream above it is not taken in hand.
    private(set) var goAwayLastStreamID: Int?
    /// Requests taken in hand on this connection (``FakePushServer/Configuration/goAwayAfterStreams``).
    var processedStreams = 0
    /// Bumped whenever a stream opens: an idle check scheduled before it is void.
    private var idleGeneration = 0
    private let core: FakePushCore
    private var random: SplitMix64

    /// What APNs says in its GOAWAY when a client opens more streams than it allows.
    static let streamLimitViolated = "Maximum active streams violated for this endpoint."
    /// What FCM says in its GOAWAY (fact sheet §2, item 8).
    static let googleStreamLimitViolated = "exceeded_max_concurrent_streams"
    /// The service the connection's first request went to (known from its HEADERS, or from its port when that
    /// serves one service): whose words a GOAWAY uses.
    var firstProvider: Provider?
    /// The services the port it came in on stands for.
    let listener: Listener

    init(id: Int, channel: Channel, core: FakePushCore, listener: Listener) {
        self.id = id
        self.channel = channel
        self.core = core
        self.listener = listener
        self.advertisedMaxConcurrentStreams = core.initialMaxConcurrentStreams(on: listener)
        switch listener {
        case .every: firstProvider = nil
        case .apple: firstProvider = .apns
        case .google: firstProvider = .fcm
        }
        self.random = SplitMix64(seed: UInt64.random(in: .min ... .max))
    }

    /// Advertises a new stream limit with a SETTINGS frame, if it differs from the current one.
    func advertiseMaxConcurrentStreams(_ limit: Int) {
        guard limit != advertisedMaxConcurrentStreams else { return }
        advertisedMaxConcurrentStreams = limit
        unacknowledgedSettings += 1
        let settings = HTTP2Frame(streamID: .rootStream,
                                  payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))
        channel.writeAndFlush(settings, promise: nil)
    }

    /// Advertises `limit` if it is more than the current one (never narrows a connection another service widened).
    func widenMaxConcurrentStreams(to limit: Int) {
        if limit > advertisedMaxConcurrentStreams { advertiseMaxConcurrentStreams(limit) }
    }

    /// The client acknowledged the oldest SETTINGS frame it had not acknowledged yet (they are answered in order).
    func settingsAcknowledged() {
        unacknowledgedSettings = max(0, unacknowledgedSettings - 1)
    }

    /// What to do with a stream the client just opened.
    enum StreamAdmission {
        /// Serve it; it counts as open until ``streamClosed()``.
        case admit
        /// Answer RST_STREAM(REFUSED_STREAM): the client has not acknowledged the limit yet and may retry.
        case refuse
        /// The client broke a limit it acknowledged: GOAWAY and close, as APNs does.
        case goAway
    }

    /// Decides about a new client stream against the limit last advertised. NIOHTTP2 applies our SETTINGS only
    /// once the client acknowledges them and until then lets up to 100 streams in; APNs does not, and HTTP/2
    /// allows refusing them (RFC 9113 §5.1.2), so the fake counts and refuses them itself.
    func admitStream() -> StreamAdmission {
        if openStreams < advertisedMaxConcurrentStreams {
            openStreams += 1
            idleGeneration &+= 1
            if openStreams > peakOpenStreams {
                peakOpenStreams = openStreams
                core.notePeakOpenStreams(openStreams)
            }
            return .admit
        }
        if unacknowledgedSettings > 0 {
            core.recording.withLock { $0.refusedStreams += 1 }
            return .refuse
        }
        return .goAway
    }

    /// An admitted stream closed.
    func streamClosed() {
        openStreams -= 1
        if openStreams == 0 { scheduleIdleGoAway() }
        if waitForOpenStreams { closeIfDone() }
    }

    /// After a graceful GOAWAY: closes the connection once no stream is open and no answer pending (the streams
    /// it named run to their end; the ones past it are refused as they complete).
    func closeIfDone() {
        guard closeWhenAnswered && (openStreams == 0 || !waitForOpenStreams) && pendingAnswers == 0 else { return }
        // What was written for the last streams leaves first (a stream closes as its answer is written).
        channel.flush()
        channel.close(promise: nil)
    }

    /// With an idle timeout configured: a GOAWAY if no stream opens before it passes (from the connection's
    /// start, and from each moment its last open stream closes).
    func scheduleIdleGoAway() {
        guard let timeout = core.configuration.idleTimeout else { return }
        let generation = idleGeneration
        channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1_000_000_000))) {
            guard self.idleGeneration == generation, self.openStreams == 0, self.goAwayLastStreamID == nil, self.channel.isActive else { return }
            self.goAway(lastStreamID: self.highestProcessedStreamID,
                        debugData: self.firstProvider == .fcm || self.firstProvider == .oauth ? nil : #"{"reason":"IdleTimeout"}"#,
                        lettingStreamsFinish: true)
        }
    }

    /// The client opened a stream over a limit it had acknowledged: counts it, sends GOAWAY (PROTOCOL_ERROR)
    /// with APNs' debug text (FCM's on a connection whose first request went to Google) and closes the connection.
    /// The GOAWAY leaves once the frames read with the violating one have reached their streams: the first
    /// stream's HEADERS, which say whose connection this is, usually came in the same read.
    func streamLimitViolated() {
        guard !closingForViolation else { return }
        closingForViolation = true
        core.recording.withLock { $0.streamLimitViolations += 1 }
        channel.eventLoop.execute {
            let google = self.firstProvider == .fcm || self.firstProvider == .oauth
            self.goAway(lastStreamID: self.highestProcessedStreamID, errorCode: .protocolError,
                        debugData: google ? Self.googleStreamLimitViolated : Self.streamLimitViolated)
        }
    }

    /// Sends GOAWAY (NO_ERROR unless told) naming `lastStreamID`, then closes the connection: at once after an
    /// error, or for NO_ERROR once the answers still pending are written.
    /// `lettingStreamsFinish`: the open streams too (a server recycling the connection), not only the answers
    /// pending (an injected `goaway`, whose own stream is never answered).
    func goAway(lastStreamID: Int, errorCode: HTTP2ErrorCode = .noError, debugData: String?, lettingStreamsFinish: Bool = false) {
        goAwayLastStreamID = min(goAwayLastStreamID ?? lastStreamID, lastStreamID)
        var opaque: ByteBuffer? = nil
        if let debugData { opaque = channel.allocator.buffer(string: debugData) }
        let frame = HTTP2Frame(streamID: .rootStream,
                               payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: errorCode, opaqueData: opaque))
        let channel = self.channel
        if errorCode == .noError && (pendingAnswers > 0 || (lettingStreamsFinish && openStreams > 0)) {
            closeWhenAnswered = true
            waitForOpenStreams = lettingStreamsFinish
            channel.writeAndFlush(frame, promise: nil)
            // A client that never finishes its streams does not hold the connection for ever.
            channel.eventLoop.scheduleTask(in: .seconds(10)) { channel.close(promise: nil) }
        } else {
            channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// A fresh lower-case version-4 UUID (APNs `apns-id`, `apns-unique-id`), cheaply.
    func makeUUID() -> String {
        let high = (random.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (random.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return UUIDText.format(high: high, low: low)
    }

    /// A random 64-bit number (message IDs).
    func nextRandom() -> UInt64 { random.next() }

    /// The `apns-id` to answer with: the request's when it is a well-formed UUID, else a new one.
    func responseAPNsID(requested: String?) -> String {
        if let requested, UUIDText.isCanonical(requested) { return requested }
        return makeUUID()
    }

    /// The `apns-id` to answer `request` with.
    func responseAPNsID(for request: FakeRequest) -> String {
        responseAPNsID(requested: request.header("apns-id"))
    }
}

/// Serves one connection's streams from its HTTP/2 frames: collects each stream's request, asks the core for the
/// answer and writes it. The streams live in a table here, not in a channel each (a child channel per stream
/// was a third of the fake's CPU per push). Also watches the connection itself: SETTINGS acknowledgements,
/// which tell the fake which stream limit the client knows, NIOHTTP2's own stream-limit error, which it
/// raises once the client has acknowledged the limit and opens a stream over it, and the inbound flow-control
/// windows, which NIOHTTP2 leaves to whoever reads the frames.
final class StreamsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Header values that differ on every response: not entered in the HPACK table, where each would push
    /// out an entry that might be used again and make every later lookup search past it.
    private static let newOnEveryResponse: Set<String> = ["apns-id", "apns-unique-id"]

    /// Bodies beyond this are not kept (APNs allows 5 KB, FCM about 4 KB; the fake still answers).
    private static let maximumKeptBody = 1 << 20

    /// One stream's request as it arrives.
    private struct Stream {
        var headers: HPACKHeaders?
        var body: ByteBuffer?
        /// Answered, refused or past reading: later frames are ignored.
        var completed = false
        /// Counted among the connection's open streams (until the stream closes).
        var admitted = false
        /// Flow-controlled bytes received since the stream's window was last topped up.
        var unreturnedBytes = 0
    }

    private let core: FakePushCore
    private let connection: ConnectionContext
    private let connectionWindow: Int
    private let streamWindow: Int
    private var streams: [HTTP2StreamID: Stream] = [:]
    /// Responses written in this read that still need a flush.
    private var flushPending = false
    /// Inside a read (from its first frame to its end).
    private var reading = false
    /// The connection's window was raised from the protocol's 65,535 to `connectionWindow`.
    private var connectionWindowOpened = false
    /// Admitted streams that closed during this read: they count as open until the read is complete, as on a
    /// real server, which reads the frames that arrived together before its answers leave.
    private var closedDuringRead = 0

    /// `connectionWindow` and `streamWindow`: the inbound windows kept open (the stream's is the
    /// advertised `SETTINGS_INITIAL_WINDOW_SIZE`; the connection's starts at 65,535 and is raised here).
    init(core: FakePushCore, connection: ConnectionContext, connectionWindow: Int, streamWindow: Int) {
        self.core = core
        self.connection = connection
        self.connectionWindow = connectionWindow
        self.streamWindow = streamWindow
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { openConnectionWindow(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        openConnectionWindow(context: context)
        context.fireChannelActive()
    }

    private func openConnectionWindow(context: ChannelHandlerContext) {
        guard !connectionWindowOpened else { return }
        connectionWindowOpened = true
        connection.scheduleIdleGoAway() // once, as the connection starts serving
        let increment = connectionWindow - 65_535
        if increment > 0 {
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        let frame = unwrapInboundIn(data)
        if frame.streamID == .rootStream {
            if case .settings(.ack) = frame.payload { connection.settingsAcknowledged() }
            return
        }
        switch frame.payload {
        case .headers(let headers):
            if var stream = streams[frame.streamID] {
                guard !stream.completed else { return }
                // A second HEADERS block is trailers: ignored.
                if headers.endStream {
                    stream.completed = true
                    streams[frame.streamID] = stream
                    complete(stream, streamID: frame.streamID, context: context)
                }
                return
            }
            var stream = Stream()
            // The stream exists now: it is admitted, refused, or ends the connection (see ``ConnectionContext/admitStream()``).
            switch connection.admitStream() {
            case .admit:
                stream.admitted = true
            case .refuse:
                stream.completed = true
                streams[frame.streamID] = stream
                write(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.refusedStream)), context: context)
                return
            case .goAway:
                stream.completed = true
                streams[frame.streamID] = stream
                connection.streamLimitViolated()
                return
            }
            stream.headers = headers.headers
            if connection.firstProvider == nil, let path = headers.headers.first(name: ":path") {
                let provider = FakePushCore.route(path, on: connection.listener)
                if provider != .unknown { connection.firstProvider = provider }
            }
            stream.completed = headers.endStream
            streams[frame.streamID] = stream
            if headers.endStream { complete(stream, streamID: frame.streamID, context: context) }
        case .data(let payload):
            let length = payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            guard var stream = streams[frame.streamID], !stream.completed else { return }
            if case .byteBuffer(var chunk) = payload.data {
                if stream.body == nil {
                    stream.body = chunk
                } else if stream.body!.readableBytes < Self.maximumKeptBody {
                    stream.body!.writeBuffer(&chunk)
                }
            }
            if payload.endStream {
                stream.completed = true
                streams[frame.streamID] = stream
                complete(stream, streamID: frame.streamID, context: context)
                return
            }
            stream.unreturnedBytes += length
            if stream.unreturnedBytes >= streamWindow / 2 {
                write(HTTP2Frame(streamID: frame.streamID, payload: .windowUpdate(windowSizeIncrement: stream.unreturnedBytes)), context: context)
                stream.unreturnedBytes = 0
            }
            streams[frame.streamID] = stream
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        while closedDuringRead > 0 {
            closedDuringRead -= 1
            connection.streamClosed()
        }
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, let stream = streams.removeValue(forKey: closed.streamID), stream.admitted {
            // One the fake answered counts until the read is complete; one the client reset is closed at once
            // (RFC 9113 §5.1.2: it no longer counts, whatever came with it).
            if reading && closed.reason == nil { closedDuringRead += 1 } else { connection.streamClosed() }
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent, window.streamID == .rootStream,
                  let inbound = window.inboundWindowSize, inbound <= connectionWindow / 2 {
            // The connection's window, topped up once half is used: counted by NIOHTTP2, which also charges DATA
            // it drops (for a stream just reset) that never reaches this handler.
            write(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionWindow - inbound)), context: context)
            if !reading {
                flushPending = false
                context.flush()
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // NIOHTTP2 has already sent GOAWAY(PROTOCOL_ERROR) without a reason and keeps the connection open; APNs
        // names the reason and hangs up. Stream errors it has answered with RST_STREAM itself.
        if error is NIOHTTP2Errors.MaxStreamsViolation { connection.streamLimitViolated() }
        context.fireErrorCaught(error)
    }

    /// Writes `frame`; the flush comes when the read that caused it is complete.
    private func write(_ frame: HTTP2Frame, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(frame), promise: nil)
        flushPending = true
    }

    private func complete(_ stream: Stream, streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let headers = stream.headers else {
            write(HTTP2Frame(streamID: streamID, payload: .rstStream(.protocolError)), context: context)
            return
        }
        var rawPath = "", method = ""
        for (name, value, _) in headers {
            if name == ":path" { rawPath = value } else if name == ":method" { method = value }
        }
        if let last = connection.goAwayLastStreamID, Int(streamID) > last {
            // Past the GOAWAY sent: not taken in hand (the client knows to send it again on another connection).
            write(HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)), context: context)
            return
        }
        let path = rawPath.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(rawPath[..<$0]) } ?? rawPath
        let request = FakeRequest(
            method: method,
            path: path,
            rawPath: rawPath,
            headers: headers,
            body: stream.body ?? context.channel.allocator.buffer(capacity: 0),
            streamID: Int(streamID),
            connection: connection,
            receivedAt: core.configuration.now())

        switch core.handle(request) {
        case .drop:
            connection.channel.close(promise: nil)
        case .goAway(let debugData):
            // This stream is not taken in hand: the GOAWAY names the streams before it.
            connection.goAway(lastStreamID: connection.highestProcessedStreamID, debugData: debugData)
        case .respond(let response, let delay, let afterwards, let answered):
            connection.highestProcessedStreamID = max(connection.highestProcessedStreamID, Int(streamID))
            connection.processedStreams += 1
            defer {
                if let limit = core.configuration.goAwayAfterStreams, connection.processedStreams == limit, connection.goAwayLastStreamID == nil {
                    flushPending = false
                    context.flush()
                    connection.goAway(lastStreamID: connection.highestProcessedStreamID, debugData: nil, lettingStreamsFinish: true)
                }
            }
            if let delay {
                connection.pendingAnswers += 1
                context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                    self.connection.pendingAnswers -= 1
                    defer { self.connection.closeIfDone() }
                    // The client may have reset the stream, or the connection closed (no stream event says so
                    // then), while the answer waited: then it was never given, and its record says so.
                    guard self.streams[streamID] != nil, context.channel.isActive else { return }
                    self.respond(response, streamID: streamID, afterwards: afterwards, context: context)
                    answered()
                    context.flush()
                    self.flushPending = false
                }
            } else {
                respond(response, streamID: streamID, afterwards: afterwards, context: context)
                answered()
            }
        }
    }

    private func respond(_ response: FakeResponse, streamID: HTTP2StreamID, afterwards: AfterResponse, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(response.headers.count + 1)
        headers.add(name: ":status", value: String(response.status))
        for (name, value) in response.headers {
            headers.add(name: name, value: value, indexing: Self.newOnEveryResponse.contains(name) ? .nonIndexable : .indexable)
        }
        if response.body.isEmpty {
            write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))), context: context)
        } else {
            write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers))), context: context)
            let buffer = context.channel.allocator.buffer(string: response.body)
            write(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true))), context: context)
        }
        if case .goAway(let debugData) = afterwards {
            context.flush()
            flushPending = false
            connection.goAway(lastStreamID: connection.highestProcessedStreamID, debugData: debugData)
        }
    }
}
