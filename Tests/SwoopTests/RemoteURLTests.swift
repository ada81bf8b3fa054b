import SwoopTestSupport
import Testing
@testable import Swoop
@testable import SwoopStore

@Suite("RemoteURL")
struct RemoteURLTests {
    private func parseError(_ string: String) -> DownloadError? {
        do {
            _ = try RemoteURL(string)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "http and https in any case",
        arguments: [
            "http://example.com/file.iso", "https://example.com/file.iso", "HTTP://EXAMPLE.COM/file.iso",
            "hTtPs://Example.Com:8443/x",
            "  https://example.com/padded  ", "http://[::1]:8080/x", "http://127.0.0.1/x",
            "https://user:pw@example.com/x?q=1#frag",
        ])
    func accepted(_ string: String) throws {
        let url = try RemoteURL(string)
        #expect(url.scheme == "http" || url.scheme == "https")
        #expect(url.scheme == url.scheme.lowercased() && url.host == url.host.lowercased())
        #expect(!url.absoluteString.contains("#"))
    }

    @Test func parsedParts() throws {
        let url = try RemoteURL("HTTPS://User:Secret@Example.COM:8443/a%20b/c.iso?token=t#frag")
        #expect(url.scheme == "https")
        #expect(url.host == "example.com")
        #expect(url.port == 8443)
        #expect(url.path == "/a b/c.iso")
        #expect(url.lastPathComponent == "c.iso")
        #expect(url.absoluteString.hasSuffix("?token=t"))  // sent as given, without the fragment
        #expect(try RemoteURL("http://example.com/x").port == 80)
        #expect(try RemoteURL("https://example.com/x").port == 443)
    }

    static let unsupportedSchemes: [(String, String)] = [
        ("ftp://example.com/file", "ftp"), ("file:///etc/passwd", "file"), ("javascript:alert(1)", "javascript"),
        ("data:text/plain,hi", "data"), ("HTTPX://example.com/", "httpx"), ("sftp://host/x", "sftp"),
    ]

    @Test("other schemes are refused, naming the scheme", arguments: unsupportedSchemes)
    func unsupportedScheme(_ string: String, scheme: String) throws {
        let error = try #require(parseError(string))
        #expect(error.kind == .invalidRequest)
        #expect(error.message.contains("unsupported URL scheme '\(scheme)'"))
        #expect(error.message.contains("http, https and s3"))
    }

    /// Schemes and the last path component are read as bytes when ASCII surrounds what is looked
    /// for; around other characters the Characters decide, as before. These pin both readings.
    @Test func schemesAndNamesBesideOtherCharacters() throws {
        // A scheme of letters that are not ASCII is still a scheme (refused by name), not a missing one.
        let accented = try #require(parseError("é://example.com/x"))
        #expect(accented.message.contains("unsupported URL scheme 'é'"), "\(accented.message)")
        #expect(try RemoteURL("HtTp://example.com/x").scheme == "http")
        // A decoded path whose last slash carries a combining mark (or follows a prepended
        // character) is cut at the last slash that is a Character of its own.
        for (encoded, expected) in [
            ("/a/b.bin", "b.bin"), ("/a/", ""), ("/a/%CC%81", "a/\u{301}"), ("/x/%D8%80/y", "%D8%80/y"),
            ("/%D8%80/y.bin", "\u{600}/y.bin"), ("/d%C3%A9j%C3%A0/vu.txt", "vu.txt"),
        ] {
            let url = try RemoteURL("http://example.com" + encoded)
            let path = url.path
            let reference = path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
            #expect(url.lastPathComponent == reference, "\(encoded): \(url.lastPathComponent.debugDescription)")
            if !expected.hasPrefix("%") { #expect(url.lastPathComponent == expected, "\(encoded)") }
        }
    }

    @Test func missingScheme() throws {
        for string in ["example.com/file.iso", "/just/a/path", "://example.com/x"] {
            let error = try #require(parseError(string), "\(string)")
            #expect(error.message.contains("it has no scheme"), "\(string)")
            #expect(!error.message.contains("http:///") && !error.message.contains("http://:"), "\(error.message)")
        }
    }

    @Test(
        "a URL without a scheme says to add one; a host:port is not taken for a scheme",
        arguments: [
            ("127.0.0.1:8080/x", "write http://127.0.0.1:8080/x or https://127.0.0.1:8080/x"),
            ("localhost:8080/x", "write http://localhost:8080/x"),
            ("example.com:443", "write http://example.com:443"),
            ("example.com/file.iso", "write http://example.com/file.iso"),
            ("not a url", "it has no scheme (a URL starts with http://, https:// or s3://)"),
        ])
    func noScheme(_ string: String, _ said: String) throws {
        let error = try #require(parseError(string))
        #expect(error.kind == .invalidRequest)
        #expect(error.message.contains(said), "\(error.message)")
        #expect(!error.message.contains("unsupported URL scheme"))
    }

    @Test func emptyAndBlank() throws {
        #expect(try #require(parseError("")).message.contains("empty"))
        #expect(try #require(parseError(" \t ")).message.contains("empty"))
    }

    @Test func controlCharacters() throws {
        for string in [
            "http://example.com/a\nb", "http://example.com/\u{0}", "http://exa\tmple.com/", "http://example.com/\u{7F}",
            "http://example.com/a\rb",
        ] {
            let error = try #require(parseError(string), "\(string.debugDescription)")
            #expect(error.message.contains("control characters"), "\(string.debugDescription)")
            #expect(!error.message.unicodeScalars.contains { $0.value < 0x20 }, "the message itself is printable")
        }
    }

    @Test func noHost() throws {
        for string in ["http://", "http:///x", "https:"] {
            let error = try #require(parseError(string), "\(string)")
            #expect(error.message.contains("no host"), "\(string)")
        }
    }

    @Test func portOutOfRange() throws {
        for string in ["http://example.com:0/x", "http://example.com:65536/x", "http://example.com:99999/x"] {
            let error = try #require(parseError(string), "\(string)")
            #expect(error.message.contains("port"), "\(string)")
            #expect(error.message.contains("out of range"), "\(string)")
        }
        #expect(try RemoteURL("http://example.com:65535/x").port == 65535)
        #expect(try RemoteURL("http://example.com:1/x").port == 1)
    }

    @Test(
        "a non-numeric port is named in the error"
    )
    func nonNumericPort() throws {
        let error = try #require(parseError("http://example.com:abc/x"))
        #expect(error.message.contains("port"))
    }

    @Test func redactedDropsCredentialsQueryAndFragment() throws {
        #expect(
            try RemoteURL("https://user:pw@Example.com:8443/a%20b/c?token=secret#frag").redacted
                == "https://example.com:8443/a%20b/c")
        #expect(try RemoteURL("https://example.com:443/x?y").redacted == "https://example.com/x")
        #expect(try RemoteURL("http://example.com:80/x").redacted == "http://example.com/x")
        #expect(try RemoteURL("http://example.com:443/x").redacted == "http://example.com:443/x")
        #expect(try RemoteURL("https://example.com:80/x").redacted == "https://example.com:80/x")
        #expect(try RemoteURL("http://example.com").redacted == "http://example.com/")
        #expect(try RemoteURL("http://example.com?q=1").redacted == "http://example.com/")
        #expect(try RemoteURL("http://[::1]:8080/x?k=v").redacted == "http://[::1]:8080/x")
        let url = try RemoteURL("https://alice:hunter2@example.com/f?sig=abc")
        #expect(url.description == url.redacted)
        #expect(!url.redacted.contains("alice") && !url.redacted.contains("hunter2") && !url.redacted.contains("sig"))
    }

    @Test func redirectResolution() throws {
        let base = try RemoteURL("https://example.com/dir/file.iso?token=1")
        #expect(try base.resolving(redirect: "other.iso").absoluteString == "https://example.com/dir/other.iso")
        #expect(try base.resolving(redirect: "../up.iso").absoluteString == "https://example.com/up.iso")
        #expect(try base.resolving(redirect: "/root.iso").absoluteString == "https://example.com/root.iso")
        #expect(
            try base.resolving(redirect: "//cdn.example.net/x.iso").absoluteString == "https://cdn.example.net/x.iso")
        #expect(
            try base.resolving(redirect: "http://mirror.example.org:8080/y").absoluteString
                == "http://mirror.example.org:8080/y")
        #expect(try base.resolving(redirect: "  /padded  ").absoluteString == "https://example.com/padded")
        let kept = try base.resolving(redirect: "https://s3.example.com/b/k?X-Amz-Signature=abc")
        #expect(kept.absoluteString.hasSuffix("?X-Amz-Signature=abc"))
    }

    @Test func redirectToOtherSchemesIsRefused() throws {
        let base = try RemoteURL("https://example.com/dir/file.iso")
        for location in ["ftp://example.com/file.iso", "file:///etc/passwd", "javascript:alert(1)", "data:,x"] {
            do {
                _ = try base.resolving(redirect: location)
                Issue.record("followed a redirect to \(location)")
            } catch {
                #expect(error.kind == .invalidResponse)
                #expect(error.message.contains("only http and https"), "\(location)")
            }
        }
        // The refusal does not leak credentials or query of the target.
        do {
            _ = try base.resolving(redirect: "ftp://bob:pw@example.com/f?secret=1")
        } catch {
            #expect(!error.message.contains("pw@") && !error.message.contains("secret"))
        }
        #expect(throws: DownloadError.self) { try base.resolving(redirect: "http://[bad") }
    }

    @Test func sameOrigin() throws {
        let a = try RemoteURL("https://example.com/a")
        #expect(a.isSameOrigin(as: try RemoteURL("https://EXAMPLE.com:443/b?q")))
        #expect(!a.isSameOrigin(as: try RemoteURL("http://example.com/a")))
        #expect(!a.isSameOrigin(as: try RemoteURL("https://example.com:8443/a")))
        #expect(!a.isSameOrigin(as: try RemoteURL("https://cdn.example.com/a")))
        #expect(!a.isSameOrigin(as: try RemoteURL("https://example.com.evil.net/a")))
    }

    @Test func printableAndStrippingQuery() {
        #expect(RemoteURL.printable("a\nb\u{0}c") == "a\\xab\\x0c")
        #expect(RemoteURL.printable(String(repeating: "x", count: 300)).count == 203)
        #expect(RemoteURL.strippingQuery("https://u:p@h/x?q#f") == "https://h/x")
        #expect(RemoteURL.strippingQuery("https://h/a@b") == "https://h/a@b")
    }
}

