/// Switches that make the origin misbehave, all off by default.
///
/// Counters such as "the first K requests" refer to the request ordinal of ``TestOrigin/requestCount``:
/// the Nth request to arrive since the origin started or since the last ``TestOrigin/resetLog()``.
/// Body faults (drop, stall, short body) and pacing apply to GET responses of registered objects
/// (200 or 206) whose body is longer than the fault's threshold; HEAD responses, error pages and
/// redirects are never cut, stalled or paced.
public struct FaultSwitches: Sendable, Hashable {
    /// Connections whose ID is a multiple of `every` are paced at `bytesPerSecond`.
    public struct Straggler: Sendable, Hashable {
        /// Every `every`th connection (by ``RecordedRequest/connectionID``) is a straggler; at least 1.
        public var every: Int
        /// The body rate of a straggler's responses, in bytes per second.
        public var bytesPerSecond: Int

        public init(every: Int, bytesPerSecond: Int) {
            precondition(every >= 1 && bytesPerSecond >= 1, "Straggler needs every >= 1 and a positive rate")
            self.every = every
            self.bytesPerSecond = bytesPerSecond
        }
    }

    /// How a 206 response's `Content-Range` header misreports the bytes it carries
    /// (the body is always the requested range, and `Content-Length` is always right).
    public enum ContentRangeLie: Sendable, Hashable {
        /// First and last positions are both one more than the bytes actually sent.
        case offByOne
        /// The complete length is `size + 1`.
        case wrongTotal
        /// Claims the range starts at 0 (`bytes 0-(last-first)/size`).
        case wrongStart
    }

    /// False: ignore `Range` and always answer 200 with the whole body, without `Accept-Ranges`
    /// (like a server without range support).
    public var rangeSupport = true
    /// Sends object bodies chunked, without `Content-Length` (a server that streams what it
    /// generates). With ``rangeSupport`` off the size is then known only at the end.
    public var chunkedBodies = false
    /// Caps each response body at this many bytes per second, paced smoothly (small slices on a
    /// timer, not one-second bursts).
    public var throttleBytesPerSecond: Int? = nil
    /// Caps the body bytes sent to each client address at this many bytes per second, over all its
    /// connections together, as a CDN or an object store caps a client: more connections from one
    /// address share its rate; another address has a rate of its own. Applies on top of the other
    /// rates, the lowest wins.
    public var perClientBytesPerSecond: Int? = nil
    /// Each listed client address is sent at most this many body bytes in all (counted afresh
    /// whenever its limit changes), over all its connections; past it, its responses go silent with the
    /// socket open, as a node that stops making progress, until the limit is raised or removed.
    /// A test holds one client mid-download this way and stops it at a point of its choosing,
    /// whatever the machine's load.
    public var clientBodyLimits: [String: Int64] = [:]
    /// Makes some connections slow (the "a few connections are 10x slower" benchmark mode);
    /// applies on top of `throttleBytesPerSecond`, the lower rate wins.
    public var straggler: Straggler? = nil
    /// Cuts response bodies short: closes the connection partway through a body.
    public struct Drops: Sendable, Hashable {
        /// Closes the connection after sending this many body bytes of each response whose body is
        /// longer (0 = right after the headers).
        public var afterBytes: Int64?
        /// Each response with a body: with this probability, close the connection at a uniformly
        /// random point inside the body.
        public var probability: Double
        /// If set, the drops apply only to the first K requests.
        public var firstRequests: Int?

        public init(afterBytes: Int64? = nil, probability: Double = 0, firstRequests: Int? = nil) {
            self.afterBytes = afterBytes
            self.probability = probability
            self.firstRequests = firstRequests
        }
    }

    /// Answers the first requests with an error status instead of the object.
    public struct Failures: Sendable, Hashable {
        /// The first K requests (of any kind) get `status` with a tiny text body.
        public var firstRequests: Int
        /// The status of those failures, typically 503 or 429.
        public var status: Int
        /// Sends `Retry-After: <seconds>` on those failures.
        public var retryAfterSeconds: Int?
        /// The failures come from a gateway in front of the origin that answers for it: this reason
        /// phrase instead of the status's usual one, and these header fields (as Varnish's
        /// `503 Backend fetch failed` with `X-Varnish`, or Squid's page with `X-Squid-Error`).
        public var gatewayReason: String?
        public var gatewayFields: [String: String]

