import CSwoopSystem
import FoundationEssentials
import Testing
import SwoopCore

#if canImport(Glibc)
import Glibc
#endif

/// Linking an unnamed (`O_TMPFILE`) file into place, as the group commit does: by its descriptor
/// where the kernel allows, else by its `/proc` path; either way a name that exists is never
/// replaced, and a failed link does not change how the next one is made.
@Suite("Unnamed link")
struct UnnamedLinkTests {
    private static func unnamed(in directory: String, _ bytes: String) throws -> Int32 {
        let fd = swoop_open_unnamed(directory)
        guard fd >= 0 else { throw DownloadError(.localIO, "O_TMPFILE: errno \(errno)") }
        let written = bytes.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, bytes.utf8.count) }
        #expect(written == bytes.utf8.count)
        return fd
    }

    private static func contents(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The link's result and errno, read before anything else can change it.
    private static func link(_ fd: Int32, _ target: String) -> (result: Int32, errno: Int32) {
        let result = swoop_link_unnamed(fd, target)
        return (result, errno)
    }

    @Test func linksOnceAndNeverReplaces() throws {
        let scratch = try TemporaryDirectory("swoop-link")
        defer { scratch.remove() }
        let directory = scratch.path
        let first = try Self.unnamed(in: directory, "first")
        defer { close(first) }
        // Into a directory that is not there: the failure is the directory's.
        #expect(Self.link(first, directory + "/missing/a") == (-1, ENOENT))
        #expect(Self.link(first, directory + "/a").result == 0)
        #expect(Self.contents(directory + "/a") == "first")

        let second = try Self.unnamed(in: directory, "second")
        defer { close(second) }
        #expect(Self.link(second, directory + "/a") == (-1, EEXIST))
        #expect(Self.contents(directory + "/a") == "first", "a link replaced a file")
        #expect(Self.link(second, directory + "/b").result == 0)
        #expect(Self.contents(directory + "/b") == "second")
    }
}
