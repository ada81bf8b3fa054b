/// What the disk holds of an object, as the probe needs it: which object (its size always
/// known), which of its ranges are missing, and where it is (for messages).
package struct LocalObject: Sendable, Equatable {
    package var identity: ObjectIdentity
    /// The ranges not on disk yet; none for a complete file.
    package var missingRanges: [ByteRange]
    /// The file's path, as the messages about it name it.
    package var path: String

    package init(identity: ObjectIdentity, missingRanges: [ByteRange] = [], path: String) {
        precondition(identity.size != nil, "a local object's size is known")
        self.identity = identity
        self.missingRanges = missingRanges
        self.path = path
    }

    package var size: Int64 { identity.size ?? 0 }
    package var isComplete: Bool { missingRanges.isEmpty }
}

/// What a download knows locally before its first request, as far as the probe is concerned.
package enum ProbeBasis {
    /// Nothing on disk: fetch the object from the start.
    case fresh
    /// The target is a file Swoop completed: confirm that the server still has that object.
    case completed(LocalObject)
    /// A partial download: confirm the object is the one its map describes, then continue.
    case resuming(LocalObject)

    /// The identity the local state records, if any.
    package var identity: ObjectIdentity? {
        switch self {
        case .fresh: nil
        case .completed(let record): record.identity
        case .resuming(let map): map.identity
        }
    }

    /// The file on disk, if any.
    package var path: String? {
        switch self {
        case .fresh: nil
        case .completed(let record): record.path
        case .resuming(let map): map.path
        }
    }
}

