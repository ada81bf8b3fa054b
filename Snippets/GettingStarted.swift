// The code of the Getting Started article (Sources/Swoop/Swoop.docc/GettingStarted.md), built
// with the package and run by scripts/test against a local origin, so the article's code
// cannot stop compiling or stop being true. Hidden lines set the origin up and check results.

// snippet.hide
import Foundation
import SwoopTestOrigin

let origin = try await TestOrigin.start()
// The origin stands in for https://example.com.
let server = origin.baseURL
origin.addObject(TestObject(size: 6 << 20, seed: 1), at: "/datasets/big.tar")
origin.addObject(TestObject(size: 3 << 20, seed: 2), at: "/datasets/stream.tar")
let scratch = "/tmp/swoop-snippet-\(UInt32.random(in: 0...UInt32.max))"
let path = scratch + "/big.tar"

func check(_ condition: Bool, _ what: String) {
    if !condition { fatalError("snippet check failed: \(what)") }
}
// snippet.show

// snippet.download
import Swoop

let downloader = Downloader()

// `server` is where the objects are, https://example.com say.
let url = URL(string: "\(server)/datasets/big.tar")!
let result = try await downloader.download(Swoop.DownloadRequest(url: url), to: path) { progress in
    if let fraction = progress.fractionCompleted {
        print("\(Int(fraction * 100))% at \(Int(progress.bytesPerSecond)) B/s")
    }
}
print("\(result.bytes) bytes in \(result.duration), \(result.connectionsUsed) connections")
// snippet.hide
check(result.bytes == 6 << 20, "the whole file")
// snippet.show

// snippet.failures
let missing = Swoop.DownloadRequest(url: URL(string: "\(server)/datasets/missing.tar")!)
do throws(DownloadError) {
    _ = try await downloader.download(missing, to: scratch + "/missing.tar")
} catch {
    switch error.kind {
    case .httpStatus where error.httpStatus == 404:
        print("not there:", error.localizedDescription)
    case .interrupted:
        print("paused; call download again to resume")
    default:
        print("failed (\(error.kind)):", error.localizedDescription)
    }
    // snippet.hide
    check(error.kind == .httpStatus && error.httpStatus == 404, "a 404, got \(error.kind)")
    check(error.localizedDescription == error.message, "localizedDescription is the message")
    check("\(error.kind)" == "httpStatus", "the kind prints as its case")
    // snippet.show
}
// snippet.end

// snippet.checksum
do throws(DownloadError) {
    let checksum = try Checksum(parsing: "sha-256=deadbeef")  // a digest cut short
    _ = Swoop.DownloadRequest(url: url, expectedChecksum: checksum)
} catch {
    print(error.localizedDescription)  // ... has 8 hex digits; sha-256 has 64
    // snippet.hide
    check(error.kind == .invalidRequest && error.reason.contains("8 hex digits"), "the checksum's error")
    // snippet.show
}
// snippet.end

// snippet.stream
let (bytes, response) = try await downloader.bytes(
    for: Swoop.DownloadRequest(url: URL(string: "\(server)/datasets/stream.tar")!))
print(response.expectedContentLength ?? -1, response.contentType ?? "no type", response.etag ?? "no ETag")
var received = 0
for try await chunk in bytes {
    received += chunk.count  // chunks arrive in order: hash them, parse them, pass them on
}
print("read \(received) bytes")
// snippet.hide
check(received == 3 << 20, "every byte, in order")
check(response.expectedContentLength == 3 << 20 && response.acceptsRanges, "the response's metadata")
check(response.contentType == "application/octet-stream", "the content type")
// snippet.show
// snippet.end

// snippet.progress
let task = try downloader.start(
    Swoop.DownloadRequest(url: URL(string: "\(server)/datasets/big.tar")!), to: scratch + "/again.tar")
for await progress in task.progressUpdates {
    print(progress.bytesDone, "of", progress.totalBytes ?? -1)
}
let again = try await task.result()
// snippet.hide
check(again.bytes == 6 << 20, "the second download")
// snippet.show
// snippet.end

// snippet.pause
let paused = try downloader.start(
    Swoop.DownloadRequest(url: URL(string: "\(server)/datasets/big.tar")!), to: scratch + "/paused.tar")
paused.pause()  // transfers stop; the partial file and its map stay
paused.resume()  // continues from the map
_ = try await paused.result()
// snippet.end

// snippet.hide
await downloader.shutdown()
// snippet.show

// snippet.tune
var configuration = Downloader.Configuration()
configuration.connections = .fixed(16)  // or .adaptive(maximum: 64), the default
configuration.timeout.stall = .seconds(10)  // replace a connection silent this long
configuration.retry.maxTries = 5
configuration.files.checkpointInterval = .seconds(2)  // nil: no segment map, no resume
configuration.connectionPool.maximumBytesPerSecond = 20 << 20  // every download of this downloader together
let tuned = Downloader(configuration: configuration)
// snippet.end

// snippet.hide
await tuned.shutdown()
try await origin.shutdown()
try? FileManager.default.removeItem(atPath: scratch)
print("GettingStarted: every check passed")
