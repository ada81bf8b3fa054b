// The library code of the README, compiled with the package so that it cannot stop compiling;
// scripts/check-readme-code checks that each of the README's Swift blocks is one of these
// slices, as written. (It is not run: its URLs are examples. The DocC articles' snippets run.)

// snippet.hide
import Foundation
import Swoop

/// Stands in for a FileHandle in the README's stream example.
struct Output {
    func write(contentsOf bytes: [UInt8]) throws {}
}

func streamExample(_ downloader: Downloader, url: String, output: Output) async throws {
    // snippet.show
    // snippet.stream
    let (bytes, response) = try await downloader.bytes(for: DownloadRequest(url: url))
    print(response.expectedContentLength ?? -1, response.contentType ?? "no type", response.url)
    for try await chunk in bytes {
        try output.write(contentsOf: chunk)
    }
    // snippet.end
    // snippet.hide
}

func libraryExample() async throws {
    // snippet.show
    // snippet.library
    let downloader = Downloader()  // one per process is plenty; it owns a transfer thread

    let url = URL(string: "https://example.com/big.iso")!
    let task = try downloader.start(
        Swoop.DownloadRequest(url: url, headers: [("Authorization", "Bearer ...")]), to: "/data/big.iso")
    for await progress in task.progressUpdates {  // or a callback: download(_:to:progress:)
        print(progress.bytesDone, progress.totalBytes ?? 0, progress.bytesPerSecond)
    }
    do throws(DownloadError) {
        let result = try await task.result()
        print("\(result.bytes) bytes in \(result.duration) over \(result.connectionsUsed) connections")
    } catch {
        print("failed (\(error.kind)):", error.localizedDescription)
    }
    await downloader.shutdown()
    // snippet.end
    // snippet.hide
}

func bulkExample(_ downloader: Downloader, names: [String]) async {
    // snippet.show
    // snippet.bulk
    let items = names.map { BulkItem(DownloadRequest(url: "https://data.example.com/v2/\($0)"), to: "/data/v2/\($0)") }
    for await event in downloader.downloadAll(items, maxConcurrentFiles: 16) {
        switch event {
        case .started, .progress: break
        case .finished(let index, let result): print("done", names[index], result.bytes)
        case .failed(let index, let error): print("FAIL", names[index], error.localizedDescription)
        case .completed(let summary): print("\(summary.succeeded)/\(summary.files) ok, \(summary.failed) failed")
        }
    }
    // Or hand each event to a handler (quick, any thread) and get the summary back: cheaper for small files.
    let summary = await downloader.downloadAll(items, reportsProgress: false) { event in
        if case .failed(let index, let error) = event { print("FAIL", names[index], error.localizedDescription) }
    }
    print(summary.failed, "failed")
    // snippet.end
    // snippet.hide
}