/// The probe's decisions, as pure functions: which request to send, and what a response head
/// means for the download. Nothing here does I/O; the ``Prober`` carries the decisions out.
package struct ProbeDecision {
    /// The URL the probe asked (after any redirects so far).
    package var url: RemoteURL
    /// The URL the download started from.
    package var originalURL: RemoteURL
    package var basis: ProbeBasis
    /// Redirects followed so far, and the most allowed.
    package var redirects: Int
    package var maxRedirects: Int
    /// The URLs of the chain so far, the first one included (``followed(to:)`` adds to it).
    package private(set) var chain: [RemoteURL] = []
    /// The size the request expects (``DownloadRequest/expectedSize``): an object of another size
    /// fails at its first response, before anything is written.
    package var expectedSize: Int64?
    /// Resolves a redirect's `Location` against the URL that answered it (parsing URLs is not
    /// this type's: it is given the parser).
    package let resolve: (_ base: RemoteURL, _ location: String) throws(DownloadError) -> RemoteURL

    package init(
        url: RemoteURL, originalURL: RemoteURL, basis: ProbeBasis, redirects: Int = 0, maxRedirects: Int,
        expectedSize: Int64? = nil, resolve: @escaping (RemoteURL, String) throws(DownloadError) -> RemoteURL
    ) {
        self.url = url
        self.originalURL = originalURL
        self.basis = basis
        self.redirects = redirects
        self.maxRedirects = maxRedirects
        self.expectedSize = expectedSize
        self.resolve = resolve
    }

    /// What the probe does next, and what becomes of the response body.
    package enum Step {
        /// Follow a redirect (a new probe asks `url`).
        case redirect(RemoteURL)
        /// The target already is this object: nothing to download.
        case alreadyComplete
        /// The partial download already holds every byte of this object: finalize it.
        case finishResumed(RemoteObject)
        /// The object is empty.
        case empty(RemoteObject)
        /// The server serves ranges: plan the object; this response carries `firstRange`.
        case ranged(RemoteObject, firstRange: ByteRange)
        /// The server ignores ranges: this response is the whole download. `discardsPartial`: a
        /// partial download existed and cannot be continued.
        case stream(RemoteObject, discardsPartial: Bool)
        /// The local partial state is not this object's: discard it and start over.
        case restart(String)
        /// The answer did not say the object's size: ask for `range` (its last byte), whose `206`
        /// does, with the same precondition.
        case confirm(RequestedRange)
        /// The download fails with `error` (a new probe may follow if it is transient).
        case fail(DownloadError)
    }

    /// Moves on to `next`, the target of a redirect from ``url``.
    package mutating func followed(to next: RemoteURL) {
        if chain.isEmpty { chain = [url] }
        chain.append(next)
        redirects += 1
        url = next
    }

    /// Starts a new chain at `start` (a fresh URL for an expired one).
    package mutating func restart(at start: RemoteURL) {
        chain = []
        redirects = 0
        url = start
    }

    /// How far the first request reaches when nothing else decides: about one MiB, so a small
    /// object arrives in one response and a large one's first connection is busy from the start.
    package static func probeSize(minimumSegmentSize: Int64) -> Int64 { max(minimumSegmentSize, 1 << 20) }

    /// The probe's range and precondition for `basis`: a completed file (or a partial download that
    /// holds every byte) asks for the byte after its end, whose `416` confirms it when it names the
    /// size (Apache httpd and lighttpd do not: ``Step/confirm(_:)`` then asks for the last byte); a
    /// partial download asks for its first missing bytes; a new one for its first `probeSize`
    /// bytes. Known validators go in the precondition.
    package static func request(
        for basis: ProbeBasis, probeSize: Int64
    ) -> (range: RequestedRange, precondition: (name: String, value: String)?) {
        switch basis {
        case .fresh:
            return (.bounded(ByteRange(0, probeSize)), nil)
        case .completed(let record):
            return (.from(record.size), record.identity.precondition)
        case .resuming(let map):
            guard let first = map.missingRanges.first else { return (.from(map.size), map.identity.precondition) }
            let range = ByteRange(first.lowerBound, min(first.upperBound, first.lowerBound + probeSize))
            return (.bounded(range), map.identity.precondition)
        }
    }

    /// Decides what the response head to a probe of `requested` means.
    package func decide(_ head: ResponseHead, requested: RequestedRange) -> (step: Step, body: BodyDisposition) {
        let decided = decideAnySize(head, requested: requested)
        guard let expected = expectedSize, let size = objectSize(decided.step), size != expected else { return decided }
        let error = DownloadError(
            .sizeMismatch, "\(url.redacted) is \(Wording.bytes(size)), not the \(expected) expected",
            remedy: .correctExpectedSize)
        return (.fail(error), .abort)
    }

    /// The object's size a step goes on with, if it names one.
    private func objectSize(_ step: Step) -> Int64? {
        switch step {
        case .ranged(let found, _), .stream(let found, _), .finishResumed(let found): found.size
        case .empty: 0
        case .alreadyComplete: if case .completed(let record) = basis { record.size } else { nil }
        case .redirect, .restart, .fail, .confirm: nil
        }
    }

    private func decideAnySize(_ head: ResponseHead, requested: RequestedRange) -> (step: Step, body: BodyDisposition) {
        let result: ResponseValidator.ProbeResult
        do {
            result = try ResponseValidator.probe(head, requested: requested, url: url)
        } catch {
            return (.fail(error), .abort)
        }
        switch result {
        case .redirect(let location):
            let next: RemoteURL
            do {
                next = try resolve(url, location)
            } catch {
                return (.fail(error), .abort)
            }
            // A URL may come back once (a redirect to itself after setting a cookie); a third visit is a loop.
            let visited = chain.isEmpty ? [url] : chain
            if visited.count(where: { $0 == next }) >= 2 {
                let loop = (visited + [next]).map(\.redacted).joined(separator: " -> ")
                return (.fail(DownloadError(.tooManyRedirects, "the server redirects in a loop: \(loop)")), .abort)
            }
            guard redirects < maxRedirects else {
                let message = "too many redirects (more than \(maxRedirects)) starting at \(originalURL)"
                return (.fail(DownloadError(.tooManyRedirects, message)), .abort)
            }
            return (.redirect(next), .discard)
        case .preconditionFailed:
            switch basis {
            case .completed:
                return (.fail(targetDiffers("the object on the server has changed since")), .discard)
            case .resuming:
                return (
                    .restart("the object changed on the server since the partial download (412 Precondition Failed)"),
                    .discard
                )
            case .fresh:
                return (.fail(.httpStatus(412, url: url.redacted)), .discard)
            }
        case .unsatisfiable(let total, let etag):
            return (nothingAt(requested, total: total, etag: etag, lastModified: head.lastModified), .discard)
        case .partial(let found, let range):
            switch basis {
            case .completed(let record):
                // The last byte, asked for to confirm the file (one byte: read and dropped).
                if found.size == record.size, record.identity.compare(found.identity) == .same {
                    return (.alreadyComplete, .discard)
                }
                if found.size != record.size {
                    let sizes = "the object on the server now has \(Wording.bytes(found.size ?? 0)), not \(record.size)"
                    return (.fail(targetDiffers(sizes)), .abort)
                }
                return (.fail(targetDiffers("differs from the object on the server")), .abort)
            case .resuming(let map):
                if case .changed(let what) = map.identity.compare(found.identity) {
                    return (.restart("the object changed on the server since the partial download: \(what)"), .abort)
                }
                if map.isComplete {
                    // Every byte is here; the last one was asked for to confirm the object.
                    return (.finishResumed(found), .discard)
                }
                return (.ranged(found, firstRange: range), .deliver)
            case .fresh:
                return (.ranged(found, firstRange: range), .deliver)
            }
        case .whole(let found):
            if Self.looksLikeErrorPage(head, url: url) {
                let message =
                    "the server answered a range request with an HTML page (200 \(head.contentType ?? "text/html")) "
                    + "instead of \(url.lastPathComponent), likely an error or 'busy' page (\(url))"
                return (.fail(.invalidResponse(message, httpStatus: 200)), .abort)
            }
            switch basis {
            case .completed(let record):
                // A 200 may not say its size (chunked); without it, nothing is confirmed.
                if found.size == record.size, record.identity.compare(found.identity) == .same {
                    return (.alreadyComplete, .abort)
                }
                return (.fail(targetDiffers("differs from the object on the server")), .abort)
            case .resuming:
                return (.stream(found, discardsPartial: true), .deliver)
            case .fresh:
                return (.stream(found, discardsPartial: false), .deliver)
            }
        }
    }

    /// A `416`: the object has `total` bytes and none at the requested offset. Without a total
    /// (no `Content-Range`), a range from byte 0 shows the object is empty (RFC 9110 §14.1.1:
    /// only an empty representation has no byte 0); a range from further on only that it is
    /// shorter than that.
    private func nothingAt(_ requested: RequestedRange, total: Int64?, etag: String?, lastModified: String?) -> Step {
        guard let total = total ?? (requested.lowerBound == 0 ? 0 : nil) else {
            // The byte after the end of a file that is complete here: the last byte's 206 says
            // whether the server's object still has that size.
            if requested == .from(expectedEnd ?? -1) {
                return .confirm(.bounded(ByteRange(requested.lowerBound - 1, requested.lowerBound)))
            }
            let shorter = "the object on the server has fewer than \(Wording.bytes(requested.lowerBound + 1))"
            switch basis {
            case .completed(let record): return .fail(targetDiffers("\(shorter), not \(record.size)"))
            case .resuming(let map): return .restart("\(shorter); the partial download expected \(map.size)")
            case .fresh:
                let message =
                    "the server answered 416 to \(requested.headerValue) without saying the object's size "
                    + "(\(url))"
                return .fail(.invalidResponse(message, httpStatus: 416))
            }
        }
        let observed = ObjectIdentity(size: total, etag: etag, lastModified: lastModified)
        switch basis {
        case .completed(let record):
            if record.identity.compare(observed, observedIn: .unsatisfiedRange) == .same { return .alreadyComplete }
            return .fail(targetDiffers("differs from the object on the server (\(Wording.bytes(total)))"))
        case .resuming(let map):
            switch map.identity.compare(observed, observedIn: .unsatisfiedRange) {
            case .same where map.isComplete:
                let identity = map.identity
                return .finishResumed(
                    RemoteObject(
                        url: url, size: map.size, etag: identity.etag, lastModified: identity.lastModified,
                        acceptsRanges: true))
            case .changed(let what):
                return .restart("the object changed on the server since the partial download: \(what)")
            default:
                return .restart(
                    "the object on the server has \(Wording.bytes(total)), the partial download expected \(map.size)")
            }
        case .fresh:
            if requested.lowerBound == 0 && total == 0 {
                return .empty(RemoteObject(url: url, size: 0, etag: etag, lastModified: nil, acceptsRanges: true))
            }
            return .fail(
                .invalidResponse(
                    "the server answered 416 to \(requested.headerValue) for an object of \(Wording.bytes(total)) "
                        + "(\(url))",
                    httpStatus: 416))
        }
    }

    /// The size of an object every byte of which is here (a completed file, a complete partial
    /// download), whose end the probe asks about.
    private var expectedEnd: Int64? {
        switch basis {
        case .completed(let record): record.size
        case .resuming(let map): map.isComplete ? map.size : nil
        case .fresh: nil
        }
    }

    private func targetDiffers(_ why: String) -> DownloadError {
        DownloadError(.targetExists, "\(basis.path ?? "the target") already exists and \(why)", remedy: .replaceTarget)
    }

    /// A 200 `text/html` answer to a range request for a file whose name says it is something
    /// else (`.iso`, `.bin`, `.tar.gz`): an error or "server busy" page, not the file.
    package static func looksLikeErrorPage(_ head: ResponseHead, url: RemoteURL) -> Bool {
        guard head.status == 200, head.contentType?.lowercased().hasPrefix("text/html") == true else { return false }
        let name = url.lastPathComponent.lowercased()
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        let pageExtensions: Set<String> = ["html", "htm", "xhtml", "shtml", "php", "asp", "aspx", "jsp", "cgi", "pl"]
        return !pageExtensions.contains(String(name[name.index(after: dot)...]))
    }
}
