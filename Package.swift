// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "mentor-push",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "migrate", targets: ["migrate"]),
        .executable(name: "inactivity-check", targets: ["inactivity-check"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // C libraries from Debian's packages, found through pkg-config.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // The libpq wrapper: connections, parameterized queries, row decoding, transactions, errors.
        .target(name: "Postgres", dependencies: [
            "CLibPQ",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // What every job shares: flags, run claiming, schema check, recording, dry-run plan, summary, exit codes.
        .target(name: "JobKit", dependencies: [
            "Postgres",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // One file per scenario: its query, its decision, its message.
        .target(name: "Scenarios", dependencies: ["JobKit", "Postgres"]),

        // Thin executables.
        .executableTarget(name: "migrate", dependencies: [
            "JobKit", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "inactivity-check", dependencies: [
            "JobKit", "Scenarios", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Shared test support: the throwaway PostgreSQL cluster, per-test databases, fixtures, process runner.
        .target(name: "TestSupport", dependencies: ["Postgres", "JobKit"], path: "Tests/TestSupport"),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "JobTests", dependencies: ["JobKit", "Scenarios", "TestSupport", "migrate", "inactivity-check"]),
        .testTarget(name: "ScenarioTests", dependencies: ["Scenarios", "JobKit", "TestSupport"]),
    ]
)
