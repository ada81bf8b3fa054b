import FoundationEssentials
import Testing
@testable import Swoop
@testable import SwoopStore

#if canImport(Glibc)
import Glibc
#endif

/// One reading of what is on disk for a target, shared by a run and `Downloader.status(of:)`.
@Suite("PartialState")
struct PartialStateTests {
    private let directory: String
    private let paths: DownloadPaths
    private let url = "https://example.com/big.iso"

    init() throws {
        var template = Array("/tmp/swoop-partial-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw DownloadError(.localIO, "mkdtemp failed") }
        directory = String(cString: made)
        paths = DownloadPaths(target: directory + "/big.iso")
        // Where a download's first part file creates it.
        mkdir(paths.workingDirectory, 0o755)
    }

    private func cleanUp() {
        for path in [paths.target, paths.part, paths.map] { unlink(path) }
        rmdir(paths.target)
        rmdir(paths.workingDirectory)
        rmdir(directory)
    }

    private func writeFile(_ path: String, size: Int) throws {
        try Data(count: size).write(to: URL(fileURLWithPath: path))
    }

    private func writeMap(size: Int64 = 1 << 20, etag: String? = "\"v1\"", url: String? = nil) throws {
        let layout = ChunkLayout(objectSize: size)
        var chunks = ChunkSet(count: layout.chunkCount)
        chunks.insert(contentsOf: 0..<(layout.chunkCount / 2))
        let map = SegmentMap(
            objectSize: size, chunkSize: layout.chunkSize, etag: etag, lastModified: nil, url: url ?? self.url,
            chunks: chunks)
        try SegmentMapFile.write(map, to: paths.map)
    }

    @Test func nothingIsAbsent() {
        defer { cleanUp() }
        guard case .absent = PartialState.inspect(paths, url: url) else { Issue.record("expected absent"); return }
    }

    /// Without `.swoop` the part file and map are not looked for; with it, they are (a map there
    /// still resumes, a part alone is still an orphan).
    @Test func noWorkingDirectoryIsAbsent() throws {
        defer { cleanUp() }
        rmdir(paths.workingDirectory)
        guard case .absent = PartialState.inspect(paths, url: url) else { Issue.record("expected absent"); return }
        mkdir(paths.workingDirectory, 0o755)
        try writeFile(paths.part, size: 10)
        guard case .orphanedPart = PartialState.inspect(paths, url: url) else {
            Issue.record("a part without a map, in .swoop"); return
        }
    }

    @Test func aMapWithItsPartResumes() throws {
        defer { cleanUp() }
        try writeMap()
        try writeFile(paths.part, size: 1 << 20)
        guard case .resumable(let map) = PartialState.inspect(paths, url: url) else {
            Issue.record("expected resumable"); return
        }
        #expect(map.objectSize == 1 << 20)
        guard case .resumable = PartialState.inspect(paths, url: nil) else {
            Issue.record("no URL: the map's own"); return
        }
        #expect(Downloader.status(of: paths.target).canResume)
    }

    @Test func staleStateSaysWhy() throws {
        defer { cleanUp() }
        try writeFile(paths.part, size: 0)
        guard case .absent = PartialState.inspect(paths, url: url) else {
            Issue.record("an empty part without a map is nothing"); return
        }
        try writeFile(paths.part, size: 10)
        guard case .orphanedPart(let orphan) = PartialState.inspect(paths, url: url) else {
            Issue.record("a part without a map"); return
        }
        #expect(orphan.contains("has no segment map"))
        try writeMap()
        #expect(staleReason()?.contains("is shorter") == true)
        unlink(paths.part)
        #expect(staleReason()?.contains("is missing") == true)
        try Data("not a map".utf8).write(to: URL(fileURLWithPath: paths.map))
        try writeFile(paths.part, size: 1 << 20)
        #expect(staleReason()?.contains("cannot be used") == true)
    }

    @Test func anotherURLNeedsAStrongETag() throws {
        defer { cleanUp() }
        try writeFile(paths.part, size: 1 << 20)
        try writeMap(etag: "W/\"v1\"")
        #expect(staleReason(url: "https://mirror.example.org/big.iso")?.contains("no strong ETag") == true)
        guard case .resumable = PartialState.inspect(paths, url: url) else {
            Issue.record("same URL: resumable"); return
        }
        try writeMap(etag: "\"v1\"")
        guard case .resumable = PartialState.inspect(paths, url: "https://mirror.example.org/big.iso") else {
            Issue.record("a strong ETag lets the probe prove it"); return
        }
        // status agrees, given the URL the next run uses.
        try writeMap(etag: nil)
        #expect(!Downloader.status(of: paths.target, url: "https://mirror.example.org/big.iso?sig=1").canResume)
        #expect(Downloader.status(of: paths.target, url: url).canResume)
    }

    @Test func anExistingTargetComesFirst() throws {
        defer { cleanUp() }
        try writeMap()
        try writeFile(paths.part, size: 1 << 20)
        try writeFile(paths.target, size: 5)
        guard case .complete(5, nil) = PartialState.inspect(paths, url: url) else {
            Issue.record("a foreign file at the target"); return
        }
        #expect(Downloader.status(of: paths.target).state == .complete)
        CompletedObject(size: 5, etag: "\"v1\"", lastModified: nil, url: url).write(to: paths.target)
        if case .complete(5, let record) = PartialState.inspect(paths, url: url), record == nil {
            // This file system keeps no user xattrs: nothing more to check.
        } else {
            guard case .complete(5, let record?) = PartialState.inspect(paths, url: url) else {
                Issue.record("ours"); return
            }
            #expect(record.etag == "\"v1\"")
        }
        // Overwriting: the target is ignored, the partial state decides.
        guard case .resumable = PartialState.inspect(paths, url: url, overwritesTarget: true) else {
            Issue.record("overwrite"); return
        }
        unlink(paths.target)
        mkdir(paths.target, 0o755)
        guard case .directory = PartialState.inspect(paths, url: url) else { Issue.record("a directory"); return }
        #expect(!Downloader.status(of: paths.target).canResume)
    }

    private func staleReason(url: String? = nil) -> String? {
        if case .stale(let reason, _) = PartialState.inspect(paths, url: url ?? self.url) { return reason }
        return nil
    }
}
