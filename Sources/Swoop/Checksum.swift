import Crypto

/// An expected digest of a downloaded file.
///
/// ```swift
/// let checksum = Checksum("sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
/// ```
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    /// A digest algorithm.
    public enum Algorithm: String, Sendable {
        case sha256 = "sha-256"
    }

    public let algorithm: Algorithm
    /// The digest bytes.
    public let digest: [UInt8]

    /// Parses `ALGORITHM=HEX` (aria2's form, `sha-256=...`; `sha256=...` also works).
    public init?(_ text: String) {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        let name = text[..<equals].lowercased().replacing("_", with: "-")
        guard name == "sha-256" || name == "sha256" else { return nil }
        self.init(algorithm: .sha256, hex: String(text[text.index(after: equals)...]))
    }

    /// A digest from its hexadecimal form; `nil` if it is not one of the right length.
    public init?(algorithm: Algorithm, hex: String) {
        let digits = Array(hex.lowercased().utf8)
        guard digits.count == 64, digits.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else { return nil }
        func value(_ digit: UInt8) -> UInt8 { digit <= 57 ? digit - 48 : digit - 87 }
        self.algorithm = algorithm
        digest = stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    /// A digest already in bytes (one just computed, to show beside the expected one).
    init(algorithm: Algorithm, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    public var hex: String { digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }

    /// An incremental hasher for this checksum's algorithm.
    func makeHasher() -> ChecksumHasher { ChecksumHasher() }
}

/// Computes a ``Checksum``'s digest over data fed in pieces.
struct ChecksumHasher {
    private var sha256 = SHA256()

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        sha256.update(bufferPointer: bytes)
    }

    mutating func finalize() -> [UInt8] {
        Array(sha256.finalize())
    }
}
