import SwoopCore

/// Per-connection transfer settings (the downloader's configuration, in libcurl's terms).
package struct TransferOptions: Sendable {
    package var connectTimeout: Duration {
        get { storage.value.connectTimeout }
        set { storage.update { $0.connectTimeout = newValue } }
    }
    /// A connection below `lowSpeedLimit` bytes/s for this long fails with a timeout.
    package var stallTimeout: Duration {
        get { storage.value.stallTimeout }
        set { storage.update { $0.stallTimeout = newValue } }
    }
    /// ``connectTimeout`` as libcurl takes it (`CURLOPT_CONNECTTIMEOUT_MS`): whole milliseconds, at
    /// least 1. Kept beside it rather than converted for every request (a `Duration`'s
    /// attoseconds made that 400 instructions).
    package var connectTimeoutMilliseconds: Int { storage.value.connectTimeoutMilliseconds }
    /// ``stallTimeout`` as libcurl takes it (`CURLOPT_LOW_SPEED_TIME`): whole seconds, rounded up,
    /// at least 1.
    package var stallTimeoutSeconds: Int { storage.value.stallTimeoutSeconds }
    package var lowSpeedLimit: Int {
        get { storage.value.lowSpeedLimit }
        set { storage.update { $0.lowSpeedLimit = newValue } }
    }
    package var verifiesTLSCertificates: Bool {
        get { storage.value.verifiesTLSCertificates }
        set { storage.update { $0.verifiesTLSCertificates = newValue } }
    }
    /// The CA bundle and directory to verify servers against (none: libcurl's defaults).
    package var certificateAuthorities: TrustedCertificates {
        get { storage.value.certificateAuthorities }
        set { storage.update { $0.certificateAuthorities = newValue } }
    }
    package var userAgent: String {
        get { storage.value.userAgent }
        set { storage.update { $0.userAgent = newValue } }
    }
    package var receiveBufferSize: Int {
        get { storage.value.receiveBufferSize }
        set { storage.update { $0.receiveBufferSize = newValue } }
    }
    package var proxy: ProxySetting {
        get { storage.value.proxy }
        set { storage.update { $0.proxy = newValue } }
    }
    /// curl's `NOPROXY` list, comma-separated; `nil`: `no_proxy` from the environment.
    package var noProxy: String? {
        get { storage.value.noProxy }
        set { storage.update { $0.noProxy = newValue } }
    }
    /// The proxy variables of the environment libcurl reads (see ``ProxyRoute/variables``), to
    /// tell which proxy a failed request went through.
    package var proxyEnvironment: [String: String] {
        get { storage.value.proxyEnvironment }
        set { storage.update { $0.proxyEnvironment = newValue } }
    }
    package var netrc: NetrcSetting {
        get { storage.value.netrc }
        set { storage.update { $0.netrc = newValue } }
    }
    /// The local end of connections in libcurl's form (`if!eth1`, `host!192.0.2.7`), if one is set.
    package var localInterface: String? {
        get { storage.value.localInterface }
        set { storage.update { $0.localInterface = newValue } }
    }

    private struct Values: Sendable {
        var connectTimeout: Duration { didSet { deriveTimeouts() } }
        var stallTimeout: Duration { didSet { deriveTimeouts() } }
        /// Libcurl's forms of the two timeouts, kept by ``deriveTimeouts()``.
        var connectTimeoutMilliseconds = 1
        var stallTimeoutSeconds = 1
        var lowSpeedLimit: Int
        var verifiesTLSCertificates: Bool
        var certificateAuthorities: TrustedCertificates
        var userAgent: String
        var receiveBufferSize: Int
        var proxy: ProxySetting
        var noProxy: String?
        var proxyEnvironment: [String: String]
        var netrc: NetrcSetting
        var localInterface: String?

        mutating func deriveTimeouts() {
            connectTimeoutMilliseconds = max(1, Int(connectTimeout.milliseconds))
            stallTimeoutSeconds = max(1, Int((stallTimeout.milliseconds + 999) / 1000))
        }
    }

    /// One retain a copy (``CopyOnWrite``): every request of a download carries the options.
    private var storage: CopyOnWrite<Values>

    package init(
        connectTimeout: Duration, stallTimeout: Duration, lowSpeedLimit: Int, verifiesTLSCertificates: Bool,
        certificateAuthorities: TrustedCertificates, userAgent: String, receiveBufferSize: Int, proxy: ProxySetting,
        noProxy: String? = nil, proxyEnvironment: [String: String] = [:], netrc: NetrcSetting
    ) {
        var values = Values(
            connectTimeout: connectTimeout, stallTimeout: stallTimeout, lowSpeedLimit: lowSpeedLimit,
            verifiesTLSCertificates: verifiesTLSCertificates, certificateAuthorities: certificateAuthorities,
            userAgent: userAgent, receiveBufferSize: receiveBufferSize, proxy: proxy, noProxy: noProxy,
            proxyEnvironment: proxyEnvironment, netrc: netrc, localInterface: nil)
        values.deriveTimeouts()  // a memberwise initializer runs no `didSet`
        storage = CopyOnWrite(values)
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
