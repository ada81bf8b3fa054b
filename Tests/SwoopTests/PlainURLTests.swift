import SwoopTestSupport
import Testing
@testable import Swoop

/// The byte reading of plain URLs (`RemoteURL.plain`) against Foundation's parser: whatever it
/// takes, Foundation reads with the same parts; what it leaves, Foundation reads (or refuses).
@Suite("Plain URLs")
struct PlainURLTests {
    private func foundation(_ string: String) -> RemoteURL? {
        let scheme = string.hasPrefix("https:") ? "https" : "http"
        return try? RemoteURL.parsedByFoundation(string, scheme: scheme)
    }

    private func expectSameParts(
        _ plain: RemoteURL, _ string: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let parsed = foundation(string) else {
            Issue.record("Foundation refuses \(string.debugDescription), read as plain", sourceLocation: sourceLocation)
            return
        }
        #expect(plain.absoluteString == parsed.absoluteString, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.scheme == parsed.scheme, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.host == parsed.host, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.port == parsed.port, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.path == parsed.path, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.redacted == parsed.redacted, "\(string)", sourceLocation: sourceLocation)
        #expect(plain.lastPathComponent == parsed.lastPathComponent, "\(string)", sourceLocation: sourceLocation)
    }

    @Test(
        "a list's usual URLs are plain, with Foundation's parts",
        arguments: [
            "http://127.0.0.1:18099/l/f00000", "https://example.com/data/shard-00017.tar",
            "https://cdn.example.org:8443/a/b/c.bin?x-id=GetObject&v=2", "http://host/",
            "https://example.com/dir/file;type=a", "http://example.com/~user/it's(1).txt",
            "https://example.com/a/b?sig=ab%2Fcd%3D&exp=17", "http://10.0.0.1:65535/x", "http://a-b.c-d.example/x:y@z",
        ])
    func usual(_ string: String) throws {
        let plain = try #require(RemoteURL.plain(string))
        expectSameParts(plain, string)
        #expect(try RemoteURL(string).absoluteString == string)
    }

    @Test(
        "anything else goes to Foundation's parser",
        arguments: [
            "HTTP://example.com/x", "http://Example.com/x", "http://example.com", "http://example.com:/x",
            "http://example.com:080/x", "http://example.com:65536/x", "http://example.com:0/x", "http://a..b/x",
            "http://.a/x", "http://a./x", "http://[::1]/x", "http://user@example.com/x", "http://example.com/a%20b",
            "http://example.com/a/../b", "http://example.com/./b", "http://example.com/a/..", "http://example.com/x#f",
            "http://example.com/x?%zz", "http://example.com/x?%2", "http://example.com/é", "http://ex_ample.com/x",
            "http://example.com/a b", "http://example.com/a\"b", "http://example.com/a[b]", "http://example.com/a|b",
        ])
    func notPlain(_ string: String) {
        #expect(RemoteURL.plain(string) == nil)
    }

    @Test("plain URLs drawn at random read as Foundation reads them", arguments: 0..<2)
    func random(batch: Int) {
        var random = SplitMix64(seed: 0x9A1E_0000 &+ UInt64(batch))
        let hostPieces = ["a", "z", "0", "9", "-", ".", "example", "com", "127", "_", "A"]
        let pathPieces = [
            "a", "Z", "0", "/", ".", "..", "-", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":",
            "@", "%", "%41", "%2f", "?", "#", " ", "é", "[", "\"", "file", "x.tar.gz",
        ]
        var plainCount = 0
        for _ in 0..<4000 {
            let host = (0..<Int(random.logUniform(1...12))).map { _ in hostPieces.randomElement(using: &random)! }
            let port: String =
                switch Int.random(in: 0..<6, using: &random) {
                case 0: ":\(Int.random(in: 0...70000, using: &random))"
                case 1: ":0\(Int.random(in: 1...999, using: &random))"
                case 2: ":"
                default: ""
                }
            let path = (0..<Int(random.logUniform(0...30))).map { _ in pathPieces.randomElement(using: &random)! }
            let scheme = Bool.random(using: &random) ? "http://" : "https://"
            let string = scheme + host.joined() + port + "/" + path.joined()
            guard let plain = RemoteURL.plain(string) else { continue }
            plainCount += 1
            expectSameParts(plain, string)
        }
        // The generator reaches both sides: a test that read nothing as plain would prove nothing.
        #expect(plainCount > 400 && plainCount < 3600, "\(plainCount) of 4000 plain")
    }
}
