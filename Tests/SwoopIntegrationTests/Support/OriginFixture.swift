import Crypto
import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Synchronization

/// Runs `body` with a fresh test origin, shutting it down however `body` ends.
func withTestOrigin<T>(threads: Int = 1, _ body: (TestOrigin) async throws -> T) async throws -> T {
    try await TestOrigin.withRunning(threads: threads, body)
}

/// Runs `body` with a downloader, shutting it down however `body` ends.
func withDownloader<T>(
    _ configuration: Downloader.Configuration = .init(), _ body: (Downloader) async throws -> T
) async throws -> T {
    let downloader = Downloader(configuration: configuration)
    do {
        let result = try await body(downloader)
        await downloader.shutdown()
        return result
    } catch {
        await downloader.shutdown()
        throw error
    }
}

extension TestObject {
    /// SHA-256 (hex) of the object's bytes, computed once per size, seed and edits, on a thread of
    /// its own (see ``TestData``).
    var sha256: String {
        get async throws {
            let key = ObjectDigests.Key(size: size, seed: seed, edits: edits)
            if let known = ObjectDigests.known.withLock({ $0[key] }) { return known }
            let object = self
            let digest = try await offThePool { object.sha256Blocking }
            ObjectDigests.known.withLock { $0[key] = digest }
            return digest
        }
    }

    private var sha256Blocking: String {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < size {
            let count = Int(min(Int64(buffer.count), size - offset))
            buffer.withUnsafeMutableBytes {
                fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), offset: offset)
            }
            hasher.update(data: buffer[0..<count])
            offset += Int64(count)
        }
        return hasher.finalize().hex
    }
}

/// The digests of the test objects computed so far: their bytes depend on the size, the seed and the edits alone.
private enum ObjectDigests {
    struct Key: Hashable {
        var size: Int64
        var seed: UInt64
        var edits: [TestObject.Edit]
    }
    static let known = Mutex<[Key: String]>([:])
}

/// A fresh temporary directory for downloads, removed by `cleanup()`.
struct Scratch {
    let url: URL

    init() throws {
        url = try TemporaryDirectory.make(prefix: "swoop-test")
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: path(name)) }

    /// The part file of the download to `name` (in `.swoop/` beside it: ``Downloader/workingFiles(of:)``).
    func part(_ name: String) -> String { Downloader.workingFiles(of: path(name)).part }

    /// The segment map of the download to `name`.
    func map(_ name: String) -> String { Downloader.workingFiles(of: path(name)).map }

    func exists(part name: String) -> Bool { FileManager.default.fileExists(atPath: part(name)) }

    func exists(map name: String) -> Bool { FileManager.default.fileExists(atPath: map(name)) }

    func cleanup() { try? FileManager.default.removeItem(at: url) }
}

/// A configuration for fault tests: fixed connections, quick retries. `stall`: how long a response
/// may send nothing; a test whose faults spare the first requests (``FaultSwitches/honestFirstRequests``)
/// gives it 30 s, since a probe retried after a stall on a loaded machine is a later request, and lied to.
func quickConfiguration(
    connections: Int = 4, maxTries: Int = 3, stall: Duration = .seconds(3)
) -> Downloader.Configuration {
    var configuration = Downloader.Configuration()
    configuration.connections = .fixed(connections)
    configuration.retry.maxTries = maxTries
    configuration.retry.baseDelay = .milliseconds(20)
    configuration.retry.maxDelay = .milliseconds(200)
    configuration.timeout.connect = .seconds(5)
    configuration.timeout.stall = stall
    return configuration
}
