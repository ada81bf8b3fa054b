// The code of the Bulk Downloads article (Sources/Swoop/Swoop.docc/BulkDownloads.md), built with
// the package and run by scripts/test against a local origin.

// snippet.hide
import Foundation
import SwoopTestOrigin

let origin = try await TestOrigin.start()
// The origin stands in for https://data.example.com.
let server = origin.baseURL
for index in 0..<300 {
    origin.addObject(TestObject(size: Int64(1000 + index * 97), seed: UInt64(index)), at: "/v2/shard-\(index).parquet")
}
origin.addObject(TestObject(size: 4096, seed: 9), at: "/v2/checked.parquet")
let token = "not-a-secret"
let folder = "/tmp/swoop-snippet-bulk-\(UInt32.random(in: 0...UInt32.max))"

func check(_ condition: Bool, _ what: String) {
    if !condition { fatalError("snippet check failed: \(what)") }
}
// snippet.show

// snippet.example
import Swoop

let names = (0..<300).map { "shard-\($0).parquet" }
let items = names.map { name in
    BulkItem(
        DownloadRequest(url: "\(server)/v2/\(name)", headers: [("Authorization", "Bearer \(token)")]),
        to: "\(folder)/\(name)")
}

var configuration = Downloader.Configuration()
configuration.connectionPool.maximumConnections = 64
configuration.connectionPool.maximumConnectionsPerHost = 32
let downloader = Downloader(configuration: configuration)

var succeeded = 0
for await event in downloader.downloadAll(items, maxConcurrentFiles: 16) {
    switch event {
    case .started(let index):
        print("start", names[index])
    case .progress:
        break
    case .finished(let index, let result):
        print("done ", names[index], result.alreadyComplete ? "(already here)" : "")
    case .failed(let index, let error):
        print("FAIL ", names[index], error.localizedDescription)
    case .completed(let summary):
        print("\(summary.succeeded) of \(summary.files) files, \(summary.failed) failed")
        succeeded = summary.succeeded
    }
}
// snippet.end
// snippet.hide
check(succeeded == 300, "every file")
// snippet.show

// snippet.checksum
let expected = try Checksum(parsing: "sha-256=2f1f8e0b3e5e1fd8a1f4e0a6a2ec2f4c7f3a7b1c0f3d2e1a0b9c8d7e6f5a4b3c")
let request = DownloadRequest(url: "\(server)/v2/checked.parquet", expectedChecksum: expected)
do throws(DownloadError) {
    _ = try await downloader.download(request, to: "\(folder)/checked.parquet")
} catch {
    guard error.kind == .checksumMismatch else { throw error }
    print("the file is not the one expected; nothing was kept:", error.localizedDescription)
    // snippet.hide
    check(!FileManager.default.fileExists(atPath: "\(folder)/checked.parquet"), "nothing kept")
    // snippet.show
}
// snippet.end

// snippet.hide
await downloader.shutdown()
try await origin.shutdown()
try? FileManager.default.removeItem(atPath: folder)
print("BulkDownloads: every check passed")
