import SwoopS3
import SwoopCurl

/// An object an `s3://` listing found (``Downloader/objects(under:)``).
public struct S3Object: Sendable, Hashable {
    /// `s3://BUCKET/KEY`: what to download it by.
    public var url: String
    public var key: String
    /// Its size in bytes, as the listing says.
    public var size: Int64
    /// Its ETag, as the listing says (quoted by S3, bare by some compatible stores); `md5-N`-style
    /// for multipart uploads. Compared with a download's in one normal form (quotes, hex case).
    public var etag: String?

    /// The object's path below a directory that receives `prefix` (an `s3://BUCKET/PREFIX`): the
    /// rest of the key after the prefix, or `nil` for a key that cannot be a safe relative path (a
    /// `..` or `.` segment, an empty one, a control character, a directory marker ending in `/`).
    public func relativePath(under prefix: String) -> String? {
        if case .file(let path) = placement(under: prefix) { return path }
        return nil
    }

    /// What becomes of this object below a directory that receives `prefix`.
    public enum Placement: Sendable, Equatable {
        /// A file at this path, relative to the directory: the rest of the key, byte for byte.
        case file(String)
        /// A directory marker (a key ending in `/`): not a file.
        case directoryMarker
        /// Not downloaded, for the reason given: its key cannot be a safe relative path (a `..`
        /// or `.` segment, an empty one, a control character, a segment naming Swoop's working
        /// directory `.swoop`), or it is not under `prefix`.
        case skipped(reason: String)
    }

    /// Where this object goes below a directory that receives `prefix` (an `s3://BUCKET/PREFIX`),
    /// with keys compared and cut as bytes (two normalizations of a name are two files).
    public func placement(under prefix: String) -> Placement {
        guard let location = try? S3Location(parsing: prefix) else { return .skipped(reason: "the prefix is invalid") }
        switch S3KeyPath.place(key: key, underPrefix: location.key) {
        case .file(let path): return .file(path)
        case .directoryMarker: return .directoryMarker
        case .skipped(let reason): return .skipped(reason: reason)
        }
    }
}

/// The objects under an `s3://BUCKET/PREFIX`, listed with S3's ListObjectsV2, up to 1,000 a page,
/// in key order. Pages are fetched as the objects are read, the next one while the current
/// one's second half is being read, so a listing of millions of keys holds at most two pages.
/// Iterating throws the listing's ``DownloadError`` (in S3's words: `NoSuchBucket`,
/// `AccessDenied`, ...).
public struct S3Listing: AsyncSequence, Sendable {
    public typealias Element = S3Object
    public typealias Failure = DownloadError

    let prefix: String
    let fetch: @Sendable (_ token: String?) async throws(DownloadError) -> S3ListingPage

    public func makeAsyncIterator() -> Iterator { Iterator(prefix: prefix, fetch: fetch) }

    public struct Iterator: AsyncIteratorProtocol {
        let prefix: String
        let fetch: @Sendable (_ token: String?) async throws(DownloadError) -> S3ListingPage
        private var page: [S3Object] = []
        private var position = 0
        /// The next page's token; `nil` after the last page.
        private var token: String?
        private var started = false
        private var next: Task<S3ListingPage, any Error>?

        init(prefix: String, fetch: @escaping @Sendable (_ token: String?) async throws(DownloadError) -> S3ListingPage)
        {
            self.prefix = prefix
            self.fetch = fetch
        }

        public mutating func next() async throws(DownloadError) -> S3Object? {
            if !started {
                started = true
                try await take(fetch(nil))
            }
            while position == page.count {
                guard token != nil || next != nil else { return nil }
                try await take(awaitNextPage())
            }
            defer { position += 1 }
            if position >= page.count / 2, let token, next == nil {
                let fetch = self.fetch
                next = Task { () async throws -> S3ListingPage in try await fetch(token) }
                self.token = nil
            }
            return page[position]
        }

        private mutating func awaitNextPage() async throws(DownloadError) -> S3ListingPage {
            if next == nil, let token {
                self.token = nil
                return try await fetch(token)
            }
            guard let pending = next else { return S3ListingPage(objects: [], nextToken: nil) }
            next = nil
            do {
                return try await pending.value
            } catch let error as DownloadError {
                throw error
            } catch {
                throw DownloadError(.cancelled, "the listing of \(prefix) was cancelled")
            }
        }

        private mutating func take(_ fetched: S3ListingPage) {
            page = fetched.objects
            position = 0
            token = fetched.nextToken
        }
    }
}

/// One page of a listing: its objects and the token of the next page, if there is one.
struct S3ListingPage: Sendable {
    var objects: [S3Object]
    var nextToken: String?
}

extension Downloader {
    /// The objects under `prefix`, an `s3://BUCKET/PREFIX` (`s3://BUCKET/` for the whole bucket),
    /// read page by page as they are iterated; signed and reached as ``Configuration/s3`` says.
    ///
    /// ```swift
    /// for try await object in downloader.objects(under: "s3://bucket/logs/2026/") {
    ///     print(object.key, object.size)
    /// }
    /// ```
    public func objects(under prefix: String) -> S3Listing {
        let configuration = self.configuration
        return S3Listing(prefix: prefix) { [self] token throws(DownloadError) in
            try await listingPage(prefix, token: token, configuration: configuration)
        }
    }

    /// One page of the listing of `prefix`, from `token` on.
    private func listingPage(
        _ prefix: String, token: String?, configuration: Configuration
    ) async throws(DownloadError) -> S3ListingPage {
        let location = try S3Location(parsing: prefix)
        guard let s3 = stores.store(for: prefix) as? S3Access else {
            throw .invalidRequest("'\(prefix)' is not an s3:// prefix; write s3://BUCKET/PREFIX/")
        }
        let (url, service) = try s3.listing(location, continuationToken: token, configuration: configuration.s3)
        let headers = RequestHeaders([], originalURL: url, service: service)
        let (options, policy) = (TransferOptions(configuration), FailurePolicy(configuration))
        let result = await DocumentFetch.fetch(
            url, headers: headers, options: options, policy: policy, loop: loop, limit: 64 << 20)
        let body = try result.get()
        let page = try ListObjectsV2Page.parse(body)
        let objects = page.objects.map {
            S3Object(
                url: S3Location(bucket: location.bucket, key: $0.key).uri, key: $0.key, size: $0.size, etag: $0.etag)
        }
        return S3ListingPage(objects: objects, nextToken: page.isTruncated ? page.nextContinuationToken : nil)
    }
}
