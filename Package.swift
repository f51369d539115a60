// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "push-enrichment",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "enrichment-server", targets: ["enrichment-server"]),
        .executable(name: "push-sender", targets: ["push-sender"]),
        .library(name: "EnrichmentCore", targets: ["EnrichmentCore"]),
        .library(name: "EnrichmentStorage", targets: ["EnrichmentStorage"]),
        .library(name: "EnrichmentUpstream", targets: ["EnrichmentUpstream"]),
        .library(name: "EnrichmentService", targets: ["EnrichmentService"]),
        .library(name: "APNsCore", targets: ["APNsCore"]),
        .library(name: "APNsClient", targets: ["APNsClient"]),
        .library(name: "MockAPNs", targets: ["MockAPNs"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // Pure domain logic: payloads, staleness, fixes, POIs, geometry, body formatting, map URLs, enrichment.
        .target(
            name: "EnrichmentCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // SQLite (GRDB) implementations of the stores.
        .target(
            name: "EnrichmentStorage",
            dependencies: [
                "EnrichmentCore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP clients for upstream providers (Woosmap Search API, map status checks).
        .target(
            name: "EnrichmentUpstream",
            dependencies: [
                "EnrichmentCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP service: buildApplication(configuration) and its routes.
        .target(
            name: "EnrichmentService",
            dependencies: [
                "EnrichmentCore",
                "EnrichmentStorage",
                "EnrichmentUpstream",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.copy("Resources/sample-pois.geojson")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "enrichment-server",
            dependencies: [
                "EnrichmentService",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // APNs model with no networking: requests, validation rules, reasons, JWT, retry policy.
        .target(
            name: "APNsCore",
            dependencies: [
                "EnrichmentCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The APNs sender over HTTP/2 + TLS (AsyncHTTPClient).
        .target(
            name: "APNsClient",
            dependencies: [
                "APNsCore",
                "EnrichmentCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local APNs-compatible server (HTTP/2 + TLS) that validates like Apple and scripts failures.
        .target(
            name: "MockAPNs",
            dependencies: [
                "APNsCore",
                "EnrichmentCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Benchmark driver for the places index (run by scripts/bench-places.sh, never by tests).
        .executableTarget(
            name: "places-bench",
            dependencies: [
                "EnrichmentCore", "EnrichmentStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "push-sender",
            dependencies: [
                "APNsCore",
                "APNsClient",
                "MockAPNs",
                "EnrichmentCore",
                "EnrichmentStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Helpers shared by the test targets (seeded randomness, running a server on port 0).
        .target(
            name: "TestSupport",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird")],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsCoreTests",
            dependencies: ["APNsCore", "EnrichmentCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsIntegrationTests",
            dependencies: [
                "APNsCore", "APNsClient", "MockAPNs", "EnrichmentCore", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentCoreTests",
            dependencies: ["EnrichmentCore", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentStorageTests",
            dependencies: ["EnrichmentStorage", "EnrichmentCore", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EnrichmentServiceTests",
            dependencies: [
                "EnrichmentService",
                "EnrichmentCore",
                "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
