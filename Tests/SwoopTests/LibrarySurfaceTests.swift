import Foundation
import SystemPackage
import Testing

@testable import Swoop

/// The library as a Swift developer meets it: names, URLs, paths, errors in its own terms.
@Suite("Library surface")
struct LibrarySurfaceTests {
    @Test("names qualify with the module; requests take URLs; targets take FilePaths and file URLs")
    func currency() throws {
        let url = URL(string: "https://example.com/a%20b.iso?x=1")!
        let request = Swoop.DownloadRequest(url: url, expectedSize: 10)
        #expect(request.url == "https://example.com/a%20b.iso?x=1" && request.expectedSize == 10)
        let mirrored = Swoop.DownloadRequest(urls: [url, URL(string: "https://mirror.example/a.iso")!])
        #expect(mirrored.mirrors == ["https://mirror.example/a.iso"])
        #expect(try Downloader.path(of: URL(fileURLWithPath: "/data/a b.iso")) == "/data/a b.iso")
        #expect(throws: DownloadError.self) { try Downloader.path(of: url) }
        let item = BulkItem(request, to: FilePath("/data/x.iso"))
        #expect(item.destination == "/data/x.iso")
        #expect(Downloader.version.split(separator: ".").count == 3)
    }

    @Test("an error's localizedDescription is its message; its kind prints as the case")
    func errorWords() {
        let error = DownloadError(.httpStatus, "HTTP 404 for https://example.com/x", httpStatus: 404)
        #expect(error.localizedDescription == error.message)
        #expect("\(error.kind)" == "httpStatus" && error.kind.summary == "HTTP error")
        #expect("\(DownloadError.Kind.checksumMismatch)" == "checksumMismatch")
    }

    @Test("a bad header name is explained in the library's terms, not the command line's")
    func headerName() {
        #expect {
            try Downloader.validate([("Bad Name", "v")])
        } throws: { error in
            let message = (error as! DownloadError).message
            return message.contains("a header's name is") && !message.contains("Name: value")
        }
    }
}
