// swift-tools-version: 6.2
import Foundation
import PackageDescription

/// Settings every target shares (hummingbird's Package.swift does the same): explicit imports,
/// `any` spelled out, and members visible only through imports.
let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("InternalImportsByDefault"),
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

/// What the server's and the replicator's tests use (CouchAPITests, ReplicationTests).
let serverTestDependencies: [Target.Dependency] = [
  "Formats",
  "CouchAPI", "CouchQuery", "CouchReplicator", "Replication", "Projections", "Query", "JSON",
  "RevTree", "Log", "Wiki",
  "TestSupport",
  "Auth", "CouchTestSupport",
  .product(name: "Crypto", package: "swift-crypto"),
  // Built so that the tests can run `wikilog serve` as a child process.
  "wikilog",
  .product(name: "Hummingbird", package: "hummingbird"),
  .product(name: "HummingbirdTesting", package: "hummingbird"),
  .product(name: "AsyncHTTPClient", package: "async-http-client"),
  .product(name: "NIOCore", package: "swift-nio"),
  .product(name: "NIOHTTP1", package: "swift-nio"),
  .product(name: "NIOPosix", package: "swift-nio"),
  .product(name: "HummingbirdCore", package: "hummingbird"),
  .product(name: "HTTPTypes", package: "swift-http-types"),
  .product(name: "Logging", package: "swift-log"),
]

