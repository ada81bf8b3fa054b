import ArgumentParser
import Swoop

/// Which addresses of a host a download connects to (see `Configuration.addresses`).
struct AddressOptions: ParsableArguments {
    @Option(
        name: .customLong("resolve"),
        help: ArgumentHelp(
            "Connect to HOST:PORT at these addresses instead of its DNS records, as curl's --resolve; several "
                + "addresses are several sources of the download (repeatable).",
            valueName: "HOST:PORT:ADDR[,ADDR...]"))
    var resolve: [String] = []

    @Flag(
        name: .customLong("single-address"),
        help: "Connect to one address of the host, as curl does, instead of spreading over all of them.")
    var singleAddress = false

    func validate() throws {
        _ = try pins()
    }

    /// `--resolve` as `HOST:PORT` to addresses.
    func pins() throws -> [String: [String]] {
        var pins: [String: [String]] = [:]
        for entry in resolve {
            let parts = entry.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else {
                throw ValidationError(
                    "--resolve takes HOST:PORT:ADDR[,ADDR...], e.g. cdn.example.com:443:192.0.2.1,192.0.2.2 "
                        + "(got '\(entry)')")
            }
            let addresses = parts[2].split(separator: ",").map { address in
                address.hasPrefix("[") && address.hasSuffix("]")
                    ? String(address.dropFirst().dropLast()) : String(address)
            }
            guard !addresses.isEmpty, addresses.allSatisfy({ !$0.isEmpty }) else {
                throw ValidationError("--resolve '\(entry)' names no address after HOST:PORT:")
            }
            pins["\(parts[0].lowercased()):\(port)", default: []] += addresses
        }
        return pins
    }

    /// These settings, in `configuration` (``validate()`` has checked them).
    func apply(to configuration: inout Downloader.Configuration) {
        configuration.addresses.resolve = (try? pins()) ?? [:]
        configuration.addresses.spreadsOverAddresses = !singleAddress
    }
}
