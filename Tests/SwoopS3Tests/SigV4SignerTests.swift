import SwoopS3
import Testing

@Suite("SigV4 signing")
struct SigV4SignerTests {
    static let credentials = S3Credentials(
        accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    /// 2013-05-24T00:00:00Z, the date of AWS's published examples.
    static let exampleDate: Int64 = 1_369_353_600

    @Test("AWS's GET Object example with a Range header gives its published signature")
    func getObjectExample() {
        let headers = SigV4Signer(region: "us-east-1").sign(
            method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
            headers: [("Accept-Encoding", "identity"), ("Range", "bytes=0-9")], credentials: Self.credentials,
            date: Self.exampleDate)
        let authorization = headers.first { $0.name == "Authorization" }?.value
        #expect(
            authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(headers.first { $0.name == "x-amz-date" }?.value == "20130524T000000Z")
        #expect(headers.first { $0.name == "x-amz-content-sha256" }?.value == SigV4Signer.emptyPayloadHash)
        #expect(!headers.contains { $0.name == "x-amz-security-token" })
    }

    @Test("AWS's list example: query parameters sorted and encoded before signing")
    func listExample() {
        let signer = SigV4Signer(region: "us-east-1")
        let sorted = signer.sign(
            method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", headers: [],
            credentials: Self.credentials, date: Self.exampleDate)
        let unsorted = signer.sign(
            method: "GET", url: "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2", headers: [],
            credentials: Self.credentials, date: Self.exampleDate)
        let authorization = sorted.first { $0.name == "Authorization" }?.value ?? ""
        #expect(authorization.hasSuffix("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"))
        #expect(unsorted.last?.value == authorization)
    }

    @Test("a session token is sent and signed; a port other than the default is part of the host")
    func sessionTokenAndPort() {
        var credentials = Self.credentials
        credentials.sessionToken = "token"
        let signer = SigV4Signer(region: "eu-west-1")
        let withToken = signer.sign(
            method: "GET", url: "http://127.0.0.1:8333/bucket/key", headers: [], credentials: credentials,
            date: Self.exampleDate)
        #expect(withToken.first { $0.name == "x-amz-security-token" }?.value == "token")
        let authorization = withToken.last?.value ?? ""
        #expect(authorization.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"))
        #expect(authorization.contains("/20130524/eu-west-1/s3/aws4_request"))
        // Another port, another signature; the default port is the same as none.
        let other = signer.sign(
            method: "GET", url: "http://127.0.0.1:8334/bucket/key", headers: [], credentials: credentials,
            date: Self.exampleDate)
        #expect(other.last?.value != authorization)
        let defaultPort = signer.sign(
            method: "GET", url: "https://host:443/k", headers: [], credentials: credentials, date: Self.exampleDate)
        let noPort = signer.sign(
            method: "GET", url: "https://host/k", headers: [], credentials: credentials, date: Self.exampleDate)
        #expect(defaultPort.last?.value == noPort.last?.value)
    }

    @Test("a key's path is signed in S3's encoding whether or not it was already encoded")
    func pathEncoding() {
        let signer = SigV4Signer(region: "us-east-1")
        let encoded = signer.sign(
            method: "GET", url: "https://h/b/a%20b%2Bc", headers: [], credentials: Self.credentials, date: 0)
        let lowerHex = signer.sign(
            method: "GET", url: "https://h/b/a%20b%2bc", headers: [], credentials: Self.credentials, date: 0)
        #expect(encoded.last?.value == lowerHex.last?.value)
    }

    @Test("dates in SigV4's spelling, across years, leap days and the end of a day")
    func dates() {
        let cases: [(Int64, String)] = [
            (0, "19700101T000000Z"), (951_782_400, "20000229T000000Z"), (1_369_353_600, "20130524T000000Z"),
            (1_798_761_599, "20261231T235959Z"), (4_107_542_400, "21000301T000000Z"),
        ]
        for (seconds, expected) in cases {
            let headers = SigV4Signer(region: "r").sign(
                method: "GET", url: "https://h/", headers: [], credentials: Self.credentials, date: seconds)
            #expect(headers.first?.value == expected, "\(seconds)")
        }
    }

    @Test("credentials print without their secret or token")
    func description() {
        var credentials = Self.credentials
        credentials.sessionToken = "the-token"
        #expect(!"\(credentials)".contains("EXAMPLEKEY") && !"\(credentials)".contains("the-token"))
        #expect("\(credentials)".contains("AKIAIOSFODNN7EXAMPLE"))
    }
}
