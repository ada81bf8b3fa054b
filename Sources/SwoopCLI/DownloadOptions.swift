import ArgumentParser
import Logging
import Swoop

/// Options shared by commands that download.
struct DownloadOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var access: AccessOptions
    @OptionGroup(title: "Addresses") var addresses: AddressOptions
    @OptionGroup var stores: ObjectStoreOptions

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Do not check files against the digests servers publish (Repr-Digest, Content-Digest, x-goog-hash, "
                + "x-amz-checksum-*, x-oss-hash-crc64ecma).")
    )
    var noVerify = false

    @Flag(name: [.short, .long], help: "Log more (repeat for debug output).")
    var verbose: Int

    /// TLS verification is off (`-k`).
    var insecure: Bool { access.insecure }

    /// `--header` values (and a `-b name=value` cookie) split into name and value.
    func parsedHeaders() throws -> [(name: String, value: String)] {
        try access.parsedHeaders()
    }

    func configuration() -> Downloader.Configuration {
        var configuration = Downloader.Configuration()
        connection.apply(to: &configuration)
        access.apply(to: &configuration)
        stores.apply(to: &configuration)
        addresses.apply(to: &configuration)
        configuration.verifiesPublishedDigests = !noVerify
        return configuration
    }

    func logger(quiet: Bool) -> Logger {
        CLILogHandler.startClock()
        let level: Logger.Level =
            quiet ? .error : (verbose >= 3 ? .trace : verbose == 2 ? .debug : verbose == 1 ? .info : .warning)
        return Logger(label: "swoop") { _ in CLILogHandler(logLevel: level) }
    }
}

extension Downloader.Configuration.ObjectChangePolicy: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "restart": self = .restart
        case "fail": self = .fail
        default: return nil
        }
    }

    public static var allValueStrings: [String] { ["restart", "fail"] }
}