@Suite("File names and request headers")
struct FileNameTests {
    @Test func suggestedNames() {
        let cases: [(String, String)] = [
            ("https://example.com/files/disk.iso", "disk.iso"),
            ("https://example.com/files/disk.iso?download=1#x", "disk.iso"),
            ("https://example.com/a%20b.txt", "a b.txt"),
            ("https://example.com/dir/", "index.html"),
            ("https://example.com", "index.html"),
            ("https://example.com/", "index.html"),
            ("https://example.com/a/..", "index.html"),
            ("https://example.com/%2E%2E", "index.html"),
            ("https://example.com/.", "index.html"),
            ("https://example.com/..%2F..%2Fetc%2Fpasswd", "passwd"),
            ("https://example.com/a%5Cb", "a_b"),
            ("https://example.com/x%00y", "x_y"),
            ("https://example.com/x%0Ay%0D", "x_y_"),
            ("https://example.com/%C2%85nel", "_nel"),
            ("not a url", "index.html"),
            ("ftp://example.com/file", "index.html"),
            ("s3://bucket/data/big.bin", "big.bin"),
            ("S3://bucket/a/b%20c", "b%20c"),
            ("s3://bucket/dir/", "dir"),
            ("s3://bucket", "index.html"),
        ]
        for (url, expected) in cases {
            #expect(Downloader.suggestedFileName(for: url) == expected, "\(url)")
        }
    }

