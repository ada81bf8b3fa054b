import Testing
@testable import Swoop
@testable import SwoopStore

@Suite("FileName.absolute")
struct AbsolutePathTests {
    @Test(
        "normal absolute paths are returned as they are",
        arguments: [
            "/a", "/a/b.bin", "/tmp/out/t00001.bin", "/a/.hidden", "/a/...", "/a/b..c", "/.x/y",
        ])
    func normalPaths(path: String) {
        #expect(FileName.absolute(path) == path)
    }

    @Test(
        "anything else is normalised",
        arguments: [
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

    @Test(
        "a normal relative path and its spellings with . and .. meet at one absolute path",
        arguments: [
            "out/a.bin", "./out/a.bin", "out//a.bin", "out/./a.bin", "x/../out/a.bin", "out/a.bin/", "out/b/../a.bin",
            "././out/a.bin", ".//out/a.bin", "./out/./a.bin", "./x/../out/a.bin",
        ])
    func relativeSpellingsAgree(path: String) {
        let working = FileName.absolute(".")
        #expect(FileName.absolute(path) == (working == "/" ? "" : working) + "/out/a.bin")
    }

    @Test(
        "relative names made only of dots are components like any other",
        arguments: [
            ("...", "/..."), (".x/y", "/.x/y"), ("a..", "/a.."), ("./...", "/..."), ("./.x", "/.x"), ("./..a", "/..a"),
        ])
    func dottedRelativeNames(path: String, suffix: String) {
        let working = FileName.absolute(".")
        #expect(FileName.absolute(path) == (working == "/" ? "" : working) + suffix)
    }
}
