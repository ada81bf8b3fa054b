import Crypto
import FoundationEssentials
import SystemPackage
import Testing
@testable import Swoop
@testable import SwoopStore

/// Working files live in `DIR/.swoop/`, named by a hash of the target's name: no target's name
/// can be another's working file.
@Suite("Working files")
struct WorkingFilesTests {
    @Test("each target's part and map are in .swoop beside it, named apart from every target")
    func layout() {
        let names = ["big", "big.part", "big.swoop", "big2", "big2.part", "caf\u{E9}", "cafe\u{301}"]
        let paths = names.map { DownloadPaths(target: "/data/out/" + $0) }
        let working = paths.flatMap { [$0.part, $0.map] }
        #expect(Set(working.map(ByteName.init)).count == names.count * 2, "two working files per target, all distinct")
        for (name, path) in zip(names, paths) {
            #expect(path.part.hasPrefix("/data/out/.swoop/") && path.part.hasSuffix(".part"))
            #expect(path.map.hasPrefix("/data/out/.swoop/") && path.map.hasSuffix(".map"))
            #expect(!path.part.contains(name), "not named after the target: \(path.part)")
            #expect(path.workingDirectory == "/data/out/.swoop" && path.directory == "/data/out")
        }
        #expect(DownloadPaths(target: "rel").part.hasPrefix("./.swoop/"))
        #expect(DownloadPaths(target: "/top").part.hasPrefix("/.swoop/"))
        // The same name always maps to the same files (a rerun finds them).
        #expect(DownloadPaths(target: "/x/big").part == DownloadPaths(target: "/x/big").part)
        #expect(Downloader.workingFiles(of: "/data/out/big").part == paths[0].part)
    }

    @Test(
        "the directory and working names are FilePath's and the name's SHA-256, however the target is spelled",
        arguments: [
            "big", "./big", "out/big", "/big", "/data/out/big", "a//b", "a/b/", "/", "./", ".", "..", "a/..",
            "./x/./y", "caf\u{E9}/cafe\u{301}", "//x", "x/.swoop.bin",
        ])
    func workingNames(target: String) {
        let path = FilePath(target)
        let parent = path.removingLastComponent().string
        let directory = parent.isEmpty ? "." : parent
        let name = path.lastComponent?.string ?? target
        let hex = SHA256.hash(data: Array(name.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        let paths = DownloadPaths(target: target)
        #expect(paths.directory == directory)
        #expect(paths.part == (directory == "/" ? "" : directory) + "/.swoop/" + hex + ".part")
    }

    @Test("a target in a working directory is refused before anything is sent or written")
    func insideWorkingDirectory() async throws {
        #expect(DownloadPaths.isInsideWorkingDirectory("out/.swoop/abc.part"))
        #expect(DownloadPaths.isInsideWorkingDirectory("out/.swoop"))
        #expect(!DownloadPaths.isInsideWorkingDirectory("out/x.swoop"))
        #expect(!DownloadPaths.isInsideWorkingDirectory(".swoopy"))
        #expect(
            DownloadPaths.isInsideWorkingDirectory(".swoop/x") && DownloadPaths.isInsideWorkingDirectory("/a//.swoop/"))
        #expect(
            !DownloadPaths.isInsideWorkingDirectory(".swoo") && !DownloadPaths.isInsideWorkingDirectory("a/.swoo/p"))
        #expect(!DownloadPaths.isInsideWorkingDirectory("") && !DownloadPaths.isInsideWorkingDirectory("/"))
        let downloader = Downloader()
        #expect(throws: DownloadError.self) {
            _ = try downloader.start(DownloadRequest(url: "http://127.0.0.1:9/x"), to: "/tmp/a/.swoop/x")
        }
        await downloader.shutdown()
    }
}