    /// What every suggested name must be: one safe path component.
    private func checkSafe(_ name: String, from input: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!name.isEmpty, "from \(input.debugDescription)", sourceLocation: sourceLocation)
        #expect(name != "." && name != "..", "\(name) from \(input.debugDescription)", sourceLocation: sourceLocation)
        #expect(!name.contains("/") && !name.contains("\\"), "\(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(
            !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(name.debugDescription)",
            sourceLocation: sourceLocation)
        #expect(name.utf8.count <= 255, "\(name.utf8.count) bytes", sourceLocation: sourceLocation)
    }

    @Test func longNamesAreCutToWholeCharacters() {
        let inputs = [
            String(repeating: "a", count: 300) + ".tar.gz",
            String(repeating: "é", count: 200) + ".iso",
            String(repeating: "漢", count: 100),
            String(repeating: "🙂", count: 80) + ".png",
            String(repeating: "👨‍👩‍👧", count: 20),  // 18-byte grapheme clusters
            String(repeating: "x", count: 400) + "." + String(repeating: "e", count: 30),  // extension too long to keep
        ]
        for input in inputs {
            guard let name = FileName.sanitized(input) else {
                Issue.record("nothing left of \(input)")
                continue
            }
            checkSafe(name, from: input)
            #expect(name.utf8.count > 200, "cut too much: \(name.utf8.count) bytes")
            // Only whole characters of the input survive.
            #expect(Set(name).isSubset(of: Set(input)), "\(name)")
        }
        #expect(FileName.sanitized(String(repeating: "a", count: 300) + ".tar.gz")?.hasSuffix(".gz") == true)
        #expect(FileName.sanitized(String(repeating: "é", count: 200) + ".iso")?.hasSuffix("é.iso") == true)
        // Through a URL: percent-encoded UTF-8.
        let encoded = String(repeating: "%E6%BC%A2", count: 120)
        checkSafe(Downloader.suggestedFileName(for: "https://example.com/" + encoded), from: encoded)
    }

    @Test func sanitizedRefusesNothingUsable() {
        for name in ["", " ", "  ", ".", "..", " .. ", " . "] {
            #expect(FileName.sanitized(name) == nil, "\(name.debugDescription)")
        }
        #expect(FileName.sanitized("...") == "...")
        #expect(FileName.sanitized("../x") == ".._x")
        #expect(FileName.sanitized("a/b\\c\u{1}d\u{7F}e\u{9B}f") == "a_b_c_d_e_f")
    }

    @Test("random names are always one safe component", arguments: 0..<2)
    func randomNames(batch: Int) {
        var random = SplitMix64(seed: 0xF11E_0000 &+ UInt64(batch))
        let alphabet: [String] = [
            "a", "Z", "0", ".", "..", "/", "\\", " ", "\t", "\n", "\r", "\u{0}", "\u{7F}", "\u{85}", "é", "漢", "🙂", "%",
            ":", "-", "_", "\u{202E}",
        ]
        for _ in 0..<3000 {
            let length = Int(random.logUniform(0...400))
            let input = (0..<length).map { _ in alphabet.randomElement(using: &random)! }.joined()
            if let name = FileName.sanitized(input) {
                checkSafe(name, from: input)
            }
            let viaURL = Downloader.suggestedFileName(for: "https://example.com/dir/" + Self.percentEncoded(input))
            checkSafe(viaURL, from: input)
        }
    }

    static func percentEncoded(_ string: String) -> String {
        string.utf8.map { byte in
            let unreserved =
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || "-._~".utf8.contains(byte)
            return unreserved
                ? String(UnicodeScalar(byte)) : "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
        }.joined()
    }

    @Test(
        "a long name made of one huge character never becomes '..' or empty"
    )
    func hugeGraphemeClusters() {
        // One 'a' with 200 combining accents: 401 bytes, one Character.
        let marks = String(repeating: "\u{301}", count: 200)
        checkSafe(FileName.sanitized("a" + marks) ?? "index.html", from: "a + 200 combining marks")
        checkSafe(FileName.sanitized("a" + marks + ".") ?? "index.html", from: "a + marks + '.'")
        // Through a URL the result is a path to the parent directory.
        let url = "https://example.com/files/.a" + String(repeating: "%CC%81", count: 200) + "."
        checkSafe(Downloader.suggestedFileName(for: url), from: url)
    }

    // MARK: Request headers

    private func headerError(_ name: String, _ value: String) -> DownloadError? {
        do {
            try Downloader.validate([(name: name, value: value)])
            return nil
        } catch {
            return error
        }
    }

    @Test func validHeaders() throws {
        try Downloader.validate([])
        try Downloader.validate([
            (name: "Authorization", value: "Bearer abc.def"), (name: "User-Agent", value: "swoop/1.0 (+https://x)"),
            (name: "X-Custom_1", value: ""), (name: "Cookie", value: "a=1; b=2"), (name: "Accept", value: "*/*"),
            (name: "X-Unicode", value: "naïve ✓"), (name: "!#$%&'*+-.^_`|~", value: "tokens"),
        ])
    }

    @Test(
        "bad names are refused",
        arguments: ["", "X Header", "X:Header", "Header:", "X\tY", "Ünï", "X\nY", "(x)", "a/b", "a@b", "a=b", "\"q\""])
    func badNames(_ name: String) throws {
        let error = try #require(headerError(name, "v"))
        #expect(error.kind == .invalidRequest)
        #expect(error.message.contains("invalid header name"))
    }

    @Test(
        "values with line breaks or NUL are refused", arguments: ["a\rb", "a\nb", "a\r\nInjected: 1", "a\u{0}b", "\n"])
    func badValues(_ value: String) throws {
        let error = try #require(headerError("X-Test", value))
        #expect(error.message.contains("line break or NUL"))
        #expect(error.message.contains("X-Test"))
    }

    @Test(
        "headers Swoop sets itself are refused",
        arguments: [
            "Range", "range", "RANGE", "If-Match", "if-unmodified-since", "Accept-Encoding", "Host", "Content-Length",
            "Transfer-Encoding", "Connection",
        ])
    func reservedNames(_ name: String) throws {
        let error = try #require(headerError(name, "x"))
        #expect(error.message.contains("set by Swoop itself"))
        #expect(error.message.contains(name))
    }

    @Test func oneBadHeaderAmongGoodOnesIsFound() {
        #expect(throws: DownloadError.self) {
            try Downloader.validate([
                (name: "Accept", value: "*/*"), (name: "Host", value: "evil"), (name: "X", value: "y"),
            ])
        }
    }
}

