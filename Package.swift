// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "mentor-push",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "migrate", targets: ["migrate"]),
        .executable(name: "inactivity-check", targets: ["inactivity-check"]),
        .executable(name: "assignment-follow-up", targets: ["assignment-follow-up"]),
        .executable(name: "overdue-digest", targets: ["overdue-digest"]),
        .executable(name: "impact-summary", targets: ["impact-summary"]),
        .executable(name: "event-notify", targets: ["event-notify"]),
        .executable(name: "rules", targets: ["rules"]),
        .executable(name: "events-bench", targets: ["events-bench"]),
        .executable(name: "push-deliver", targets: ["push-deliver"]),
        .executable(name: "fake-push", targets: ["fake-push"]),
        .executable(name: "push-bench", targets: ["push-bench"]),
        .executable(name: "why", targets: ["why"]),
        .executable(name: "prune", targets: ["prune"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.0.0"),
        // Only the local fake providers (tests, demo, benchmarks) use SwiftNIO; the jobs send through libcurl.
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
    ],
    targets: [
        // C libraries from Debian's packages, found through pkg-config.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // The libpq wrapper: connections, parameterized queries, row decoding, transactions, errors.
        .target(name: "Postgres", dependencies: [
            "CLibPQ", "TextCoding",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Fast text forms without Foundation formatters: JSON for output lines, jsonb values and push payloads; UUIDs.
        .target(name: "TextCoding"),
        // The run envelope every executable shares: job_runs row, summary line, exit codes, stop on signal, logging.
        .target(name: "JobKit", dependencies: [
            "Postgres", "TextCoding",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
        // The schema migrations and the `migrate` command's body.
        .target(name: "Migrations", dependencies: ["JobKit", "Postgres", "TextCoding"]),
        // The scenario engine: rules, policies, candidates by name, decisions, recording, the plan.
        .target(name: "ScenarioEngine", dependencies: [
            "JobKit", "Postgres", "TextCoding",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Mustache", package: "swift-mustache"),
        ]),
        // One file per scenario: its settings, its query, its decision, its message.
        .target(name: "Scenarios", dependencies: ["ScenarioEngine", "JobKit", "Postgres", "TextCoding"]),
        // The command line every scenario executable shares (its main.swift is one call).
        .target(name: "ScenarioCommand", dependencies: [
            "ScenarioEngine", "Delivery", "JobKit", "Operations", "Postgres", "TextCoding",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The libcurl multi wrapper: many requests multiplexed over one HTTP/2 + TLS connection per host.
        .target(name: "HTTP2", dependencies: ["CCurl"]),
        // APNs and FCM: credentials and JWT signing, payloads, requests, outcome classification.
        .target(name: "Push", dependencies: [
            "HTTP2", "TextCoding",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The outbox engine: claim due deliveries, send them, record each outcome.
        .target(name: "Delivery", dependencies: [
            "Push", "Postgres", "JobKit", "ScenarioEngine", "TextCoding",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Operator commands: `why` (one user's whole story, read-only) and `prune` (retention in bounded batches).
        .target(name: "Operations", dependencies: [
            "JobKit", "Postgres", "TextCoding", "Push", "ScenarioEngine",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Local fake APNs, FCM and OAuth token servers: TLS + HTTP/2, validating and answering like the real ones.
        .target(name: "FakePush", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            .product(name: "NIOHPACK", package: "swift-nio-http2"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ]),

        // Thin executables.
        .executableTarget(name: "migrate", dependencies: [
            "Migrations", "JobKit", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "inactivity-check", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "assignment-follow-up", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "overdue-digest", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "impact-summary", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "event-notify", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "rules", dependencies: ["ScenarioCommand", "Scenarios"]),
        .executableTarget(name: "events-bench", dependencies: ["Postgres", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(name: "push-deliver", dependencies: [
            "JobKit", "Delivery", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "push-bench", dependencies: [
            "Push", "HTTP2", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "why", dependencies: [
            "Operations", "JobKit", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "prune", dependencies: [
            "Operations", "JobKit", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "fake-push", dependencies: [
            "FakePush", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Shared test support: the throwaway PostgreSQL cluster, per-test databases, fixtures, process runner.
        .target(name: "TestSupport", dependencies: [
            "Postgres", "JobKit", "Migrations", "ScenarioEngine", "FakePush",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ], path: "Tests/TestSupport"),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "JobKit", "Migrations", "TestSupport"]),
        .testTarget(name: "JobTests", dependencies: ["JobKit", "Migrations", "ScenarioEngine", "Scenarios", "TestSupport", "migrate", "inactivity-check", "why", "prune"]),
        .testTarget(name: "ScenarioTests", dependencies: ["Scenarios", "ScenarioEngine", "JobKit", "TestSupport",
                                                          "inactivity-check", "assignment-follow-up", "overdue-digest", "impact-summary", "event-notify", "rules",
                                                          "push-deliver", "FakePush"]),
        .testTarget(name: "OperationsTests", dependencies: ["Operations", "Postgres", "FakePush", "TestSupport",
                                                            "why", "prune", "inactivity-check", "push-deliver"]),
        .testTarget(name: "FakePushTests", dependencies: [
            "FakePush", "TestSupport",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ]),
        .testTarget(name: "PushTests", dependencies: ["Push", "HTTP2", "FakePush", "TestSupport"]),
        .testTarget(name: "DeliveryTests", dependencies: ["Delivery", "Push", "HTTP2", "Postgres", "FakePush", "TestSupport", "push-deliver",
                                                          .product(name: "Logging", package: "swift-log")]),
    ]
)
