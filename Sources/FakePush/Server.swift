import Foundation
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// Local fake APNs, FCM HTTP v1 and Google OAuth token endpoint on one TLS + HTTP/2 port (or APNs on one and
/// Google's two on another, as the real hosts are: ``Configuration/googlePort``), answering the way the real
/// services do (status codes, reasons, error bodies), with a device-token registry, scripted faults and a
/// record of every request.
///
/// Routes: `POST /3/device/{token}` (APNs), `POST /v1/projects/{project}/messages:send` (FCM),
/// `POST /token` (OAuth; point the service account file's `token_uri` at `<baseURL>/token`). TLS offers only
/// ALPN `h2`; a client that does not negotiate it has its connection closed right after the handshake.
///
/// Every method is thread-safe and may be called while requests are being served.
public final class FakePushServer: Sendable {
    private let core: FakePushCore
    private let runtime = Locked(Runtime())

    private struct Runtime {
        var group: MultiThreadedEventLoopGroup?
        var serverChannels: [Channel] = []
        var port = 0
        var googlePort = 0
        var stopped = false
    }

    /// Checks the configuration (certificate, keys) and prepares a server; ``start()`` binds it.
    public init(configuration: Configuration) throws {
        core = try FakePushCore(configuration: configuration)
    }

    deinit {
        stop()
    }

    /// The configuration the server runs with.
    public var configuration: Configuration { core.configuration }