        public init(
            firstRequests: Int, status: Int = 503, retryAfterSeconds: Int? = nil, gatewayReason: String? = nil,
            gatewayFields: [String: String] = [:]
        ) {
            self.firstRequests = firstRequests
            self.status = status
            self.retryAfterSeconds = retryAfterSeconds
            self.gatewayReason = gatewayReason
            self.gatewayFields = gatewayFields
        }
    }

    /// Goes silent partway through a response, keeping the socket open.
    public struct Stall: Sendable, Hashable {
        /// Sends the headers and this many body bytes (0 = headers only), then goes silent until the
        /// client closes the connection. Wins over a drop at the same or a later point.
        public var afterBytes: Int64
        /// If set, stalls only the first K requests.
        public var firstRequests: Int?

        public init(afterBytes: Int64, firstRequests: Int? = nil) {
            self.afterBytes = afterBytes
            self.firstRequests = firstRequests
        }
    }

    /// Answers requests with a `Range` header with `200 text/html` and a small "server busy" page.
    public struct BusyPage: Sendable, Hashable {
        /// If set, only the first K requests get the page (then the server is fine).
        public var firstRequests: Int?

        public init(firstRequests: Int? = nil) {
            self.firstRequests = firstRequests
        }
    }

    /// Cuts bodies short (see ``Drops``).
    public var drops: Drops? = nil
    /// Fails the first requests (see ``Failures``).
    public var failures: Failures? = nil
    /// Stalls responses (see ``Stall``).
    public var stall: Stall? = nil
    /// Once K requests have arrived, every object changes (seed + 1, so new content, ETag and
    /// Last-Modified) a single time, before request K + 1 is answered. Setting a different value,
    /// or ``TestOrigin/resetLog()``, arms it again.
    public var changeAfterRequests: Int? = nil
    /// Sends a busy page to range requests (see ``BusyPage``).
    public var busyPage: BusyPage? = nil
    /// Makes 206 responses carry a wrong `Content-Range` header.
    public var contentRangeLie: ContentRangeLie? = nil
    /// Sends the correct `Content-Length` but closes the connection after `length - 100` body
    /// bytes (half the length when it is under 200).
    public var shortBody = false
    /// Adds `Content-Encoding: gzip` to object responses; the body bytes are unchanged.
    public var gzipEncoding = false
    /// The first K requests are answered honestly: ``busyPage``, `contentRangeLie`,
    /// `shortBody` and `gzipEncoding` apply only from request K + 1 on (so a probe succeeds and
    /// later segment requests meet the lie).
    public var honestFirstRequests = 0
    /// Serve only presigned URLs that have not expired (see ``URLSigning``).
    public var urlSigning: URLSigning? = nil
    /// Answer only requests that carry this S3 session token (see ``SessionTokens``).
    public var sessionTokens: SessionTokens? = nil

    /// Answers like an S3 store whose temporary credentials expire: a request whose
    /// `x-amz-security-token` header is not ``valid`` gets `400` with S3's `ExpiredToken` error
    /// document (the signature itself is not checked: SeaweedFS tests check signatures).
    public struct SessionTokens: Sendable, Hashable {
        /// The one token accepted now; changing it expires the one before.
        public var valid: String

        public init(valid: String) {
            self.valid = valid
        }

        static let expiredBody =
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ExpiredToken</Code>"
            + "<Message>The provided token has expired.</Message></Error>\n"
    }

    /// One byte of the object served wrong (XOR 0xFF) in the responses that carry it; its
    /// published digests (``TestObject/headers``, `Content-Digest`) still describe the right bytes.
    public struct FlipByte: Sendable, Hashable {
        /// The object offset of the byte.
        public var offset: Int64
        /// Only this many responses carrying it are wrong (then it is served right); `nil`: all.
        public var responses: Int?

        public init(offset: Int64, responses: Int? = nil) {
            self.offset = offset
            self.responses = responses
        }
    }

