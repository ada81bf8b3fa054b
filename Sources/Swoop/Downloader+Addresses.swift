import SwoopCurl
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Downloader.Configuration {
    /// Which addresses of a host a download connects to.
    ///
    /// A name often has several addresses (A and AAAA records: a CDN's edges, a mirror pool), and
    /// each edge limits what one client gets. By default every address is a source of the same
    /// URL, as a mirror is: the same `Host` and TLS name, its own connections pinned to it, its
    /// bytes checked against the first address's before it contributes, and connections spread
    /// by what each delivers; one that fails or is slow is dropped. A name with one address
    /// behaves as it always did.
    public struct Addresses: Sendable, Equatable {
        /// Spread a download over every address of its host; `false` connects to the first that
        /// works, as curl does.
        public var spreadsOverAddresses = true
        /// Names pinned to addresses, as curl's `--resolve`: `"HOST:PORT"` to one or more
        /// addresses (IPv4 or IPv6), used instead of the name's DNS records. Several addresses are
        /// several sources (or, with ``spreadsOverAddresses`` off, the first is used).
        public var resolve: [String: [String]] = [:]
        /// The local end of every connection, as curl's `--interface`: a network interface's name
        /// (`eth1`: its address) or one of this machine's IP addresses (`192.0.2.7`); `nil`: the
        /// system's choice. Gives processes on one machine distinct client addresses (a server that
        /// caps each client address counts them apart), or picks a multi-homed machine's link.
        /// Neither is checked here (each would cost a download's start a look at the machine's
        /// interfaces): a connection that cannot be bound fails with
        /// ``DownloadError/Kind/invalidRequest``, at once, without retries.
        public var localInterface: String?

        public init() {}

        /// Throws for a pin that is not `HOST:PORT` to IP addresses.
        func validate() throws(DownloadError) {
            for (name, addresses) in resolve {
                let parts = name.split(separator: ":")
                guard parts.count == 2, let port = Int(parts[1]), (1...65535).contains(port) else {
                    throw .invalidRequest(
                        "Configuration.addresses.resolve: '\(name)' is not HOST:PORT (e.g. cdn.example.com:443)")
                }
                for address in addresses where !HostAddresses.isAddress(address) {
                    throw .invalidRequest(
                        "Configuration.addresses.resolve: '\(address)' for \(name) is not an IPv4 or IPv6 address")
                }
            }
            if let interface = localInterface, interface.isEmpty || interface.contains("!") {
                throw .invalidRequest(
                    "Configuration.addresses.localInterface: '\(RemoteURL.printable(interface))' is not an interface's "
                        + "name or an IP address")
            }
        }
    }
}

extension Downloader {
    /// The addresses a download of `url` spreads over (see ``Configuration/addresses``): those
    /// ``Configuration/Addresses/resolve`` pins, else those its host name resolves to; empty
    /// when it goes to the host as one (an IP address, a name with one address, `localhost`, or
    /// spreading turned off). Looks the name up (blocking) unless it was looked up lately.
    public func addresses(of url: String) throws(DownloadError) -> [String] {
        let (remote, _) = try remote(url, configuration: configuration)
        return hostAddresses.lookup(remote, configuration.addresses)
    }
}

/// The addresses a downloader's hosts are reached at, each name looked up at most once every
/// 30 seconds (a list of many files from one host resolves it once).
final class HostAddresses: Sendable {
    private let cache = Mutex<[String: (addresses: [String], at: Moment)]>([:])

    /// The addresses to pin `url`'s sources to: those ``Downloader/Configuration/Addresses/resolve``
    /// gives for its host and port, else, when spreading, those its name resolves to (IPv6 and
    /// IPv4, in the resolver's order, each once). Empty when the URL goes as it always did: an IP
    /// address, one address, spreading off without a pin, or `localhost`'s `::1` and `127.0.0.1`
    /// (one machine). A lookup blocks the calling thread (a download's start).
    func lookup(_ url: RemoteURL, _ addresses: Downloader.Configuration.Addresses) -> [String] {
        let key = "\(url.host):\(url.port)"
        if let pinned = addresses.resolve[key], !pinned.isEmpty {
            return addresses.spreadsOverAddresses ? pinned : [pinned[0]]
        }
        guard addresses.spreadsOverAddresses, !Self.isAddress(url.host) else { return [] }
        let now = Moment.now
        if let cached = cache.withLock({ $0[key] }), now - cached.at < .seconds(30) { return cached.addresses }
        var found = Self.resolve(url.host, port: url.port)
        if found.count < 2 || Set(found) == ["::1", "127.0.0.1"] { found = [] }
        cache.withLock { $0[key] = (found, now) }
        return found
    }

    /// Whether `host` is an IP address rather than a name.
    static func isAddress(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        var v6 = in6_addr()
        return bare.withCString { inet_pton(AF_INET, $0, &v4) == 1 || inet_pton(AF_INET6, $0, &v6) == 1 }
    }

    /// `host`'s addresses for TCP, numeric, each once, in the resolver's order.
    private static func resolve(_ host: String, port: Int) -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var found: [String] = []
        var entry = list
        while let current = entry {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(
                current.pointee.ai_addr, current.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0,
                NI_NUMERICHOST) == 0
            {
                let address = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !found.contains(address) { found.append(address) }
            }
            entry = current.pointee.ai_next
        }
        return found
    }
}
