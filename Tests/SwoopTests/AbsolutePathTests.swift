import Testing
@testable import Swoop

@Suite("FileName.absolute")
struct AbsolutePathTests {
    @Test("normal absolute paths are returned as they are", arguments: [
        "/a", "/a/b.bin", "/tmp/out/t00001.bin", "/a/.hidden", "/a/...", "/a/b..c", "/.x/y",
    ])
    func normalPaths(path: String) {
        #expect(FileName.absolute(path) == path)
    }

    @Test("anything else is normalised", arguments: [
        ("/", "/"), ("//a", "/a"), ("/a//b", "/a/b"), ("/a/./b", "/a/b"), ("/a/../b", "/b"), ("/a/", "/a"),
        ("/a/.", "/a"), ("/a/b/..", "/a"), ("/..", "/"), ("/a/b/../../..", "/"),
    ])
    func normalised(path: String, expected: String) {
        #expect(FileName.absolute(path) == expected)
    }

    @Test func relativePathsStartAtTheWorkingDirectory() {
        let result = FileName.absolute("x/./y.bin")
        #expect(result.hasPrefix("/") && result.hasSuffix("/x/y.bin") && !result.contains("/./"))
    }
}
