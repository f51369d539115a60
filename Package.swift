// swift-tools-version:6.1
import PackageDescription

// As in hummingbird 2: imports are internal unless marked public, and a file sees only the members of the
// modules it imports itself, so the dependencies below and the imports in the code agree and stay that way.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "push-enrichment",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "enrichment-server", targets: ["enrichment-server"]),
        .executable(name: "push-sender", targets: ["push-sender"]),
        .library(name: "Essentials", targets: ["Essentials"]),
        .library(name: "EnrichmentCore", targets: ["EnrichmentCore"]),
        .library(name: "LocationCore", targets: ["LocationCore"]),
        .library(name: "Delivery", targets: ["Delivery"]),
        .library(name: "EnrichmentStorage", targets: ["EnrichmentStorage"]),
        .library(name: "EnrichmentPostgres", targets: ["EnrichmentPostgres"]),
        .library(name: "EnrichmentUpstream", targets: ["EnrichmentUpstream"]),
        .library(name: "EnrichmentRuntime", targets: ["EnrichmentRuntime"]),
        .library(name: "EnrichmentService", targets: ["EnrichmentService"]),
        .library(name: "APNsCore", targets: ["APNsCore"]),
        .library(name: "APNsClient", targets: ["APNsClient"]),
        .library(name: "MockAPNs", targets: ["MockAPNs"]),
        .library(name: "FCMCore", targets: ["FCMCore"]),
        .library(name: "FCMClient", targets: ["FCMClient"]),
        .library(name: "MockFCM", targets: ["MockFCM"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // OTLP export of the traces, over HTTP only (the gRPC exporter's dependencies are not built).
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // The leaf both families stand on: the JSON codec, Base64URL, the wall clock, settings tables, the version.
        .target(name: "Essentials", swiftSettings: swiftSettings),
        // Pure domain logic: payloads, staleness, fixes, POIs, geometry, body formatting, map URLs, enrichment.
        .target(
            name: "EnrichmentCore",
            dependencies: [
                "APNsCore",
                "Essentials",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // Location intelligence, pure: visits, the SDK's ZOI mixture and home/work labels, regions, their stores.
        .target(
            name: "LocationCore",
            dependencies: ["EnrichmentCore", "Essentials"],
            swiftSettings: swiftSettings
        ),
        // Delivery's model and decisions, no I/O: pushes, deliveries, registrations, the outbox and token store
        // protocols, and the planner (what becomes of each claimed delivery and each APNs answer). Where the two
        // families meet: it stands on EnrichmentCore and APNsCore, and neither imports it.
        .target(
            name: "Delivery",
            dependencies: ["APNsCore", "EnrichmentCore", "Essentials", "FCMCore"],
            swiftSettings: swiftSettings
        ),
        // SQLite's process-wide settings that only C can make (`sqlite3_config` is variadic).
        .target(name: "SQLiteTuning", linkerSettings: [.linkedLibrary("sqlite3")]),
        // SQLite (GRDB) implementations of the stores.
        .target(
            name: "EnrichmentStorage",
            dependencies: [
                "APNsCore",
                "Delivery",
                "EnrichmentCore",
                "LocationCore",
                "Essentials",
                "SQLiteTuning",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // PostgreSQL (postgres-nio) implementations of the stores, for several nodes on one database.
        .target(
            name: "EnrichmentPostgres",
            dependencies: [
                "APNsCore",
                "Delivery",
                "EnrichmentCore",
                "LocationCore",
                "Essentials",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP clients for upstream providers (Woosmap Search API).
        .target(
            name: "EnrichmentUpstream",
            dependencies: [
                "EnrichmentCore",
                "Essentials",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The engine's composition root, free of HTTP serving: the settings table, the configuration, and
        // EnrichmentRuntime (database, stores, places index and provider, map, templates, enricher, importer).
        .target(
            name: "EnrichmentRuntime",
            dependencies: [
                "Delivery",
                "APNsCore",
                "APNsClient",
                "FCMCore",
                "FCMClient",
                "EnrichmentCore",
                "LocationCore",
                "EnrichmentPostgres",
                "EnrichmentStorage",
                "EnrichmentUpstream",
                "Essentials",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            resources: [.copy("Resources/sample-pois.geojson")],
            swiftSettings: swiftSettings
        ),
        // The HTTP service: buildApplication(configuration) and its routes, over an EnrichmentRuntime.
        .target(
            name: "EnrichmentService",
            dependencies: [
                "Delivery",
                "FCMCore",
                "LocationCore",
                "EnrichmentCore",
                "EnrichmentRuntime",
                "Essentials",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                "APNsCore",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "enrichment-server",
            dependencies: [
                "EnrichmentCore",
                "EnrichmentRuntime",
                "EnrichmentService",
                "Essentials",
                "LocationCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // APNs model with no networking: requests, results, validation rules, reasons, JWT, retry policy, the
        // batch-sending protocol.
        .target(
            name: "APNsCore",
            dependencies: [
                "Essentials",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The APNs sender over HTTP/2 + TLS (its own HTTP/2 framing; swift-nio-http2's HPACK decoder and error codes),
        // and the batch logic every sender shares.
        .target(
            name: "APNsClient",
            dependencies: [
                "APNsCore",
                "Essentials",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local APNs-compatible server (HTTP/2 + TLS) that validates like Apple and scripts failures.
        .target(
            name: "MockAPNs",
            dependencies: [
                "APNsCore",
                "Essentials",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Firebase Cloud Messaging (HTTP v1) model with no networking: service accounts, the RS256 assertion, messages
        // and their mapping from an APNs payload, Google's error bodies and what each answer means.
        .target(
            name: "FCMCore",
            dependencies: [
                "Essentials",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The FCM sender: OAuth access tokens (cached, refreshed one at a time) and messages over HTTP/2 + TLS.
        .target(
            name: "FCMClient",
            dependencies: [
                "FCMCore",
                "Essentials",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local FCM (HTTP/2 + TLS): the token endpoint and the send endpoint, checked as Google does, scriptable.
        .target(
            name: "MockFCM",
            dependencies: [
                "FCMCore",
                "Essentials",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Benchmark driver for the places index (run by scripts/bench-places.sh, never by tests).
        .executableTarget(
            name: "places-bench",
            dependencies: [
                "APNsCore",
                "Delivery",
                "EnrichmentCore",
                "EnrichmentPostgres",
                "EnrichmentRuntime",
                "EnrichmentStorage",
                "Essentials",
                "LocationCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // Replays the ZOI vector files and compares them bit for bit (scripts/check-release-vectors.sh runs it in a
        // release build in CI; never a dependency of the service).
        .executableTarget(
            name: "location-vectors",
            dependencies: ["Essentials", "LocationCore"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "push-sender",
            dependencies: [
                "APNsCore",
                "APNsClient",
                "MockAPNs",
                "FCMCore",
                "FCMClient",
                "MockFCM",
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                "EnrichmentCore",
                "EnrichmentRuntime",
                "Essentials",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Helpers shared by the test targets (seeded randomness, servers on port 0, raw sockets, the mock APNs).
        .target(
            name: "TestSupport",
            dependencies: [
                "APNsCore",
                "FCMCore",
                "MockFCM",
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                "EnrichmentPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                "APNsClient",
                "MockAPNs",
                "Essentials",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EssentialsTests",
            dependencies: ["Essentials", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentCoreTests",
            dependencies: [
                "EnrichmentCore", "Essentials", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LocationCoreTests",
            dependencies: ["LocationCore", "EnrichmentCore", "Essentials", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DeliveryTests",
            dependencies: ["APNsCore", "Delivery", "Essentials"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentStorageTests",
            dependencies: [
                "APNsCore",
                "Delivery",
                "EnrichmentStorage", "EnrichmentPostgres", "EnrichmentRuntime", "EnrichmentCore", "Essentials",
                "LocationCore", "TestSupport", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentUpstreamTests",
            dependencies: [
                "EnrichmentUpstream", "EnrichmentCore", "Essentials", "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentRuntimeTests",
            dependencies: [
                "APNsCore", "EnrichmentRuntime", "EnrichmentCore", "EnrichmentPostgres", "Essentials", "LocationCore",
                "TestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentServiceTests",
            dependencies: [
                "APNsCore",
                "FCMCore",
                "MockFCM",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "Delivery",
                "EnrichmentService",
                "MockAPNs",
                "EnrichmentRuntime",
                "EnrichmentCore",
                "Essentials",
                "LocationCore",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentServerTests",
            dependencies: [
                "enrichment-server",
                "APNsCore",
                "Delivery",
                "MockAPNs",
                "EnrichmentPostgres",
                "EnrichmentRuntime",
                "EnrichmentStorage",
                "EnrichmentCore",
                "Essentials",
                "LocationCore",
                "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FCMCoreTests",
            dependencies: [
                "FCMCore", "Essentials", .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FCMClientTests",
            dependencies: [
                "FCMClient", "FCMCore", "MockFCM", "Essentials", "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsCoreTests",
            dependencies: ["APNsCore", "Essentials", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsClientTests",
            dependencies: [
                "APNsCore", "APNsClient", "Essentials", "MockAPNs", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MockAPNsTests",
            dependencies: [
                "APNsCore", "APNsClient", "MockAPNs", "Essentials", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushSenderTests",
            dependencies: [
                "push-sender", "APNsCore", "APNsClient", "MockAPNs", "MockFCM", "FCMCore", "EnrichmentCore",
                "EnrichmentRuntime",
                "Essentials",
                "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
