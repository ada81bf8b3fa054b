/// A digest of a whole object: one the caller expects, one a server published, or one computed.
///
/// ```swift
/// let checksum = try Checksum(parsing: "sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
/// ```
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    /// A digest algorithm. The CRCs are checked as the bytes arrive, chunk by chunk, and
    /// combined; the hashes are computed over the file in order as its complete prefix grows.
    public enum Algorithm: String, Sendable, CaseIterable {
        case md5 = "md5"
        case sha1 = "sha-1"
        case sha256 = "sha-256"
        case sha384 = "sha-384"
        case sha512 = "sha-512"
        /// CRC-32 (ISO-HDLC, as zlib).
        case crc32 = "crc32"
        /// CRC-32C (Castagnoli).
        case crc32c = "crc32c"
        /// CRC-64/NVME (S3's crc64nvme).
        case crc64nvme = "crc64nvme"
        /// CRC-64/XZ (Alibaba OSS's crc64ecma).
        case crc64xz = "crc64xz"

        /// The digest's length in bytes.
        public var byteCount: Int {
            switch self {
            case .md5: 16
            case .sha1: 20
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            case .crc32, .crc32c: 4
            case .crc64nvme, .crc64xz: 8
            }
        }

        /// Whether digests of pieces combine into the digest of the whole (the CRCs).
        package var isCRC: Bool {
            switch self {
            case .crc32, .crc32c, .crc64nvme, .crc64xz: true
            case .md5, .sha1, .sha256, .sha384, .sha512: false
            }
        }

        /// An algorithm by name: `sha-256`, `sha256`, `SHA_256`; `crc64ecma` is `crc64xz`.
        public init?(name: some StringProtocol) {
            let key = name.lowercased().filter { $0 != "-" && $0 != "_" }
            if key == "crc64ecma" {
                self = .crc64xz
                return
            }
            guard let found = Self.allCases.first(where: { $0.rawValue.filter { $0 != "-" } == key }) else {
                return nil
            }
            self = found
        }
    }

    public let algorithm: Algorithm
    /// The digest bytes (a CRC big-endian, as object stores encode it).
    public let digest: [UInt8]

    /// Parses `ALGORITHM=HEX` (aria2's form: `sha-256=...`; `sha256=...` also works). The
    /// algorithms are ``Algorithm``'s; a CRC's hex is its value, e.g. `crc32c=e3069283`.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` saying what is
    ///   wrong: no `=`, an unknown algorithm, a digest that is not hexadecimal or not the
    ///   algorithm's length. A checksum that was written is never dropped silently.
    public init(parsing text: String) throws(DownloadError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw DownloadError(
                .invalidRequest,
                "the checksum '\(text)' is not ALGORITHM=HEX (e.g. sha-256=\(String(repeating: "0", count: 8))...)")
        }
        let name = text[..<equals]
        guard let algorithm = Algorithm(name: name) else {
            let known = Algorithm.allCases.map(\.rawValue).joined(separator: ", ")
            throw DownloadError(
                .invalidRequest, "the checksum '\(text)' names an unknown algorithm '\(name)' (known: \(known))")
        }
        try self.init(algorithm: algorithm, hex: String(text[text.index(after: equals)...]))
    }

    /// A digest from its hexadecimal form.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when `hex` is
    ///   not hexadecimal, or not the algorithm's length.
    public init(algorithm: Algorithm, hex: String) throws(DownloadError) {
        let digits = Array(hex.lowercased().utf8)
        guard digits.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
            throw DownloadError(.invalidRequest, "the \(algorithm.rawValue) digest '\(hex)' is not hexadecimal")
        }
        guard digits.count == 2 * algorithm.byteCount else {
            throw DownloadError(
                .invalidRequest,
                "the \(algorithm.rawValue) digest '\(hex)' has \(digits.count) hex digits; \(algorithm.rawValue) has "
                    + "\(2 * algorithm.byteCount)")
        }
        func value(_ digit: UInt8) -> UInt8 { digit <= 57 ? digit - 48 : digit - 87 }
        self.algorithm = algorithm
        digest = stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    /// A digest already in bytes.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` when `digest`
    ///   is not the algorithm's length.
    public init(algorithm: Algorithm, digest: [UInt8]) throws(DownloadError) {
        guard digest.count == algorithm.byteCount else {
            throw DownloadError(
                .invalidRequest,
                "a \(algorithm.rawValue) digest has \(algorithm.byteCount) bytes, not \(digest.count)")
        }
        self.algorithm = algorithm
        self.digest = digest
    }

    /// A CRC from its value.
    package init(algorithm: Algorithm, crc: UInt64) {
        self.algorithm = algorithm
        digest = (0..<algorithm.byteCount).reversed().map { UInt8(truncatingIfNeeded: crc >> (8 * UInt64($0))) }
    }

    /// A CRC's value (the digest bytes read big-endian).
    package var crcValue: UInt64 { digest.reduce(0) { $0 << 8 | UInt64($1) } }

    public var hex: String { digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }
}
