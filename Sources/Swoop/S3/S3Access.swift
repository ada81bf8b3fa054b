import SwoopS3
import SwoopStore
import SwoopCurl
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Turns `s3://BUCKET/KEY` into what the engine sends: the store's URL for the object (named
/// `s3://BUCKET/KEY` in every message and in the segment map, never a signed URL) and the service
/// that signs its requests and reads its errors. One per downloader: credentials are read once per
/// way of finding them (a profile, or those in the configuration) and shared by its downloads.
final class S3Access: ObjectStore {
    static let scheme = "s3"

    /// The environment, home directory and file reader the AWS settings are read through.
    private let sources: S3SettingsSources
    private let stores = Mutex<[String: S3CredentialStore]>([:])
    /// Settings resolved in the last few seconds, by profile, region and endpoint: a prefix of
    /// thousands of objects read the config file once per object (an eighth of a rerun's
    /// processor time). Credentials are not cached here (their store reads them again on expiry).
    private let resolved = Mutex<[String: (settings: S3Settings, at: Moment)]>([:])

    init(sources: S3SettingsSources) {
        self.sources = sources
    }

    convenience init() {
        self.init(sources: .process)
    }

    static func key(of name: String) -> String? {
        (try? S3Location(parsing: name))?.key
    }

    /// The object's URL and service for a download of `uri` with `configuration`'s ``Downloader/Configuration/s3``.
    func object(
        _ uri: String, configuration: Downloader.Configuration
    ) throws(DownloadError) -> (url: RemoteURL, service: any ObjectService) {
        let configuration = configuration.s3
        let location = try S3Location(parsing: uri)
        guard location.namesObject else {
            throw DownloadError(
                .invalidRequest,
                "'\(uri)' names no object (\(location.key.isEmpty ? "no key" : "a key ending in '/'")); name one, "
                    + "as s3://BUCKET/KEY, or download every object under it as a prefix")
        }
        let (endpoint, service) = try reach(location, configuration: configuration)
        let url = try RemoteURL(endpoint.url(for: location, addressing: configuration.addressing.s3))
        return (url.named(location.uri), service)
    }

    /// The URL of one listing page of objects under `prefix` (an `s3://BUCKET/PREFIX`), and the
    /// service for the bucket.
    func listing(
        _ prefix: S3Location, continuationToken: String?, configuration: Downloader.Configuration.S3
    ) throws(DownloadError) -> (url: RemoteURL, service: S3Service) {
        let (endpoint, service) = try reach(prefix, configuration: configuration)
        let url = try RemoteURL(
            endpoint.listURL(
                bucket: prefix.bucket, prefix: prefix.key, continuationToken: continuationToken, maxKeys: 1000,
                addressing: configuration.addressing.s3))
        return (url.named(prefix.uri), service)
    }

    private func reach(
        _ location: S3Location, configuration: Downloader.Configuration.S3
    ) throws(DownloadError) -> (S3Endpoint, S3Service) {
        let settings = try settings(configuration)
        guard configuration.signsRequests else {
            return (settings.endpoint, S3Service(location: location, signing: nil))
        }
        let credentials = try credentialStore(configuration)
        let signer = SigV4Signer(region: settings.region)
        return (settings.endpoint, S3Service(location: location, signing: (signer, credentials)))
    }

    /// `configuration`'s region and endpoint as the AWS tools find them, read again after 5 s.
    private func settings(_ configuration: Downloader.Configuration.S3) throws(DownloadError) -> S3Settings {
        let key = [configuration.profile, configuration.region, configuration.endpointURL]
            .map { $0.map { "=" + $0 } ?? "-" }.joined(separator: "\n")
        let now = Moment.now
        if let cached = resolved.withLock({ $0[key] }), now - cached.at < .seconds(5) { return cached.settings }
        let settings = try S3Settings.resolve(
            profile: configuration.profile, region: configuration.region, endpointURL: configuration.endpointURL,
            from: sources)
        resolved.withLock { $0[key] = (settings, now) }
        return settings
    }

    /// The shared store for `configuration`'s credentials, made (and read) on first use.
    private func credentialStore(
        _ configuration: Downloader.Configuration.S3
    ) throws(DownloadError)
        -> S3CredentialStore
    {
        let key: String
        let load: @Sendable () throws(DownloadError) -> S3Credentials
        if let given = configuration.credentials {
            key = "given:\(given.accessKeyID):\(given.secretAccessKey.hashValue):\(given.sessionToken ?? "")"
            let credentials = S3Credentials(
                accessKeyID: given.accessKeyID, secretAccessKey: given.secretAccessKey,
                sessionToken: given.sessionToken)
            load = { credentials }
        } else {
            key = "profile:\(configuration.profile ?? "")"
            let sources = self.sources, profile = configuration.profile
            load = { () throws(DownloadError) in try S3Settings.credentials(profile: profile, from: sources) }
        }
        if let store = stores.withLock({ $0[key] }) { return store }
        let store = try S3CredentialStore(load: load)
        return stores.withLock { stores in
            if let existing = stores[key] { return existing }
            stores[key] = store
            return store
        }
    }
}

extension Downloader.Configuration.S3.Addressing {
    var s3: S3Addressing {
        switch self {
        case .auto: .auto
        case .path: .path
        case .virtualHost: .virtualHost
        }
    }
}

extension S3SettingsSources {
    /// This process's environment and files, read when a download starts (so a credentials file
    /// rewritten by a refresher is read anew).
    static var process: S3SettingsSources {
        var environment: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return S3SettingsSources(environment: environment) { path in
            guard case .success(let bytes) = readWholeFile(path, limit: 1 << 20) else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
