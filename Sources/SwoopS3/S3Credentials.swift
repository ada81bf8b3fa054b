/// An access key, its secret and, for temporary credentials, a session token.
package struct S3Credentials: Sendable, Equatable, CustomStringConvertible {
    package var accessKeyID: String
    package var secretAccessKey: String
    package var sessionToken: String?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The key ID only: the secret and the token are never printed.
    package var description: String {
        "S3 credentials \(accessKeyID)\(sessionToken == nil ? "" : " (temporary)")"
    }
}
