import Crypto
import SwoopCore

/// Computes one algorithm's digest over bytes fed in order.
package struct DigestHasher {
    private enum State {
        case crc(CRC, UInt64)
        case md5(Insecure.MD5)
        case sha1(Insecure.SHA1)
        case sha256(SHA256)
        case sha384(SHA384)
        case sha512(SHA512)
    }

    package let algorithm: Checksum.Algorithm
    private var state: State

    package init(_ algorithm: Checksum.Algorithm) {
        self.algorithm = algorithm
        switch algorithm {
        case .md5: state = .md5(Insecure.MD5())
        case .sha1: state = .sha1(Insecure.SHA1())
        case .sha256: state = .sha256(SHA256())
        case .sha384: state = .sha384(SHA384())
        case .sha512: state = .sha512(SHA512())
        case .crc32, .crc32c, .crc64nvme, .crc64xz: state = .crc(algorithm.crc!, 0)
        }
    }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch state {
        case .crc(let crc, let value): state = .crc(crc, crc.update(value, bytes))
        case .md5(var hash): hash.update(bufferPointer: bytes); state = .md5(hash)
        case .sha1(var hash): hash.update(bufferPointer: bytes); state = .sha1(hash)
        case .sha256(var hash): hash.update(bufferPointer: bytes); state = .sha256(hash)
        case .sha384(var hash): hash.update(bufferPointer: bytes); state = .sha384(hash)
        case .sha512(var hash): hash.update(bufferPointer: bytes); state = .sha512(hash)
        }
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    package func finalize() -> Checksum {
        switch state {
        case .crc(_, let value): Checksum(algorithm: algorithm, crc: value)
        case .md5(let hash): try! Checksum(algorithm: algorithm, digest: Array(hash.finalize()))
        case .sha1(let hash): try! Checksum(algorithm: algorithm, digest: Array(hash.finalize()))
        case .sha256(let hash): try! Checksum(algorithm: algorithm, digest: Array(hash.finalize()))
        case .sha384(let hash): try! Checksum(algorithm: algorithm, digest: Array(hash.finalize()))
        case .sha512(let hash): try! Checksum(algorithm: algorithm, digest: Array(hash.finalize()))
        }
    }
}
