import Foundation
import Swoop
import Testing

/// Byte-identical downloads from a real nginx on loopback, for awkward sizes and connection counts.
@Suite("Downloads from nginx", .serialized)
struct NginxDownloadTests {
    static let sizes = [0, 1, 4095, (1 << 20) + 1, 64 << 20]
    static let connectionCounts = [1, 4, 16]

    @Test("byte-identical download", arguments: sizes, connectionCounts)
    func byteIdentical(size: Int, connections: Int) async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let expected = try await nginx.addFile("object.bin", size: size, seed: UInt64(size))
            let directory = try TemporaryDirectory.make(prefix: "swoop-get")
            defer { try? FileManager.default.removeItem(at: directory) }
            let target = directory.appendingPathComponent("object.bin").path

            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(connections)
            let downloader = Downloader(configuration: configuration)
            let result: DownloadResult
            do {
                result = try await downloader.download(DownloadRequest(url: nginx.url("/object.bin")), to: target)
            } catch {
                await downloader.shutdown()
                throw error
            }
            await downloader.shutdown()

            #expect(result.bytes == Int64(size))
            #expect(try await TestData.sha256(of: target) == expected)
            #expect(!FileManager.default.fileExists(atPath: Downloader.workingFiles(of: target).part))
            #expect(!FileManager.default.fileExists(atPath: Downloader.workingFiles(of: target).map))
            #expect(result.connectionsUsed <= connections)

            let log = try nginx.log().filter { $0.uri == "/object.bin" }
            #expect(log.count == result.requests)
            // The probe asks for the first bytes with a range and no precondition ...
            let probe = try #require(log.first)
            #expect(probe.range == "bytes=0-1048575")
            #expect(probe.ifMatch.isEmpty)
            // ... and every later request carries Range and If-Match with the probe's strong ETag.
            for entry in log.dropFirst() {
                #expect(entry.range.hasPrefix("bytes="))
                #expect(
                    entry.ifMatch.hasPrefix("\"") && entry.ifMatch.hasSuffix("\""),
                    "request \(entry.range) lacks If-Match")
                #expect(entry.status == 206)
            }
            if size == 64 << 20 {
                #expect(log.count >= 2, "a 64 MiB object is fetched with several requests")
                let bytesServed = log.reduce(0) { $0 + $1.bytes }
                #expect(bytesServed >= Int64(size))
                if connections > 1 {
                    #expect(Set(log.map(\.connection)).count > 1, "several connections were used")
                }
            }
        }
    }

    @Test("connections are reused across segment requests")
    func connectionReuse() async throws {
        let nginx = try await Nginx.start()
        defer { nginx.stop() }
        let expected = try await nginx.addFile("object.bin", size: 24 << 20)
        let directory = try TemporaryDirectory.make(prefix: "swoop-get")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = Downloader.Configuration()
        configuration.connections = .fixed(2)
        configuration.tuning.minimumSegmentSize = 1 << 20
        let downloader = Downloader(configuration: configuration)
        let target = directory.appendingPathComponent("object.bin").path
        _ = try await downloader.download(DownloadRequest(url: nginx.url("/object.bin")), to: target)
        await downloader.shutdown()
        #expect(try await TestData.sha256(of: target) == expected)
        let log = try nginx.log()
        // The probe's connection went on to serve a segment request.
        #expect(
            log.contains { $0.requests > 1 },
            "no connection served a second request: \(log.map { ($0.connection, $0.requests) })")
    }
}
