import SwoopCore

/// An S3 error response's body: `<Error><Code>NoSuchKey</Code><Message>...</Message>...</Error>`.
package struct S3ErrorBody: Sendable, Equatable {
    package var code: String
    package var message: String?
    /// The access key ID the store did not know (`InvalidAccessKeyId`); an ID is not a secret.
    package var accessKeyID: String?
    /// The region the bucket is in, when the store says (a wrong region).
    package var region: String?

    /// The error in `body`, or `nil` when it is not an S3 error document.
    package static func parse(_ body: [UInt8]) -> S3ErrorBody? {
        let document = S3XML(body)
        guard let error = document.elements("Error").first, let code = error.value("Code"), !code.isEmpty else {
            return nil
        }
        return S3ErrorBody(
            code: code, message: error.value("Message"), accessKeyID: error.value("AWSAccessKeyId"),
            region: error.value("Region"))
    }

    /// A session token, or temporary credentials, that expired: reading the credentials again
    /// may give ones that work.
    package var isExpiredCredentials: Bool {
        ["ExpiredToken", "TokenRefreshRequired", "InvalidToken"].contains(code)
    }

    /// The failure for a request about `location` that got this error with `httpStatus`: what
    /// S3 said, in its words, and what it means.
    package func error(for location: S3Location, httpStatus: Int) -> DownloadError {
        let (meaning, remedy) = explanation(for: location)
        let said = message.map { ": \"\($0)\"" } ?? ""
        return DownloadError(
            .httpStatus, "\(location.uri): \(meaning) (S3 \(code), HTTP \(httpStatus)\(said))", remedy: remedy,
            httpStatus: httpStatus)
    }

    private func explanation(for location: S3Location) -> (String, DownloadError.Remedy?) {
        switch code {
        case "NoSuchKey": ("there is no object with this key", nil)
        case "NoSuchBucket": ("the bucket '\(location.bucket)' does not exist at this endpoint", .checkS3Endpoint)
        case "AccessDenied", "AllAccessDisabled":
            ("the credentials may not read this (or the request was not signed)", .checkS3Credentials)
        case "SignatureDoesNotMatch":
            (
                "the store computes another signature: the secret access key (AWS_SECRET_ACCESS_KEY or the "
                    + "profile's aws_secret_access_key) is not the one of the access key ID", .checkS3Credentials
            )
        case "InvalidAccessKeyId":
            (
                "the store knows no access key ID \(accessKeyID.map { "'\($0)'" } ?? "like the one sent") "
                    + "(AWS_ACCESS_KEY_ID or the profile's aws_access_key_id)", .checkS3Credentials
            )
        case "ExpiredToken", "TokenRefreshRequired":
            (
                "the session token (AWS_SESSION_TOKEN or the profile's aws_session_token) has expired",
                .checkS3Credentials
            )
        case "InvalidToken": ("the session token is not valid", .checkS3Credentials)
        case "RequestTimeTooSkewed":
            ("this machine's clock is too far from the store's; set the clock right", nil)
        case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
            ("the bucket is in another region\(region.map { " (\($0))" } ?? "")", .checkS3Endpoint)
        default: ("the store refused the request", nil)
        }
    }
}
