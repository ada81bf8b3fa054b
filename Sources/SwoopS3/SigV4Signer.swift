import Crypto

/// AWS Signature Version 4 for S3 GET requests, with the payload's hash sent as the empty body's.
///
/// Written here rather than left to libcurl's `CURLOPT_AWS_SIGV4`: libcurl 7.88 (Debian 12's)
/// takes the query string as written instead of encoding and sorting its parameters (curl issue
/// #9717, fixed in a later release), so a listing's `continuation-token` would be signed wrongly;
/// it knows nothing of session tokens (the `x-amz-security-token` header would be ours to add and
/// keep in step); and its credentials are set per handle, while a refreshed token must reach the
/// next request of every handle. A signature is a few HMACs over strings this target already
/// builds; swift-crypto does the hashing.
package struct SigV4Signer: Sendable {
    package var region: String
    package var service = "s3"

    package init(region: String) {
        self.region = region
    }

    /// SHA-256 of an empty body, which is what a GET carries.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The headers that authorize `method` of `url` carrying `headers` at `date` (seconds since
    /// 1970): `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` with a session token,
    /// and `Authorization`. Signed: `host`, `range`, the preconditions and every `x-amz-*` header.
    package func sign(
        method: String, url: String, headers: [(name: String, value: String)], credentials: S3Credentials,
        date: Int64
    ) -> [(name: String, value: String)] {
        let parts = RequestURL(url)
        let timestamp = AmzDate(secondsSince1970: date)
        var added: [(name: String, value: String)] = [
            ("x-amz-date", timestamp.basic), ("x-amz-content-sha256", Self.emptyPayloadHash),
        ]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }

        var signed: [String: String] = ["host": parts.hostHeader]
        for (name, value) in headers + added where Self.isSigned(name.lowercased()) {
            let lower = name.lowercased()
            let trimmed = Self.canonicalValue(value)
            signed[lower] = signed[lower].map { "\($0),\(trimmed)" } ?? trimmed
        }
        let names = signed.keys.sorted()
        let signedHeaders = names.joined(separator: ";")
        let canonicalRequest = [
            method, parts.canonicalPath, parts.canonicalQuery,
            names.map { "\($0):\(signed[$0]!)\n" }.joined(), signedHeaders, Self.emptyPayloadHash,
        ].joined(separator: "\n")
        let scope = "\(timestamp.day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", timestamp.basic, scope, Self.hex(SHA256.hash(data: Array(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        let signature = Self.hex(
            HMAC<SHA256>.authenticationCode(
                for: Array(stringToSign.utf8),
                using: signingKey(
                    secret: credentials.secretAccessKey, day: timestamp.day)))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), "
            + "Signature=\(signature)"
        return added + [("Authorization", authorization)]
    }

    private func signingKey(secret: String, day: String) -> SymmetricKey {
        var key = SymmetricKey(data: Array("AWS4\(secret)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key))
        }
        return key
    }

    private static func isSigned(_ lowercasedName: String) -> Bool {
        lowercasedName.hasPrefix("x-amz-") || lowercasedName == "range" || lowercasedName == "if-match"
            || lowercasedName == "if-none-match" || lowercasedName == "if-modified-since"
            || lowercasedName == "if-unmodified-since"
    }

    /// A header's value with its ends trimmed and runs of spaces made one.
    private static func canonicalValue(_ value: String) -> String {
        var result = ""
        var pendingSpace = false
        for character in value {
            if character == " " || character == "\t" {
                pendingSpace = !result.isEmpty
            } else {
                if pendingSpace { result.append(" ") }
                pendingSpace = false
                result.append(character)
            }
        }
        return result
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// The parts of a request's URL a signature covers, in their canonical forms.
private struct RequestURL {
    /// The `Host` header libcurl sends: the host, and the port unless it is the scheme's default.
    var hostHeader: String
    /// The path, each segment decoded and encoded again (S3 encodes once, `/` kept).
    var canonicalPath: String
    /// The query's parameters encoded, sorted by name and then value.
    var canonicalQuery: String

    init(_ url: String) {
        var rest = Substring(url)
        var scheme = "https"
        if let end = rest.firstRange(of: "://") {
            scheme = rest[..<end.lowerBound].lowercased()
            rest = rest[end.upperBound...]
        }
        if let fragment = rest.firstIndex(of: "#") { rest = rest[..<fragment] }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        var host = rest[..<authorityEnd].lowercased()
        if let colon = host.lastIndex(of: ":"), !host[colon...].contains("]") {
            let port = host[host.index(after: colon)...]
            if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
                host = String(host[..<colon])
            }
        }
        hostHeader = host
        let target = rest[authorityEnd...]
        let queryStart = target.firstIndex(of: "?") ?? target.endIndex
        let path = target[..<queryStart]
        canonicalPath = path.isEmpty ? "/" : S3Encoding.encode(S3Encoding.decode(path), keepingSlash: true)
        let query = queryStart < target.endIndex ? target[target.index(after: queryStart)...] : ""
        canonicalQuery = query.split(separator: "&", omittingEmptySubsequences: true)
            .map { pair -> (String, String) in
                let equals = pair.firstIndex(of: "=")
                let name = S3Encoding.decode(pair[..<(equals ?? pair.endIndex)])
                let value = equals.map { S3Encoding.decode(pair[pair.index(after: $0)...]) } ?? ""
                return (S3Encoding.encode(name, keepingSlash: false), S3Encoding.encode(value, keepingSlash: false))
            }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
    }
}

/// A moment in SigV4's two spellings: `20130524T000000Z` and its day, `20130524` (UTC).
struct AmzDate {
    var basic: String
    var day: String

    init(secondsSince1970 seconds: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let second = seconds - days * 86_400
        // Days to a civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let dayOfMonth = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        day = pad(year, 4) + pad(month, 2) + pad(dayOfMonth, 2)
        basic = day + "T" + pad(second / 3600, 2) + pad(second / 60 % 60, 2) + pad(second % 60, 2) + "Z"
    }
}
