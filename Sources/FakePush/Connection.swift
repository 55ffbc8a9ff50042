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
    /// The last FCM bearer that checked out, so the next request skips the shared table.
    var fcmBearer: (token: String, expiresAt: Date, scope: String)?
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` as last advertised.
    private(set) var advertisedMaxConcurrentStreams: Int
    /// The highest stream ID answered so far (GOAWAY's last-stream-id).
    var highestAnsweredStreamID = 0
    private var random: SplitMix64

    init(id: Int, channel: Channel, initialMaxConcurrentStreams: Int) {
        self.id = id
        self.channel = channel
        self.advertisedMaxConcurrentStreams = initialMaxConcurrentStreams
        self.random = SplitMix64(seed: UInt64.random(in: .min ... .max))
    }

    /// Advertises a new stream limit with a SETTINGS frame, if it differs from the current one.
    func advertiseMaxConcurrentStreams(_ limit: Int) {
        guard limit != advertisedMaxConcurrentStreams else { return }
        advertisedMaxConcurrentStreams = limit
        let settings = HTTP2Frame(streamID: .rootStream,
                                  payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))
        channel.writeAndFlush(settings, promise: nil)
    }

    /// Sends GOAWAY (NO_ERROR) naming `lastStreamID` and then closes the connection.
    func goAway(lastStreamID: Int, debugData: String?) {
        var opaque: ByteBuffer? = nil
        if let debugData { opaque = channel.allocator.buffer(string: debugData) }
        let frame = HTTP2Frame(streamID: .rootStream,
                               payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: .noError, opaqueData: opaque))
        let channel = self.channel
        channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
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

/// Collects one HTTP/2 stream's request, asks the core for the answer and writes it.
final class StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// Bodies beyond this are not kept (APNs allows 5 KB, FCM about 4 KB; the fake still answers).
    private static let maximumKeptBody = 1 << 20

    private let core: FakePushCore
    private let connection: ConnectionContext
    private var headers: HPACKHeaders?
    private var body: ByteBuffer?
    private var completed = false

    init(core: FakePushCore, connection: ConnectionContext) {
        self.core = core
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !completed else { return }
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if headers == nil { headers = frame.headers }  // a second HEADERS block is trailers: ignored
            if frame.endStream { complete(context: context) }
        case .data(let frame):
            if case .byteBuffer(var chunk) = frame.data {
                if body == nil {
                    body = chunk
                } else if body!.readableBytes < Self.maximumKeptBody {
                    body!.writeBuffer(&chunk)
                }
            }
            if frame.endStream { complete(context: context) }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    private func complete(context: ChannelHandlerContext) {
        completed = true
        guard let headers else { context.close(promise: nil); return }
        let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map { Int($0) } ?? 0
        var rawPath = "", method = ""
        for (name, value, _) in headers {
            if name == ":path" { rawPath = value } else if name == ":method" { method = value }
        }
        let path = rawPath.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(rawPath[..<$0]) } ?? rawPath
        let request = FakeRequest(
            method: method,
            path: path,
            rawPath: rawPath,
            headers: headers,
            body: body ?? context.channel.allocator.buffer(capacity: 0),
            streamID: streamID,
            connection: connection,
            receivedAt: core.configuration.now())

        switch core.handle(request) {
        case .drop:
            connection.channel.close(promise: nil)
        case .goAway(let debugData):
            connection.goAway(lastStreamID: connection.highestAnsweredStreamID, debugData: debugData)
        case .respond(let response, let delay, let afterwards):
            let connection = self.connection
            let finish = {
                self.write(response, streamID: streamID, context: context)
                if case .goAway(let debugData) = afterwards {
                    connection.goAway(lastStreamID: streamID, debugData: debugData)
                }
            }
            if let delay {
                context.eventLoop.assumeIsolated().scheduleTask(in: delay, finish)
            } else {
                finish()
            }
        }
    }

    private func write(_ response: FakeResponse, streamID: Int, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(response.headers.count + 1)
        headers.add(name: ":status", value: String(response.status))
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        if response.body.isEmpty {
            context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: headers, endStream: true))), promise: nil)
        } else {
            context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
            let buffer = context.channel.allocator.buffer(string: response.body)
            context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }
        if streamID > connection.highestAnsweredStreamID { connection.highestAnsweredStreamID = streamID }
    }
}
