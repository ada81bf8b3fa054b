// swift-tools-version:6.1
import PackageDescription

// The commit `swoop --version` names, from the environment: scripts/install, scripts/package,
// scripts/swoop and scripts/test set SWOOP_BUILD_COMMIT from git. SwiftPM evaluates the manifest
// again when the environment changes, and then recompiles only CSwoopBuildInfo; it does not when
// the commit changes, so Context.gitInformation would go stale after the next commit.
let buildCommit = String(
    (Context.environment["SWOOP_BUILD_COMMIT"] ?? "").filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        .prefix(64))

let package = Package(
    name: "swoop",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Swoop", targets: ["Swoop"]),
        .library(name: "SwoopTestOrigin", targets: ["SwoopTestOrigin"]),
        .executable(name: "swoop", targets: ["SwoopCLI"]),
        .executable(name: "swoop-test-origin", targets: ["SwoopTestOriginServer"]),
        .executable(name: "swoop-manual", targets: ["SwoopManual"]),
        .executable(name: "swoop-lane-floor", targets: ["SwoopLaneFloor"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // RFC 8941 structured fields: Repr-Digest and Content-Digest (RFC 9530).
        .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
        // Base64 without Foundation, for the digests servers publish.
        .package(url: "https://github.com/swift-extras/swift-extras-base64", from: "1.2.0"),
        // `swift package generate-documentation --target Swoop` (DocC); a plugin, not linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The C boundary: libcurl and the shims for its variadic calls.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // Linux system calls the Glibc module does not expose (fallocate, renameat2, xattrs).
        .target(name: "CSwoopSystem"),
        // The commit the binary was built from (see buildCommit above), for `swoop --version`.
        .target(
            name: "CSwoopBuildInfo",
            cSettings: [.define("SWOOP_BUILD_COMMIT", to: "\"\(buildCommit)\"")]
        ),
        // The pure core: values and decisions (plan, policies, response checks, identity, the
        // probe's decisions, errors). No libcurl, no Glibc, no Foundation, no I/O.
        .target(
            name: "SwoopCore",
            dependencies: [
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ]
        ),
        // HTTP over libcurl: the transfer thread and its curl_multi, exchanges, connection and
        // byte-rate budgets, cookies, request headers. The only target that depends on CCurl.
        .target(
            name: "SwoopCurl",
            dependencies: [
                "SwoopCore",
                "CCurl",
                "CSwoopSystem",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Where bytes go: the part file and its segment map, the sinks, the target's lock, the
        // verifier and its hashes, finalizing. Blocking work runs on its own queues and comes back
        // through the core's LoopExecutor; no libcurl.
        .target(
            name: "SwoopStore",
            dependencies: [
                "SwoopCore",
                "CSwoopSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Object stores by name: s3:// locations, endpoints and addressing, AWS settings and
        // credentials as the AWS tools read them, Signature Version 4, S3's XML (errors, listings).
        // Pure like the core: the environment and files come in as values.
        .target(
            name: "SwoopS3",
            dependencies: [
                "SwoopCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The library: the public surface, the session, the probe and the transfer stage that
        // join the layers, bulk downloads.
        .target(
            name: "Swoop",
            dependencies: [
                "SwoopCore",
                "SwoopCurl",
                "SwoopStore",
                "SwoopS3",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The `swoop` command-line tool.
        .executableTarget(
            name: "SwoopCLI",
            dependencies: [
                "Swoop",
                "CSwoopBuildInfo",
                "CSwoopSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Writes swoop's manual pages from its argument definitions (`swoop --experimental-dump-help`),
        // for scripts/install and scripts/package.
        .executableTarget(name: "SwoopManual"),
        // A measurement for the benchmark (S9, issue 57): a list of small files fetched on Swoop's
        // own parts without a download's per-file machinery, a floor beside Swoop's own time.
        .executableTarget(name: "SwoopLaneFloor", dependencies: ["SwoopCore", "SwoopCurl", "SwoopStore"]),
        // An in-process HTTP origin with fault switches, shared by tests, the demo and benchmarks.
        .target(
            name: "SwoopTestOrigin",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The test origin as a process, for scripts and benchmarks.
        .executableTarget(
            name: "SwoopTestOriginServer",
            dependencies: [
                "SwoopTestOrigin",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Seedable randomness and interval sets for the tests' generators and models.
        .target(name: "SwoopTestSupport"),
        // The pure core's tests: they build against the core alone.
        .testTarget(
            name: "SwoopCoreTests",
            dependencies: ["SwoopCore", "SwoopTestSupport"]
        ),
        .testTarget(
            name: "SwoopS3Tests",
            dependencies: ["SwoopS3"]
        ),
        .testTarget(
            name: "SwoopTests",
            dependencies: [
                "Swoop",
                "SwoopTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The command's own wording (Messages, the remedies in its flags' terms), against the
        // executable's module.
        .testTarget(
            name: "SwoopCLITests",
            dependencies: ["SwoopCLI"]
        ),
        .testTarget(
            name: "SwoopTestOriginTests",
            dependencies: ["SwoopTestOrigin"]
        ),
        .testTarget(
            name: "SwoopIntegrationTests",
            dependencies: [
                "Swoop",
                "SwoopTestOrigin",
                "SwoopTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
