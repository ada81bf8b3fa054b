import SwoopCore
import SwoopS3
import Testing

@Suite("S3's XML: errors and listings")
struct S3XMLTests {
    @Test("an error body: its code and message, in S3's words with the fix")
    func errorBody() throws {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist \
            in our records.</Message><AWSAccessKeyId>AKIANOBODY</AWSAccessKeyId><RequestId>1</RequestId></Error>
            """
        let parsed = try #require(S3ErrorBody.parse(Array(body.utf8)))
        #expect(parsed.code == "InvalidAccessKeyId" && parsed.accessKeyID == "AKIANOBODY")
        let error = parsed.error(for: S3Location(bucket: "b", key: "k"), httpStatus: 403)
        #expect(error.kind == .httpStatus && error.httpStatus == 403 && error.remedy == .checkS3Credentials)
        #expect(error.reason.contains("s3://b/k") && error.reason.contains("InvalidAccessKeyId"))
        #expect(error.reason.contains("AKIANOBODY") && error.reason.contains("AWS_ACCESS_KEY_ID"))
        #expect(!parsed.isExpiredCredentials)
        let expired = S3ErrorBody.parse(Array("<Error><Code>ExpiredToken</Code></Error>".utf8))
        #expect(expired?.isExpiredCredentials == true)
        #expect(S3ErrorBody.parse(Array("<html>Bad Gateway</html>".utf8)) == nil)
        #expect(S3ErrorBody.parse([]) == nil)
    }

    @Test("a listing page: URL-encoded keys decoded, entities decoded, sizes, ETags, the next token")
    func listing() throws {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p%2F</Prefix>\
            <KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>\
            <Contents><Key>p/a+b%2Bc.bin</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>\
            <ETag>&quot;0123&quot;</ETag><Size>10</Size><StorageClass>STANDARD</StorageClass></Contents>\
            <Contents><Key>p/%C3%A9t%C3%A9%20%26%20%3C%3E</Key><ETag>&#34;4567-2&#34;</ETag><Size>0</Size></Contents>\
            <NextContinuationToken>tok/en=</NextContinuationToken></ListBucketResult>
            """
        let page = try ListObjectsV2Page.parse(Array(body.utf8))
        #expect(page.objects.map(\.key) == ["p/a b+c.bin", "p/été & <>"])
        #expect(page.objects.map(\.size) == [10, 0] && page.objects.map(\.etag) == ["\"0123\"", "\"4567-2\""])
        #expect(page.isTruncated && page.nextContinuationToken == "tok/en=")
        let last = try ListObjectsV2Page.parse(
            Array(
                ("<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a&amp;b</Key><Size>1</Size>"
                    + "</Contents></ListBucketResult>").utf8))
        #expect(last.objects.map(\.key) == ["a&b"] && !last.isTruncated && last.nextContinuationToken == nil)
        #expect(throws: DownloadError.self) { try ListObjectsV2Page.parse(Array("<Error/>".utf8)) }
        #expect(throws: DownloadError.self) {
            try ListObjectsV2Page.parse(
                Array("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>".utf8))
        }
    }

    @Test("keys listed raw (a store that ignores encoding-type) keep their bytes, a combining mark first included")
    func rawKeysAreBytes() throws {
        let keys = ["\u{301}starts-with-a-mark", "cafe\u{301}", "caf\u{E9}", "A\u{30A}", "\u{212B}"]
        let contents = keys.map { "<Contents><Key>\($0)</Key><ETag>\"e\"</ETag><Size>1</Size></Contents>" }
        let body = "<ListBucketResult><IsTruncated>false</IsTruncated>" + contents.joined() + "</ListBucketResult>"
        let page = try ListObjectsV2Page.parse(Array(body.utf8))
        #expect(page.objects.map { Array($0.key.utf8) } == keys.map { Array($0.utf8) })
        #expect(page.objects.allSatisfy { $0.etag == "\"e\"" && $0.size == 1 })
    }
}