    /// Binds the port and starts serving. After it returns, ``port`` and ``baseURL`` are final. Calling it
    /// again while running does nothing.
    public func start() throws {
        guard runtime.withLock({ $0.group == nil }) else { return }
        let configuration = core.configuration
        let sslContext = try Self.makeSSLContext(configuration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let core = self.core

        var serverChannels: [Channel] = []
        do {
            if let googlePort = configuration.googlePort {
                serverChannels.append(try Self.listen(on: configuration.port, for: .apple, core: core, group: group, sslContext: sslContext))
                serverChannels.append(try Self.listen(on: googlePort, for: .google, core: core, group: group, sslContext: sslContext))
            } else {
                serverChannels.append(try Self.listen(on: configuration.port, for: .every, core: core, group: group, sslContext: sslContext))
            }
        } catch {
            for channel in serverChannels { try? channel.close().wait() }
            try? group.syncShutdownGracefully()
            throw error
        }
        let port = serverChannels[0].localAddress?.port ?? configuration.port
        let googlePort = serverChannels.count > 1 ? serverChannels[1].localAddress?.port ?? 0 : port
        runtime.withLock { runtime in
            runtime.group = group
            runtime.serverChannels = serverChannels
            runtime.port = port
            runtime.googlePort = googlePort
            runtime.stopped = false
        }
        core.tokenURL.withLock { $0 = "https://\(Self.urlHost(configuration.host)):\(googlePort)/token" }
    }

    /// Binds `port` and serves the services `listener` stands for on it.
    private static func listen(on port: Int, for listener: Listener, core: FakePushCore,
                               group: MultiThreadedEventLoopGroup, sslContext: NIOSSLContext) throws -> Channel {
        var connectionSettings = NIOHTTP2Handler.ConnectionConfiguration()
        connectionSettings.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: core.initialMaxConcurrentStreams(on: listener)),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
        ]
        connectionSettings.targetWindowSize = 16 << 20
        var streamSettings = NIOHTTP2Handler.StreamConfiguration()
        streamSettings.targetWindowSize = 1 << 20
        // libcurl 7.88 (Debian 12) ends many completed streams with RST_STREAM(STREAM_CLOSED); NIO's
        // rapid-reset guard (200 per 30 s) would then GOAWAY with ENHANCE_YOUR_CALM and last-stream-id 0,
        // which makes libcurl resend everything in flight. APNs and FCM are not known to do either.
        streamSettings.streamResetFrameRateLimit.maximumCount = 1_000_000
        let connectionConfiguration = connectionSettings
        let streamConfiguration = streamSettings

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                do {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                return channel.configureHTTP2SecureUpgrade(
                    h2ChannelConfigurator: { channel in
                        channel.eventLoop.makeCompletedFuture {
                            let connection = ConnectionContext(id: core.nextConnectionID(), channel: channel, core: core, listener: listener)
                            try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(
                                mode: .server, connectionConfiguration: connectionConfiguration,
                                streamConfiguration: streamConfiguration))
                            try channel.pipeline.syncOperations.addHandler(StreamsHandler(
                                core: core, connection: connection,
                                connectionWindow: connectionConfiguration.targetWindowSize,
                                streamWindow: streamConfiguration.targetWindowSize))
                        }
                    },
                    // ALPN chose http/1.1 or nothing: APNs refuses such clients at the connection stage.
                    http1ChannelConfigurator: { channel in
                        channel.close()
                    })
            }

        let host = core.configuration.host
        do {
            return try bootstrap.bind(host: host, port: port).wait()
        } catch {
            throw FakePushError.bindFailed("cannot listen on \(host):\(port): \(error)")
        }
    }

    /// The bound port (0 before ``start()``): APNs's, and FCM's and OAuth's too unless they have a
    /// ``Configuration/googlePort``.
    public var port: Int { runtime.withLock { $0.port } }

    /// The port FCM and OAuth are served on (``port`` when they share it; 0 before ``start()``).
    public var googlePort: Int { runtime.withLock { $0.googlePort } }

    /// `https://<host>:<port>`, e.g. `https://127.0.0.1:49152`: where APNs is (and FCM and OAuth, unless they
    /// have a port of their own).
    public var baseURL: String { "https://\(Self.urlHost(core.configuration.host)):\(port)" }

    /// Where FCM and the OAuth token endpoint are (``baseURL`` when they share its port).
    public var googleBaseURL: String { "https://\(Self.urlHost(core.configuration.host)):\(googlePort)" }

    /// Closes the listening socket and every connection and stops the threads. Idempotent; safe from any thread,
    /// including an event-loop thread (the threads then wind down in the background).
    public func stop() {
        let group: MultiThreadedEventLoopGroup? = runtime.withLock { runtime in
            guard !runtime.stopped else { return nil }
            runtime.stopped = true
            defer { runtime.group = nil; runtime.serverChannels = [] }
            return runtime.group
        }
        guard let group else { return }
        if MultiThreadedEventLoopGroup.currentEventLoop != nil {
            group.shutdownGracefully { _ in }
        } else {
            try? group.syncShutdownGracefully()
        }
    }

    // MARK: Registry and faults

    /// Sets what the registry says about `token` (an APNs hex token or an FCM registration token).
    public func setToken(_ token: String, _ state: TokenState) {
        core.registry.withLock { $0[token] = state }
    }

    /// Forgets every registry entry (unknown tokens then follow ``Configuration/acceptUnknownTokens``).
    public func clearTokens() {
        core.registry.withLock { $0.removeAll() }
    }

    /// Makes the next `count` requests that `fault` applies to fail that way. With `provider` nil a fault hits
    /// the providers listed in ``Fault``'s documentation (generic faults: APNs and FCM, not OAuth); naming a
    /// provider restricts it to (or extends it to) that one. Queued faults are used oldest first.
    public func inject(_ fault: Fault, count: Int = 1, provider: Provider? = nil) {
        core.faults.withLock { $0.add(fault, count: count, provider: provider) }
    }

    /// Drops every fault not yet used.
    public func clearFaults() {
        core.faults.withLock { $0.removeAll() }
    }

    // MARK: Recordings

    /// Every request received, in order of arrival (empty when ``Configuration/recordRequests`` is false).
    public func requests() -> [RecordedRequest] {
        core.recording.withLock { $0.requests }
    }

    /// Forgets the recorded requests and resets the counters.
    public func clearRecorded() {
        core.recording.withLock { $0 = RecordingState(epoch: $0.epoch + 1) }
    }

    /// Requests answered 200 so far (APNs, FCM and OAuth), recorded or not.
    public var acceptedCount: Int { core.recording.withLock { $0.accepted } }

    /// Requests received so far, recorded or not.
    public var receivedCount: Int { core.recording.withLock { $0.received } }

    /// TLS connections that negotiated HTTP/2 so far.
    public var connectionCount: Int { core.connectionsAccepted }

    /// Streams refused with RST_STREAM(REFUSED_STREAM) because they exceeded the advertised
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` before the client acknowledged it (APNs does this; libcurl 7.88 then
    /// drops the connection and retries on a new one).
    public var refusedStreamCount: Int { core.recording.withLock { $0.refusedStreams } }

    /// Connections ended with GOAWAY (PROTOCOL_ERROR, "Maximum active streams violated for this endpoint.")
    /// because the client opened a stream over a limit it had acknowledged.
    public var streamLimitViolationCount: Int { core.recording.withLock { $0.streamLimitViolations } }

    /// The most streams one connection has had open at once since the server started.
    public var peakOpenStreams: Int { core.peakOpenStreams.withLock { $0 } }

    // MARK: Helpers

    private static func makeSSLContext(_ configuration: Configuration) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificateChainPEM.utf8))
        } catch {
            throw FakePushError.invalidConfiguration("certificateChainPEM is not a PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else {
            throw FakePushError.invalidConfiguration("certificateChainPEM holds no certificate")
        }
        do {
            key = try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem)
        } catch {
            throw FakePushError.invalidConfiguration("privateKeyPEM is not a PEM private key (\(error))")
        }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw FakePushError.invalidConfiguration("the certificate and key do not make a TLS identity (\(error))")
        }
    }

    private static func urlHost(_ host: String) -> String {
        host.contains(":") ? "[\(host)]" : host
    }
}
