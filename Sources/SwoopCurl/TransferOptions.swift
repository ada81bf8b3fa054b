import SwoopCore

/// Per-connection transfer settings (the downloader's configuration, in libcurl's terms).
package struct TransferOptions: Sendable {
    package var connectTimeout: Duration
    /// A connection below `lowSpeedLimit` bytes/s for this long fails with a timeout.
    package var stallTimeout: Duration
    package var lowSpeedLimit: Int
    package var verifiesTLSCertificates: Bool
    /// The CA bundle and directory to verify servers against (none: libcurl's defaults).
    package var certificateAuthorities: TrustedCertificates
    package var userAgent: String
    package var receiveBufferSize: Int
    package var proxy: ProxySetting
    /// curl's `NOPROXY` list, comma-separated; `nil`: `no_proxy` from the environment.
    package var noProxy: String?
    /// The proxy variables of the environment libcurl reads (see ``ProxyRoute/variables``), to
    /// tell which proxy a failed request went through.
    package var proxyEnvironment: [String: String]
    package var netrc: NetrcSetting
    /// The local end of connections in libcurl's form (`if!eth1`, `host!192.0.2.7`), if one is set.
    package var localInterface: String?

    package init(
        connectTimeout: Duration, stallTimeout: Duration, lowSpeedLimit: Int, verifiesTLSCertificates: Bool,
        certificateAuthorities: TrustedCertificates, userAgent: String, receiveBufferSize: Int, proxy: ProxySetting,
        noProxy: String? = nil, proxyEnvironment: [String: String] = [:], netrc: NetrcSetting
    ) {
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.lowSpeedLimit = lowSpeedLimit
        self.verifiesTLSCertificates = verifiesTLSCertificates
        self.certificateAuthorities = certificateAuthorities
        self.userAgent = userAgent
        self.receiveBufferSize = receiveBufferSize
        self.proxy = proxy
        self.noProxy = noProxy
        self.proxyEnvironment = proxyEnvironment
        self.netrc = netrc
    }

    /// Which proxy requests go through, as libcurl chooses it.
    package var proxyRoute: ProxyRoute {
        let setting: ProxyRoute.Setting =
            switch proxy {
            case .fromEnvironment: .environment
            case .direct: .none
            case .url(let url): .url(url)
            }
        return ProxyRoute(setting: setting, noProxy: noProxy, environment: proxyEnvironment)
    }

    /// Which proxy: the environment's (`http_proxy`, ...: libcurl reads them), none, or this one.
    package enum ProxySetting: Sendable, Equatable {
        case fromEnvironment
        case direct
        case url(String)
    }

    /// Which `.netrc`: none, `$HOME/.netrc`, or this file.
    package enum NetrcSetting: Sendable, Equatable {
        case off
        case defaultFile
        case file(String)
    }
}
