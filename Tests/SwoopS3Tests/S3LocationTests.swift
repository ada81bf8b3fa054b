import SwoopCore
import SwoopS3
import Testing

@Suite("s3:// locations and endpoints")
struct S3LocationTests {
    @Test("s3://BUCKET/KEY is read as written; a bucket, a prefix, bad names")
    func parsing() throws {
        let object = try S3Location(parsing: "S3://bucket/dir/a b+c%20.bin")
        #expect(object.bucket == "bucket" && object.key == "dir/a b+c%20.bin" && object.namesObject)
        #expect(object.uri == "s3://bucket/dir/a b+c%20.bin")
        let bucket = try S3Location(parsing: "s3://bucket")
        #expect(bucket.key.isEmpty && !bucket.namesObject)
        #expect(try !S3Location(parsing: "s3://bucket/dir/").namesObject)
        for bad in ["s3://", "s3:///key", "s3://bu cket/k", "s3://b@d/k", "https://b/k"] {
            #expect(throws: DownloadError.self, "\(bad)") { try S3Location(parsing: bad) }
        }
        #expect(S3Location.isS3("s3://b/k") && S3Location.isS3("S3://b") && !S3Location.isS3("s3:/b"))
    }

    @Test("virtual-host addressing on AWS for DNS-safe names, path style for other stores and other names")
    func addressing() throws {
        let object = S3Location(bucket: "my-bucket", key: "a/b c.bin")
        let aws = S3Endpoint.aws(region: "eu-west-1")
        #expect(aws.url(for: object, addressing: .auto) == "https://my-bucket.s3.eu-west-1.amazonaws.com/a/b%20c.bin")
        #expect(aws.url(for: object, addressing: .path) == "https://s3.eu-west-1.amazonaws.com/my-bucket/a/b%20c.bin")
        let dotted = S3Location(bucket: "my.bucket", key: "k")
        #expect(aws.url(for: dotted, addressing: .auto) == "https://s3.eu-west-1.amazonaws.com/my.bucket/k")
        let custom = try S3Endpoint(parsing: "http://127.0.0.1:8333/", origin: "test")
        #expect(custom.url(for: object, addressing: .auto) == "http://127.0.0.1:8333/my-bucket/a/b%20c.bin")
        let named = try S3Endpoint(parsing: "https://S3.Example.com", origin: "test")
        #expect(named.url(for: object, addressing: .auto) == "https://s3.example.com/my-bucket/a/b%20c.bin")
        #expect(named.url(for: object, addressing: .virtualHost) == "https://my-bucket.s3.example.com/a/b%20c.bin")
        let based = try S3Endpoint(parsing: "https://host.example/store/", origin: "test")
        #expect(based.url(for: object, addressing: .path) == "https://host.example/store/my-bucket/a/b%20c.bin")
        for bad in ["127.0.0.1:8333", "ftp://h", "http://", "http://user@h", "http://h:99999"] {
            #expect(throws: DownloadError.self, "\(bad)") { try S3Endpoint(parsing: bad, origin: "test") }
        }
    }

    @Test("a listing's URL: parameters sorted and encoded, the token included")
    func listURL() throws {
        let endpoint = try S3Endpoint(parsing: "http://127.0.0.1:9000", origin: "test")
        let url = endpoint.listURL(
            bucket: "b", prefix: "logs/2026 01/", continuationToken: "1/a+b=", maxKeys: 1000, addressing: .auto)
        #expect(
            url == "http://127.0.0.1:9000/b?continuation-token=1%2Fa%2Bb%3D&encoding-type=url&list-type=2"
                + "&max-keys=1000&prefix=logs%2F2026%2001%2F")
        let aws = S3Endpoint.aws(region: "us-east-1")
        #expect(
            aws.listURL(bucket: "bucket", prefix: "", continuationToken: nil, maxKeys: 5, addressing: .auto)
                == "https://bucket.s3.us-east-1.amazonaws.com/?encoding-type=url&list-type=2&max-keys=5")
    }

    @Test("keys below a prefix become relative paths, never outside the directory")
    func relativePaths() {
        #expect(S3KeyPath.relativePath(forKey: "tree/a/b.bin", underPrefix: "tree/") == "a/b.bin")
        #expect(S3KeyPath.relativePath(forKey: "tree/a/b.bin", underPrefix: "tree") == "a/b.bin")
        #expect(S3KeyPath.relativePath(forKey: "tree-1.bin", underPrefix: "tree") == "-1.bin")
        #expect(S3KeyPath.relativePath(forKey: "x/y", underPrefix: "") == "x/y")
        for unsafe in [
            "tree/../etc/passwd", "tree/a/../../b", "tree/./a", "tree/a//b", "tree/dir/", "tree/", "tree/a\nb",
            "other/a",
        ] {
            #expect(S3KeyPath.relativePath(forKey: unsafe, underPrefix: "tree/") == nil, "\(unsafe)")
        }
    }

    @Test("keys are bytes: a prefix matched and cut byte for byte, every normalization its own path")
    func keysAreBytes() {
        let forms = ["\u{C5}ngstrom", "\u{212B}ngstrom", "A\u{30A}ngstrom", "caf\u{E9}", "cafe\u{301}"]
        let paths = forms.compactMap { S3KeyPath.relativePath(forKey: "u/" + $0, underPrefix: "u/") }
        #expect(paths.map { Array($0.utf8) } == forms.map { Array($0.utf8) })
        // A combining mark right after the prefix's '/' makes one Character with it: still under it.
        #expect(S3KeyPath.relativePath(forKey: "u/\u{301}x", underPrefix: "u/") == "\u{301}x")
        // An NFD prefix does not match an NFC key, byte for byte.
        #expect(
            S3KeyPath.place(key: "caf\u{E9}/a", underPrefix: "cafe\u{301}/") == .skipped("it is not under the prefix"))
    }

    @Test("a skip says why; Swoop's working directory and control characters are skipped, markers are not files")
    func skipReasons() {
        #expect(S3KeyPath.place(key: "t/dir/", underPrefix: "t/") == .directoryMarker)
        #expect(S3KeyPath.place(key: "t/", underPrefix: "t/") == .directoryMarker)
        for key in ["t/.swoop", "t/a/.swoop/x.part"] {
            guard case .skipped(let reason) = S3KeyPath.place(key: key, underPrefix: "t/") else {
                Issue.record("\(key) was not skipped")
                continue
            }
            #expect(reason.contains("working directory"))
        }
        for key in ["t/\u{1B}[2J", "t/a\u{7}", "t/c1\u{9B}", "t/../x", "t//x"] {
            #expect(S3KeyPath.relativePath(forKey: key, underPrefix: "t/") == nil, "\(key.debugDescription)")
        }
        #expect(S3KeyPath.relativePath(forKey: "t/.swoopy", underPrefix: "t/") == ".swoopy")
        #expect(S3KeyPath.relativePath(forKey: "t/big.part", underPrefix: "t/") == "big.part")
    }
}
