import SwoopCore
import SwoopCurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension TransferOptions {
    /// The settings of `configuration` that each exchange needs.
    init(_ configuration: Downloader.Configuration) {
        var lowSpeedLimit = configuration.timeout.lowSpeedLimit
        if let cap = configuration.connectionPool.maximumBytesPerSecond, cap > 0, lowSpeedLimit > 0 {
            // Under a byte-rate cap a connection averages its share of it: the cap over the
            // connections sharing it, at worst every one the pool allows. Keep the low-speed limit
            // well under that, or connections the cap slows down would time out as stalled.
            let share = cap / Int64(max(1, configuration.connectionPool.maximumConnections))
            lowSpeedLimit = min(lowSpeedLimit, Int(max(1, share / 2)))
        }
        let environment = Self.proxyVariables()
        let netrc: NetrcSetting =
            switch configuration.access.netrc {
            case .off: .off
            case .defaultFile: .defaultFile
            case .file(let path): .file(path)
            }
        self.init(
            connectTimeout: configuration.timeout.connect, stallTimeout: configuration.timeout.stall,
            lowSpeedLimit: lowSpeedLimit, verifiesTLSCertificates: configuration.tls.verifiesCertificates,
            certificateAuthorities: TrustedCertificates(configuration), userAgent: configuration.userAgent,
            receiveBufferSize: configuration.tuning.receiveBufferSize,
            proxy: Self.proxy(configuration.access.proxy, environment: environment),
            noProxy: configuration.access.noProxy?.joined(separator: ","), proxyEnvironment: environment,
            netrc: netrc)
        // An address binds to that address, a name to that interface (curl's "host!" and "if!"
        // forms: a plain name would also be tried as a host name to look up).
        localInterface = configuration.addresses.localInterface.map {
            (HostAddresses.isAddress($0) ? "host!" : "if!") + $0
        }
    }

    /// The proxy setting each exchange is given for `proxy`. The environment's, when none of its
    /// variables is set (`environment`, read as the downloader is made), is no proxy: libcurl
    /// would find none, and told so, it does not look through the environment five times for every
    /// request.
    static func proxy(_ proxy: Downloader.Configuration.Proxy, environment: [String: String]) -> ProxySetting {
        switch proxy {
        case .fromEnvironment: environment.isEmpty ? .direct : .fromEnvironment
        case .direct: .direct
        case .url(let url): .url(url)
        }
    }

    /// The proxy variables set in this process's environment (libcurl reads the same ones).
    private static func proxyVariables() -> [String: String] {
        var variables: [String: String] = [:]
        for name in ProxyRoute.variables {
            if let value = getenv(name) { variables[name] = String(cString: value) }
        }
        return variables
    }
}
