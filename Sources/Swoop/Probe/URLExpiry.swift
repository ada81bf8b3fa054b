#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether a refused request means the URL expired, so a fresh one may help (pure).
enum URLExpiry {
    /// `401` and `403` always (an expired presigned URL gets `403 AccessDenied` from S3 and
    /// most stores); another `4xx` when the URL's own expiry (``expiry(of:)``) is past.
    static func isRefusal(_ error: DownloadError, url: RemoteURL, now: Int64) -> Bool {
        guard error.kind == .httpStatus, let status = error.httpStatus else { return false }
        if status == 401 || status == 403 { return true }
        guard (400..<500).contains(status), status != 404, status != 412, status != 416 else { return false }
        return expiry(of: url).map { $0 <= now } ?? false
    }

    /// When a presigned URL stops being valid, in seconds since 1970, from its query:
    /// `X-Amz-Date` + `X-Amz-Expires` (S3 SigV4), `X-Goog-Date` + `X-Goog-Expires` (GCS), or
    /// `Expires` (S3 SigV2, OSS, CloudFront, GCS V2: seconds since 1970). `nil`: none found.
    static func expiry(of url: RemoteURL) -> Int64? {
        guard let question = url.absoluteString.firstIndex(of: "?") else { return nil }
        var fields: [String: String] = [:]
        for pair in url.absoluteString[url.absoluteString.index(after: question)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[parts[0].lowercased()] = String(parts[1]) }
        }
        for prefix in ["x-amz-", "x-goog-"] {
            if let date = fields[prefix + "date"].flatMap(basicISO8601),
                let seconds = fields[prefix + "expires"].flatMap({ Int64($0) })
            {
                return date + seconds
            }
        }
        return fields["expires"].flatMap { Int64($0) }
    }

    /// `20240131T235959Z` as seconds since 1970.
    static func basicISO8601(_ text: String) -> Int64? {
        let digits = Array(text.utf8)
        guard digits.count == 16, digits[8] == UInt8(ascii: "T"), digits[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for digit in digits[range] {
                guard (48...57).contains(digit) else { return nil }
                value = value * 10 + Int32(digit - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
            let hour = number(9..<11), let minute = number(11..<13), let second = number(13..<15)
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts))
    }

    /// Seconds since 1970, now.
    static var now: Int64 { Int64(time(nil)) }
}
