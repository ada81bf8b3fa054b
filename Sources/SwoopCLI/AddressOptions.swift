import ArgumentParser
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

    @Option(
        name: .customLong("interface"),
        help: ArgumentHelp(
            "Connect from this network interface (its name, e.g. eth1) or this machine's IP address, as curl's "
                + "--interface: processes on one machine reach a server from distinct client addresses.",
            valueName: "NAME|ADDRESS"))
    var interface: String?

    func validate() throws {
        _ = try pins()
        if let interface, let bare = bareInterface { try Self.checkLocal(bare, as: interface) }
    }

    /// `--interface` without the brackets an IPv6 address may come in.
    private var bareInterface: String? {
        interface.map { $0.hasPrefix("[") && $0.hasSuffix("]") ? String($0.dropFirst().dropLast()) : $0 }
    }

    /// Throws unless `bare` is one of this machine's interfaces or an IP address a connection can
    /// be bound to here (a socket is bound to it and closed: `127.0.0.2` is one though no
    /// interface lists it): checked once here, where the library would find it out from its
    /// first connection. `name`: as the user wrote it, for the message.
    static func checkLocal(_ bare: String, as name: String) throws {
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let bound: Bool
        if inet_pton(AF_INET, bare, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            bound = withUnsafePointer(to: &v4) { canBind(AF_INET, $0, MemoryLayout<sockaddr_in>.size) }
        } else if inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            bound = withUnsafePointer(to: &v6) { canBind(AF_INET6, $0, MemoryLayout<sockaddr_in6>.size) }
        } else {
            guard if_nametoindex(bare) == 0 else { return }
            throw ValidationError(
                "--interface \(name): no network interface has that name (ip -brief link lists them); an address "
                    + "must be an IPv4 or IPv6 address of this machine")
        }
        guard !bound else { return }
        throw ValidationError(
            "--interface \(name) is not an address of this machine: a connection cannot start from it "
                + "(ip -brief address lists the machine's addresses)")
    }

    private static func canBind<Address>(_ family: Int32, _ address: UnsafePointer<Address>, _ length: Int) -> Bool {
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return address.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(length)) == 0
        }
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
        configuration.addresses.localInterface = bareInterface
    }
}