    /// Serves one byte wrong (see ``FlipByte``).
    public var flipByte: FlipByte? = nil
    /// Sends `Content-Digest: sha-256=:...:` (RFC 9530) of each 200 and 206 body: of the right
    /// bytes, even where ``flipByte`` makes them wrong.
    public var contentDigest = false

    // Servers whose validators or ranges do not describe the bytes they send. The types are in
    // FaultSwitches+Validators.swift.

    /// Answers every object from a load-balanced pool of nodes, each with its own copy and its
    /// own validators (see ``NodePool``).
    public var nodePool: NodePool? = nil
    /// For this long after an object is replaced (``TestOrigin/changeObject(at:)``,
    /// ``TestOrigin/addObject(_:at:)`` over a different object, `changeAfterRequests`,
    /// `changeAfterBodyBytes`), its responses carry the replaced object's `ETag` and
    /// `Last-Modified`, and preconditions are evaluated against them, while the size and the bytes
    /// are the new object's (an application server's resource cache). The time counts from the
    /// replacement; replacements within the window keep the validators from before the first.
    /// Recorded as `staleValidators` when they differ from the object's. `metadataFromFirstRequest`
    /// wins over it; a ``nodePool`` serves each node's copy of what it leaves.
    public var staleValidatorsFor: Duration? = nil
    /// Computes each path's validators and size once, at its first request while this is on (a
    /// static-file middleware caching them for its lifetime), and sends those ever after:
    /// `ETag`, `Last-Modified`, `Content-Length`, `Content-Range`'s total, preconditions and range
    /// resolution all use them, while the bytes are the current object's. Where a body runs past
    /// the current object's end, the connection is closed after the bytes that exist (recorded
    /// as `objectEnd`). Recorded as `firstMetadata` when the metadata differ from the object's.
    /// Turning it off forgets what it cached. A ``nodePool`` serves each node's copy of what it leaves.
    public var metadataFromFirstRequest = false
    /// Answers a satisfiable range with `200` instead of `206`, with a true `Content-Range` and
    /// the range's bytes (`Content-Length` is the range's length), as an S3-compatible store did.
    /// Recorded as `range200`.
    public var rangeAs200 = false
    /// Serves at most this many bytes (at least 1) of a satisfiable range, from its first
    /// position; `Content-Range` and `Content-Length` describe the shorter range. Recorded as
    /// `rangeCapped` when a range was shortened.
    public var rangeCapBytes: Int64? = nil
    /// Every request costs the server this much work before its head goes out, done by one
    /// worker in arrival order, as an S3 emulator that reads the whole object to check its
    /// checksum on every `GET`: requests that arrive together wait for each other's work, and a
    /// request the client gave up on is worked on all the same. More connections (more requests
    /// at once) make such a server slower, not faster.
    public var workPerRequest: Duration? = nil
    /// Refuses every range request for small objects with `416` (see ``RangeRefusal``).
    public var rangeRefusal: RangeRefusal? = nil
    /// Replaces one object once its responses have sent a number of body bytes (see
    /// ``ChangeAfterBodyBytes``).
    public var changeAfterBodyBytes: ChangeAfterBodyBytes? = nil
    /// Answers S3's ListObjectsV2 as an S3-compatible store (see ``S3Listing``).
    public var s3Listing: S3Listing? = nil

    /// S3's ListObjectsV2 (`GET /BUCKET?list-type=2&prefix=P`) answered from the objects served
    /// under `/BUCKET/`: each object's key is its path after the bucket, percent-decoded, so any
    /// bytes are a key (NFC and NFD names, control characters, `..`: a store that accepts any
    /// key). Keys are listed in byte order, `pageSize` a page (continuation tokens are positions),
    /// URL-encoded when the request asks (`encoding-type=url`).
    public struct S3Listing: Sendable, Hashable {
        public var pageSize: Int
        /// `false` lists ETags bare (`abc…`), as some compatible stores do; `GET` still quotes them.
        public var quotesETags: Bool

        public init(pageSize: Int = 1000, quotesETags: Bool = true) {
            self.pageSize = max(1, pageSize)
            self.quotesETags = quotesETags
        }
    }

    /// All switches off.
    public init() {}
}