let package = Package(
  name: "wikilog",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "Formats", targets: ["Formats"]),
    .library(name: "JSON", targets: ["JSON"]),
    .library(name: "Log", targets: ["Log"]),
    .library(name: "RevTree", targets: ["RevTree"]),
    .library(name: "Projections", targets: ["Projections"]),
    .library(name: "Query", targets: ["Query"]),
    .library(name: "Wiki", targets: ["Wiki"]),
    .library(name: "Replication", targets: ["Replication"]),
    .library(name: "CouchAPI", targets: ["CouchAPI"]),
    .library(name: "CouchQuery", targets: ["CouchQuery"]),
    .library(name: "CouchReplicator", targets: ["CouchReplicator"]),
    .library(name: "Auth", targets: ["Auth"]),
    .library(name: "WikiMarkdown", targets: ["WikiMarkdown"]),
    .library(name: "WikiApp", targets: ["WikiApp"]),
    .library(name: "TypedDocuments", targets: ["TypedDocuments"]),
    .executable(name: "wikilog", targets: ["wikilog"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
    .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
    .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
    // The replicator's HTTP transport (`HTTPTransport`).
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    // `make docs`: `swift package generate-documentation` for every library's DocC catalog.
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
  ],
  targets: [
    .systemLibrary(
      name: "CLMDB",
      pkgConfig: "lmdb",
      providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
    ),
    // GitHub's cmark-gfm with its extensions (Debian's libcmark-gfm-dev and
    // libcmark-gfm-extensions-dev), for the wiki's Markdown.
    .systemLibrary(
      name: "CMark",
      pkgConfig: "libcmark-gfm",
      providers: [.apt(["libcmark-gfm-dev", "libcmark-gfm-extensions-dev"]), .brew(["cmark-gfm"])]
    ),
    // PCRE2, for $regex and wikilog grep in the dialect of CouchDB's (Erlang's re is PCRE).
    .systemLibrary(
      name: "CPCRE2",
      pkgConfig: "libpcre2-8",
      providers: [.apt(["libpcre2-dev"]), .brew(["pcre2"])]
    ),
    // OpenSSL's libcrypto, for SHA-256 in the log's Merkle tree.
    .systemLibrary(
      name: "COpenSSL",
      pkgConfig: "libcrypto",
      providers: [.apt(["libssl-dev"]), .brew(["openssl"])]
    ),
    // ICU's root collation (Debian's libicu-dev), CouchDB's order of strings in views and Mango.
    .target(
      name: "CICU",
      linkerSettings: [.linkedLibrary("icui18n"), .linkedLibrary("icuuc")]
    ),
    // wikilog's JavaScript query server (`wikilog query-server`): design functions run in
    // SpiderMonkey (Debian's libmozjs-102-dev, the engine of CouchDB's couchjs), each design
    // document in a sandbox of its own. Only the `wikilog` executable links it.
    .target(
      name: "JSSandbox",
      cxxSettings: [.unsafeFlags(["-isystem", "/usr/include/mozjs-102", "-std=c++17"])],
      linkerSettings: [.linkedLibrary("mozjs-102")]
    ),
    .systemLibrary(
      name: "CZlib",
      providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
    ),
    .target(
      name: "Log",
      dependencies: [
        "CLMDB", "COpenSSL", "Formats", .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // Hex, Base64, LEB128 varints and ISO-8601 times: one of each, for every module.
    .target(name: "Formats", swiftSettings: swiftSettings + [.strictMemorySafety()]),
    .target(
      name: "JSON", dependencies: ["Formats"],
      swiftSettings: swiftSettings + [.strictMemorySafety()]),
    .target(
      name: "RevTree", dependencies: ["JSON", "Formats"],
      swiftSettings: swiftSettings + [.strictMemorySafety()]),
    .target(
      name: "Projections",
      dependencies: [
        "Formats",
        "JSON", "Log", "RevTree", "CZlib", "CPCRE2", "CICU",
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]),
    // Mango and full-text search: indexes on the store's public seams.
    .target(
      name: "Query",
      dependencies: [
        "Formats",
        "JSON", "Log", "RevTree", "Projections",
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]),
    .target(
      name: "Wiki", dependencies: ["Formats", "JSON", "Log", "RevTree", "Projections", "Query"],
      swiftSettings: swiftSettings + [.strictMemorySafety()]),
    // The replicator (client of CouchDB's protocol), its jobs and the `_replicator` documents;
    // no HTTP server.
    .target(
      name: "Replication",
      dependencies: [
        "Formats",
        "Projections", "JSON", "RevTree", "Log",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // CouchDB's HTTP API on Hummingbird.
    .target(
      name: "CouchAPI",
      dependencies: [
        "Formats",
        "Auth", "Projections", "JSON", "RevTree", "Log",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdCore", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // Mango, views and design functions over HTTP: the Query module's endpoints, contributed
    // to CouchAPI's server as a `CouchFeature` (CouchAPI itself does not know Query).
    .target(
      name: "CouchQuery",
      dependencies: [
        "Formats", "CouchAPI", "Query", "Projections", "JSON", "Log", "RevTree",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "NIOCore", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // The replicator's endpoints and the `_replicator` database, a feature of CouchAPI's server.
    .target(
      name: "CouchReplicator",
      dependencies: [
        "Formats", "CouchAPI", "Replication", "Projections", "JSON", "RevTree",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    .target(
      name: "Auth",
      dependencies: [
        "Formats",
        "Projections", "JSON", "Log",
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "_CryptoExtras", package: "swift-crypto"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    .target(
      name: "WikiMarkdown", dependencies: ["CMark"],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    .target(
      name: "WikiApp",
      dependencies: [
        "Formats",
        "Auth", "CouchAPI", "CouchQuery", "CouchReplicator", "JSON", "Log", "Projections", "Query",
        "Replication", "RevTree",
        "Wiki", "WikiMarkdown",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdCore", package: "hummingbird"),
        .product(name: "Mustache", package: "swift-mustache"),
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // Codable documents, typed change streams and sync sessions, for apps that embed the store.
    .target(
      name: "TypedDocuments",
      dependencies: [
        "Formats", "JSON", "Log", "RevTree", "Projections", "Query", "Replication",
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // The example of the DocC article "Embedding wikilog in an app": a notes tool that saves
    // typed notes locally and syncs them with a `wikilog serve`. Built (and run) by `make test`.
    .executableTarget(
      name: "notes", dependencies: ["TypedDocuments"], path: "Examples/Notes",
      swiftSettings: swiftSettings),
    .executableTarget(
      name: "wikilog",
      dependencies: [
        "Formats",
        "Auth", "CouchAPI", "CouchQuery", "CouchReplicator", "JSON", "Log", "Projections", "Query",
        "RevTree", "Replication",
        "Wiki", "WikiApp", "JSSandbox",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdCore", package: "hummingbird"),
        .product(name: "HummingbirdTLS", package: "hummingbird"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings + [.strictMemorySafety()]
    ),
    // A child process for the crash-safety and cross-process tests; not a product.
    .executableTarget(
      name: "LogTestWorker", dependencies: ["Log"], path: "Tests/LogTestWorker",
      swiftSettings: swiftSettings),
    // Child processes for the tests (workers, the `wikilog` binary); not a product.
    .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: swiftSettings),
    .testTarget(
      name: "LogTests", dependencies: ["Formats", "Log", "LogTestWorker", "TestSupport"],
      swiftSettings: swiftSettings),
    .testTarget(name: "FormatsTests", dependencies: ["Formats"]),
    .testTarget(
      name: "JSONTests", dependencies: ["Formats", "JSON", "TestSupport"],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "RevTreeTests", dependencies: ["Formats", "JSON", "RevTree", "TestSupport"],
      swiftSettings: swiftSettings),
    // Drives the built `wikilog` binary as subprocesses; depends on it so that it is built.
    .testTarget(
      name: "CLITests", dependencies: ["wikilog", "TestSupport"], swiftSettings: swiftSettings),
    // A child process for the SIGKILL tests of the document store; not a product.
    .executableTarget(
      name: "ProjectionsTestWorker",
      dependencies: ["JSON", "Projections", "Log", "RevTree", "Wiki"],
      path: "Tests/ProjectionsTestWorker", swiftSettings: swiftSettings),
    // A store in a temporary directory, for the store's, the query engine's and the wiki's tests.
    .target(
      name: "StoreTestSupport", dependencies: ["JSON", "Log", "Projections", "Wiki"],
      path: "Tests/StoreTestSupport", swiftSettings: swiftSettings),
    .testTarget(
      name: "ProjectionsTests",
      dependencies: [
        "Formats",
        "JSON", "Projections", "Query", "Log", "RevTree", "Wiki", "ProjectionsTestWorker",
        "TestSupport",
        "StoreTestSupport",
      ],
      swiftSettings: swiftSettings),
    // The wiki: its projections, drafts, TouchWiki validation, diff and merge.
    .testTarget(
      name: "WikiTests",
      dependencies: [
        "Formats", "JSON", "Projections", "Query", "Log", "RevTree", "Wiki", "TestSupport",
        "StoreTestSupport",
      ],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "QueryTests",
      dependencies: [
        "Formats",
        "JSON", "Projections", "Query", "Log", "RevTree", "Wiki", "TestSupport",
        "StoreTestSupport",
      ],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "AuthTests",
      dependencies: [
        "Formats",
        "Auth", "Projections", "JSON", "Log", "Wiki", "TestSupport",
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "_CryptoExtras", package: "swift-crypto"),
      ],
      swiftSettings: swiftSettings),
    // The typed API: round trips, conflicts, change streams across processes, sync sessions.
    .testTarget(
      name: "TypedDocumentsTests",
      dependencies: [
        "TypedDocuments", "Projections", "JSON", "Log", "Replication", "TestSupport", "notes",
        "wikilog",
      ],
      swiftSettings: swiftSettings),
    .testTarget(
      name: "WikiMarkdownTests", dependencies: ["WikiMarkdown"], swiftSettings: swiftSettings),
    .testTarget(
      name: "WikiAppTests",
      dependencies: [
        "Formats",
        "WikiApp", "Auth", "CouchAPI", "CouchQuery", "CouchReplicator", "Replication",
        "Projections",
        "Query", "JSON",
        "Log", "Wiki",
        "TestSupport",
        "wikilog",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdTesting", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      swiftSettings: swiftSettings),
    // A data directory and a server per test, for the server's and the replicator's tests.
    .target(
      name: "CouchTestSupport",
      dependencies: [
        "Formats",
        "CouchAPI", "CouchQuery", "CouchReplicator", "Replication", "Projections", "Query", "JSON",
        "Log", "Wiki", "Auth",
        "TestSupport",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdTesting", package: "hummingbird"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Tests/CouchTestSupport", swiftSettings: swiftSettings),
    // CouchDB's HTTP API: routes, answers, access, hostile input.
    .testTarget(
      name: "CouchAPITests",
      dependencies: serverTestDependencies,
      swiftSettings: swiftSettings),
    // The replicator, `_replicate` and the `_replicator` database, against served databases.
    .testTarget(
      name: "ReplicationTests",
      dependencies: serverTestDependencies,
      swiftSettings: swiftSettings),
  ]
)

// Benchmarks build only when asked for (`WIKILOG_BENCHMARKS=1`, which `make bench` sets), so
// `make test` and CI never fetch or compile the benchmark harness.
if ProcessInfo.processInfo.environment["WIKILOG_BENCHMARKS"] != nil {
  package.dependencies.append(
    .package(
      url: "https://github.com/ordo-one/benchmark",
      from: "1.38.1",
      traits: ["MallocInterposer"]
    )
  )
  // The wikilog side of `make compare` (scripts/compare): plain executables printing figures.
  package.targets.append(
    .executableTarget(
      name: "LogCompare", dependencies: ["Log"], path: "Benchmarks/LogCompare",
      swiftSettings: swiftSettings)
  )
  package.targets.append(
    .executableTarget(
      name: "MerkleCompare", dependencies: ["Log"], path: "Benchmarks/MerkleCompare",
      swiftSettings: swiftSettings))
  // The per-user changes feed beside the database's (the access issue's target).
  package.targets.append(
    .executableTarget(
      name: "AccessCompare", dependencies: ["JSON", "Projections", "Log", "Wiki"],
      path: "Benchmarks/AccessCompare",
      swiftSettings: swiftSettings)
  )
  package.targets.append(
    .executableTarget(
      name: "DocCompare", dependencies: ["JSON", "Projections", "Query", "Log", "RevTree", "Wiki"],
      path: "Benchmarks/DocCompare",
      swiftSettings: swiftSettings)
  )
  package.targets.append(
    .executableTarget(
      name: "QueryCompare", dependencies: ["JSON", "Projections", "Query", "Log", "Wiki"],
      path: "Benchmarks/QueryCompare", swiftSettings: swiftSettings))
  // Typed saves beside the JSON API, and a typed change's way to another process.
  package.targets.append(
    .executableTarget(
      name: "TypedCompare", dependencies: ["JSON", "Projections", "TypedDocuments"],
      path: "Benchmarks/TypedCompare", swiftSettings: swiftSettings))
  // The replication rows of `make compare`: wikilog to wikilog over loopback.
  package.targets.append(
    .executableTarget(
      name: "ReplCompare",
      dependencies: [
        "JSON", "Projections", "Log", "Wiki", "Replication", "CouchAPI", "CouchQuery",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Benchmarks/ReplCompare", swiftSettings: swiftSettings)
  )
  for (name, modules) in [
    ("LogBenchmarks", ["Log"]), ("RevTreeBenchmarks", ["JSON", "RevTree"]),
    ("ProjectionsBenchmarks", ["JSON", "Projections", "Query", "Log", "RevTree", "Wiki"]),
  ] {
    package.targets.append(
      .executableTarget(
        name: name,
        dependencies: modules.map { .target(name: $0) } + [
          .product(name: "Benchmark", package: "benchmark")
        ],
        path: "Benchmarks/\(name)",
        swiftSettings: swiftSettings,
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
      )
    )
  }
}

// libFuzzer targets (`make fuzz`, which sets `WIKILOG_FUZZ=1` and builds them with
// `-sanitize=fuzzer,address` in `.build-fuzz`); never part of `make test`. See Fuzz/README.md.
if ProcessInfo.processInfo.environment["WIKILOG_FUZZ"] != nil {
  let fuzzTargets: [(String, [Target.Dependency])] = [
    ("JSON", ["JSON"]),
    ("RevTree", ["RevTree"]),
    ("EventRecord", ["Log"]),
    ("Route", ["CouchAPI"]),
    ("Revisions", ["JSON", "Projections", "RevTree"]),
    (
      "Request",
      [
        "CouchAPI", "CouchQuery", "Projections", "Query", "Log", "Wiki",
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
      ]
    ),
  ]
  package.targets.append(.target(name: "FuzzDriver", path: "Fuzz/Driver"))
  for (name, dependencies) in fuzzTargets {
    package.targets.append(
      .executableTarget(
        name: "Fuzz\(name)", dependencies: dependencies + ["FuzzDriver"], path: "Fuzz/\(name)"))
  }
}