@Suite("ThroughputMeter")
struct ThroughputMeterTests {
    @Test func noRateWithoutTwoSamples() {
        var meter = ThroughputMeter()
        #expect(meter.bytesPerSecond == 0)
        let start = Moment.now
        meter.record(totalBytes: 1000, at: start)
        #expect(meter.bytesPerSecond == 0)
        meter.record(totalBytes: 2000, at: start)  // same instant
        #expect(meter.bytesPerSecond == 0)
    }

    @Test func steadyRate() {
        var meter = ThroughputMeter(window: .seconds(2))
        let start = Moment.now
        for step in 0...10 {
            meter.record(totalBytes: Int64(step) * 50_000, at: start + .milliseconds(100 * step))
        }
        #expect(abs(meter.bytesPerSecond - 500_000) < 1)
    }

    @Test func oldSamplesLeaveTheWindow() {
        var meter = ThroughputMeter(window: .seconds(2))
        let start = Moment.now
        meter.record(totalBytes: 0, at: start)
        meter.record(totalBytes: 1000, at: start + .seconds(1))
        meter.record(totalBytes: 2000, at: start + .seconds(2))
        #expect(abs(meter.bytesPerSecond - 1000) < 0.001)
        // A burst: the sample at 0 s falls out (3 s old), the one at 1 s is exactly 2 s old and stays.
        meter.record(totalBytes: 10_000, at: start + .seconds(3))
        #expect(abs(meter.bytesPerSecond - 4500) < 0.001)
        // After a long pause, the two latest samples are kept and give the rate between them.
        meter.record(totalBytes: 10_500, at: start + .seconds(60))
        #expect(abs(meter.bytesPerSecond - 500.0 / 57) < 0.001)
    }

