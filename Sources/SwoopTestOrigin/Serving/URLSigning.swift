#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Presigned URLs, as object stores issue them: a request is served only if its query carries
/// `expires=<ms since 1970>&sig=<hex>` for its path, the time is not past, and it was not issued
/// before ``revokedBefore``. Anything else gets S3's answer to an expired URL: `403` with an
/// `AccessDenied` / `Request has expired` body. `GET /.sign/<path>` answers with a fresh URL
/// for `<path>` as its body (text), for a command that mints URLs.
public struct URLSigning: Sendable, Hashable {
    /// How long a minted URL is valid.
    public var validity: Duration
    /// URLs minted before this instant (ms since 1970) are refused, valid or not.
    public var revokedBefore: Int64 = 0
    /// Refusals are answered after this many milliseconds (`nil`: at once), so that requests
    /// sent meanwhile are refused too: many connections fail at about the same time.
    public var refusalDelayMilliseconds: Int64?

    public init(validFor validity: Duration) {
        self.validity = validity
    }

    /// The path prefix of the minting endpoint.
    static let mintPrefix = "/.sign/"

    /// `expires=...&sig=...` for `path`, minted now. Minting is also the issue time: the
    /// signature covers both.
    func query(for path: String) -> String {
        let now = Self.nowMilliseconds()
        let expires = now + validity.wholeMilliseconds
        return "expires=\(expires)&issued=\(now)&sig=\(Self.signature(path: path, expires: expires, issued: now))"
    }

    /// Why a request for `path` with `query` is refused, or nil when it is served.
    func refusal(path: String, query: String?) -> String? {
        var fields: [Substring: Substring] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        guard let expiresText = fields["expires"], let expires = Int64(expiresText),
            let issuedText = fields["issued"], let issued = Int64(issuedText),
            fields["sig"].map(String.init) == Self.signature(path: path, expires: expires, issued: issued)
        else { return "unsigned" }
        if issued < revokedBefore { return "revoked" }
        return Self.nowMilliseconds() >= expires ? "expired" : nil
    }

    static let refusalBody =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Request has "
            + "expired</Message></Error>\n"

    private static func signature(path: String, expires: Int64, issued: Int64) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ 0x5EC2_E7A1_D0F0_0D42
        for byte in "\(path)|\(expires)|\(issued)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3
        }
        return String(PayloadTable.mix(hash), radix: 16)
    }

    static func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
