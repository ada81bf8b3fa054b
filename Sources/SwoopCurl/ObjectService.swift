import SwoopCore

/// What reaching an object through a service API (S3's) takes beyond plain HTTP: every request
/// signed for the service, and its error responses read in the service's words.
///
/// Called on the transfer thread, once per request and once per failed response, so both must be
/// quick and must not block.
package protocol ObjectService: AnyObject, Sendable {
    /// The header lines that authorize a GET of `url` carrying `headers` (the `Range` and any
    /// precondition among them), to be added to the request as they are.
    func authorization(get url: String, headers: [(name: String, value: String)]) -> [(name: String, value: String)]

    /// The failure that `error`, an error status, means once its response body is read (`body`
    /// holds its first bytes, or none).
    func interpret(_ error: DownloadError, body: [UInt8]) -> DownloadError
}
