import Testing
@testable import SwoopCore

/// The one rule for "is this the same object?".
@Suite("ObjectIdentity")
struct ObjectIdentityTests {
    private let date = "Tue, 15 Nov 1994 12:45:26 GMT"
    private let later = "Wed, 16 Nov 1994 08:00:00 GMT"

    @Test func preconditionPrefersAStrongETag() {
        #expect(ObjectIdentity(size: 1, etag: "\"a\"", lastModified: date).precondition! == ("If-Match", "\"a\""))
        #expect(
            ObjectIdentity(size: 1, etag: "W/\"a\"", lastModified: date).precondition! == ("If-Unmodified-Since", date))
        #expect(ObjectIdentity(size: 1, lastModified: date).precondition! == ("If-Unmodified-Since", date))
        #expect(ObjectIdentity(size: 1, etag: "W/\"a\"").precondition == nil)
        #expect(ObjectIdentity(size: 1).precondition == nil)
    }

    @Test func onlyAStrongETagProvesIdentityAcrossURLs() {
        #expect(ObjectIdentity(size: 1, etag: "\"a\"").provesIdentityAcrossURLs)
        #expect(!ObjectIdentity(size: 1, etag: "W/\"a\"", lastModified: date).provesIdentityAcrossURLs)
        #expect(!ObjectIdentity(size: 1, lastModified: date).provesIdentityAcrossURLs)
    }

    @Test func sizesMustAgreeWhenBothAreKnown() {
        let known = ObjectIdentity(size: 100, etag: "\"a\"")
        #expect(
            known.compare(ObjectIdentity(size: 101, etag: "\"a\"")) == .changed("its size 100 bytes became 101 bytes"))
        #expect(known.compare(ObjectIdentity(size: nil, etag: "\"a\"")) == .same)
        #expect(ObjectIdentity(size: nil, etag: "\"a\"").compare(ObjectIdentity(size: 5, etag: "\"a\"")) == .same)
    }

    @Test func aStrongETagMustMatchExactly() {
        let strong = ObjectIdentity(size: 10, etag: "\"a\"", lastModified: date)
        #expect(strong.compare(ObjectIdentity(size: 10, etag: "\"a\"")) == .same)
        #expect(strong.compare(ObjectIdentity(size: 10, etag: "\"b\"")) == .changed("ETag \"a\" became \"b\""))
        #expect(strong.compare(ObjectIdentity(size: 10, etag: "W/\"a\"")) == .changed("ETag \"a\" became W/\"a\""))
        // With a strong ETag, Last-Modified is not consulted (it may be regenerated per node).
        #expect(strong.compare(ObjectIdentity(size: 10, etag: "\"a\"", lastModified: later)) == .same)
    }

    @Test func aMissingStrongETagDependsOnWhereItWasObserved() {
        let strong = ObjectIdentity(size: 10, etag: "\"a\"")
        let bare = ObjectIdentity(size: 10)
        // A 206 or 200 must carry it (RFC 9110 §15.3.7): its absence proves nothing.
        guard case .validatorMissing = strong.compare(bare, observedIn: .representation) else {
            Issue.record("a representation without the ETag is not the same object")
            return
        }
        // A 416 carries only the size, and answered a request that carried If-Match.
        #expect(strong.compare(bare, observedIn: .unsatisfiedRange) == .same)
        #expect(
            strong.compare(ObjectIdentity(size: 11), observedIn: .unsatisfiedRange)
                == .changed("its size 10 bytes became 11 bytes"))
        #expect(
            strong.compare(ObjectIdentity(size: 10, etag: "\"b\""), observedIn: .unsatisfiedRange)
                == .changed("ETag \"a\" became \"b\""))
    }

    @Test func weakETagsMatchWeakly() {
        let weak = ObjectIdentity(size: 10, etag: "W/\"a\"")
        #expect(weak.compare(ObjectIdentity(size: 10, etag: "W/\"a\"")) == .same)
        #expect(weak.compare(ObjectIdentity(size: 10, etag: "\"a\"")) == .same)
        #expect(weak.compare(ObjectIdentity(size: 10)) == .same)
        #expect(weak.compare(ObjectIdentity(size: 10, etag: "W/\"b\"")) == .changed("ETag W/\"a\" became W/\"b\""))
    }

    @Test func lastModifiedDecidesWithoutAStrongETag() {
        let dated = ObjectIdentity(size: 10, lastModified: date)
        #expect(dated.compare(ObjectIdentity(size: 10, lastModified: date)) == .same)
        #expect(dated.compare(ObjectIdentity(size: 10)) == .same)
        #expect(
            dated.compare(ObjectIdentity(size: 10, lastModified: later))
                == .changed("Last-Modified \(date) became \(later)"))
        let weak = ObjectIdentity(size: 10, etag: "W/\"a\"", lastModified: date)
        #expect(
            weak.compare(ObjectIdentity(size: 10, etag: "W/\"a\"", lastModified: later))
                == .changed("Last-Modified \(date) became \(later)"))
    }

    @Test func contentCodingsMustAgreeWhenBothAreKnown() {
        let gzip = ObjectIdentity(size: 10, etag: "\"a\"", contentCoding: "gzip")
        #expect(gzip.compare(ObjectIdentity(size: nil, etag: "\"a\"", contentCoding: "gzip")) == .same)
        #expect(
            gzip.compare(ObjectIdentity(size: nil, etag: "\"a\"", contentCoding: "identity"))
                == .changed("its Content-Encoding gzip became identity"))
        #expect(gzip.compare(ObjectIdentity(size: 10, etag: "\"a\"")) == .same, "a record keeps no coding")
    }

    @Test func remoteObjectExposesItsIdentity() throws {
        let url = RemoteURL(testing: "https://example.com/a.bin")
        var object = RemoteObject(url: url, size: 5, etag: "\"x\"", lastModified: date, acceptsRanges: true)
        let identity = ObjectIdentity(size: 5, etag: "\"x\"", lastModified: date, contentCoding: "identity")
        #expect(object.identity == identity)
        object.etag = nil
        #expect(object.precondition! == ("If-Unmodified-Since", date))
    }
}