    @Test func stalledTransferReadsZero() {
        var meter = ThroughputMeter(window: .seconds(1))
        let start = Moment.now
        for step in 0...20 {
            meter.record(totalBytes: 4096, at: start + .milliseconds(100 * step))
        }
        #expect(meter.bytesPerSecond == 0)
    }
}

@Suite("Object stores by name")
struct ObjectStoresTests {
    @Test("a store's name is its scheme and ://, in any case; anything else is a URL to parse")
    func kinds() {
        #expect(ObjectStores.schemes == ["s3"])
        #expect(ObjectStores.kind(of: "s3://bucket/key") == S3Access.self)
        #expect(ObjectStores.kind(of: "S3://bucket/key") == S3Access.self)
        for url in ["s3:/bucket/key", "s3:bucket", "s4://bucket/key", "https://s3://x", "bucket/s3://", "", "s3"] {
            #expect(ObjectStores.kind(of: url) == nil, "\(url)")
            #expect(!Downloader.namesObjectStore(url), "\(url)")
        }
    }

    @Test("a downloader reaches a store's name through the store, with its service; a URL through nothing")
    func remote() async throws {
        let downloader = Downloader()
        var configuration = Downloader.Configuration()
        configuration.s3.endpointURL = "http://127.0.0.1:9"
        configuration.s3.signsRequests = false
        let object = try downloader.remote("s3://bucket/a/b.bin", configuration: configuration)
        #expect(object.url.redacted == "s3://bucket/a/b.bin")
        #expect(object.url.absoluteString == "http://127.0.0.1:9/bucket/a/b.bin")
        #expect(object.service is S3Service)
        let plain = try downloader.remote("https://example.com/x", configuration: configuration)
        #expect(plain.service == nil && plain.url.redacted == "https://example.com/x")
        await downloader.shutdown()
    }
}
