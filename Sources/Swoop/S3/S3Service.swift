import SwoopS3
import SwoopCurl
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One `s3://` object on the wire: its requests signed (AWS Signature Version 4) with the
/// credentials of the moment, and its error responses read as S3 errors, in S3's words and with
/// the fix. Transfer thread; the credentials it shares with other downloads are behind a lock.
final class S3Service: ObjectService {
    let location: S3Location
    /// `nil`: requests go unsigned (a public bucket).
    private let signing: (signer: SigV4Signer, credentials: S3CredentialStore)?

    init(location: S3Location, signing: (signer: SigV4Signer, credentials: S3CredentialStore)?) {
        self.location = location
        self.signing = signing
    }

    func authorization(get url: String, headers: [(name: String, value: String)]) -> [(name: String, value: String)] {
        guard let signing else { return [] }
        return signing.signer.sign(
            method: "GET", url: url, headers: headers, credentials: signing.credentials.current,
            date: Int64(time(nil)))
    }

    func interpret(_ error: DownloadError, body: [UInt8]) -> DownloadError {
        guard let status = error.httpStatus, let s3 = S3ErrorBody.parse(body) else { return error }
        var interpreted = s3.error(for: location, httpStatus: status)
        if s3.isExpiredCredentials, let signing {
            // A session token that expired: the next try is signed with the credentials read anew
            // (the retries stay bounded by the retry policy).
            signing.credentials.reload()
            interpreted.passesWhenRetried = true
        }
        return interpreted
    }
}

/// The credentials a downloader's `s3://` requests are signed with, for one way of finding them
/// (a profile, or those given in the configuration); read again when a store says they expired.
final class S3CredentialStore: Sendable {
    private let load: @Sendable () throws(DownloadError) -> S3Credentials
    private let state: Mutex<S3Credentials>

    init(load: @escaping @Sendable () throws(DownloadError) -> S3Credentials) throws(DownloadError) {
        self.load = load
        self.state = Mutex(try load())
    }

    var current: S3Credentials { state.withLock { $0 } }

    /// Reads the credentials again; keeps the old ones if they can no longer be read (the next
    /// refusal then says what is wrong).
    func reload() {
        guard let fresh = try? load() else { return }
        state.withLock { $0 = fresh }
    }
}
