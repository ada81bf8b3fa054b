/// What the disk holds of an object, as the probe needs it: which object (its size always
/// known), which of its ranges are missing, and where it is (for messages).
package struct LocalObject: Sendable, Equatable {
    package var identity: ObjectIdentity
    /// The ranges not on disk yet; none for a complete file.
    package var missingRanges: [ByteRange]
    /// The file's path, as the messages about it name it.
    package var path: String
    /// Bytes read from the file, to compare a confirming response with (a complete file's first
    /// and last few KiB).
    package var samples: [HeldBytes] = []

    package init(identity: ObjectIdentity, missingRanges: [ByteRange] = [], path: String, samples: [HeldBytes] = []) {
        precondition(identity.size != nil, "a local object's size is known")
        self.identity = identity
        self.missingRanges = missingRanges
        self.path = path
        self.samples = samples
    }

    /// The held bytes at `range`, if a sample covers it.
    package func held(_ range: ByteRange) -> [UInt8]? {
        if range.isEmpty { return [] }
        guard let sample = samples.first(where: { $0.range.clamped(to: range) == range }) else { return nil }
        let from = Int(range.lowerBound - sample.range.lowerBound)
        return Array(sample.bytes[from..<(from + Int(range.count))])
    }

    package var size: Int64 { identity.size ?? 0 }
    package var isComplete: Bool { missingRanges.isEmpty }
}

/// Bytes of a local file at `range`.
package struct HeldBytes: Sendable, Equatable {
    package var range: ByteRange
    package var bytes: [UInt8]

    package init(range: ByteRange, bytes: [UInt8]) {
        precondition(range.count == Int64(bytes.count), "held bytes and their range differ in length")
        self.range = range
        self.bytes = bytes
    }
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
    /// Whether answers under other validators than those held are a change or a pool's other
    /// node (``ValidatorWatch``): each head decided is the answer to the request sent last.
    package private(set) var watch = ValidatorWatch()

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
        /// The server answered under other validators than those held (`why`), or refused them with
        /// `412`: a change, or a pool's other node. Ask again, on a new connection
        /// (``ValidatorWatch`` decides after a few such answers).
        case askAgain(String)
        /// The object is empty.
        case empty(RemoteObject)
        /// The server serves ranges: plan the object; this response carries `first` (its own
        /// bytes, and the overlap with bytes held around them).
        case ranged(RemoteObject, first: RangeRequest)
        /// The server ignores ranges: this response is the whole download. `discardsPartial`: a
        /// partial download existed and cannot be continued.
        case stream(RemoteObject, discardsPartial: Bool)
        /// What the disk holds is not this object's, or not its current version (a finished file
        /// whose object changed): fetch the object anew (a finished file is replaced once the new
        /// one is whole), or fail when changes are not to be followed.
        case restart(String)
        /// This response's bytes at `range` (`found`'s) are to be compared with the bytes held
        /// there (``LocalObject/samples``): ``confirmed(_:at:found:)`` decides once they arrived.
        case compareHeld(RemoteObject, range: ByteRange)
        /// Ask again without a `Range` header: a `416` to byte 0 (an empty object, or a server
        /// that refuses ranges of small objects) or to a range of a file held whole.
        case withoutRange
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

    /// The overlap window: bytes compared with those held (``AgreementLedger``).
    package static let window = AgreementLedger.defaultWindow

    /// How many bytes of a held file confirm it: from its middle, where padded formats (tar,
    /// disk images) still hold data and their ends are often zeros. 1 KiB tells two versions
    /// apart unless a change leaves it as it was (the README says what cannot be known).
    package static let confirmationWindow: Int64 = 1024

    /// The bytes a rerun asks for to confirm a held file of `size` bytes: a `206` for them also
    /// says the object's size.
    package static func confirmationRange(size: Int64) -> ByteRange {
        let count = min(size, confirmationWindow)
        let start = max(0, size / 2 - count / 2)
        return ByteRange(start, start + count)
    }

    /// The bytes held that a confirmation compares, for a file of `size` bytes: its first bytes
    /// (what a `200` starts with) and ``confirmationRange(size:)``.
    package static func confirmationSamples(size: Int64) -> [ByteRange] {
        [ByteRange(0, min(size, confirmationWindow)), confirmationRange(size: size)]
    }

    /// The probe's request to confirm a held file of `size` bytes.
    private static func confirming(size: Int64) -> RequestedRange {
        size == 0 ? .from(0) : .bounded(confirmationRange(size: size))
    }

    /// The probe's range and precondition for `basis`.
    ///
    /// A completed file (or a partial download that holds every byte) asks for 1 KiB from its
    /// middle, which must match the bytes held (``Step/compareHeld(_:range:)``); a partial download asks
    /// for its first missing bytes with a few KiB of the held bytes on each side that touches
    /// them (``RangeRequest``, compared by the store); a new one for its first `probeSize`
    /// bytes. Known validators go in the precondition.
    package static func request(
        for basis: ProbeBasis, probeSize: Int64
    ) -> (range: RequestedRange, precondition: (name: String, value: String)?) {
        switch basis {
        case .fresh:
            return (.bounded(ByteRange(0, probeSize)), nil)
        case .completed(let record):
            return (confirming(size: record.size), record.identity.precondition)
        case .resuming(let map):
            guard let first = firstRequest(for: map, probeSize: probeSize) else {
                return (confirming(size: map.size), map.identity.precondition)
            }
            return (.bounded(first.sent), map.identity.precondition)
        }
    }

    /// A partial download's first request: its first missing bytes (at most `probeSize`), with a
    /// lead into the held bytes before them and a trail into those after, where there are such.
    package static func firstRequest(for map: LocalObject, probeSize: Int64) -> RangeRequest? {
        guard let first = map.missingRanges.first else { return nil }
        let own = ByteRange(first.lowerBound, min(first.upperBound, first.lowerBound + probeSize))
        return RangeRequest.overlapping(
            own, size: map.size, window: window, heldAfter: own.upperBound == first.upperBound, response: -1)
    }

    /// The request ``firstRequest(for:probeSize:)`` planned, as read back from what it sent.
    private static func firstRequest(for map: LocalObject, sent: RequestedRange) -> RangeRequest? {
        guard let first = map.missingRanges.first, case .bounded(let range) = sent,
            range.lowerBound <= first.lowerBound, range.upperBound > first.lowerBound
        else { return nil }
        let ownEnd = min(range.upperBound, first.upperBound)
        return RangeRequest(
            own: ByteRange(first.lowerBound, ownEnd), lead: first.lowerBound - range.lowerBound,
            trail: range.upperBound - ownEnd)
    }

    /// What a ``Step/compareHeld(_:range:)`` ends with: `bytes`, which arrived for `range`, against
    /// the bytes held there. Equal, the file is `found`; otherwise another object.
    package func confirmed(_ bytes: [UInt8], at range: ByteRange, found: RemoteObject) -> Step {
        let local: LocalObject
        switch basis {
        case .completed(let record): local = record
        case .resuming(let map): local = map
        case .fresh: return .fail(.invalidResponse("internal: nothing held to compare with"))
        }
        let matches = Int64(bytes.count) == range.count && local.held(range) == bytes
        switch basis {
        case .completed:
            return matches ? .alreadyComplete : changedSinceHeld("bytes \(range) differ, under the same validators")
        case .resuming:
            return matches ? .finishResumed(found) : changedSinceHeld("bytes \(range) differ")
        case .fresh:
            return .fail(.invalidResponse("internal: nothing held to compare with"))
        }
    }

    /// The object changed since what the disk holds was fetched (`why`): fetch it anew.
    private func changedSinceHeld(_ why: String) -> Step {
        switch basis {
        case .completed(let record):
            .restart("the object changed on the server since \(record.path) was downloaded: \(why)")
        case .resuming:
            .restart("the object changed on the server since the partial download: \(why)")
        case .fresh:
            .fail(.invalidResponse("internal: nothing held to compare with"))
        }
    }

    /// The head answered the last request under other validators than those held, or refused
    /// them (`why`): asked again on a new connection until the watch tells a pool from a change.
    private mutating func otherValidators(_ why: String, request: Int) -> Step {
        switch watch.otherAnswer(to: request) {
        case .askAgain:
            return .askAgain(why)
        case .changed(let answers):
            return changedSinceHeld(
                "\(why), and \(answers) answers in a row, on new connections, did not carry the validators held")
        }
    }

    /// How `found`'s validators differ from those held (`nil`: they do not, or nothing is held,
    /// or the head carries none to compare, where the bytes held decide): a head under others is
    /// not used, whatever its bytes (``ValidatorWatch``). Sizes are compared before.
    private func otherThanHeld(_ found: RemoteObject) -> String? {
        guard var held = basis.identity else { return nil }
        held.size = nil
        switch held.compare(found.identity) {
        case .same, .validatorMissing: return nil
        case .changed(let what): return what
        }
    }

    /// Decides what the response head to a probe of `requested` means (the answer to the request
    /// sent last).
    package mutating func decide(_ head: ResponseHead, requested: RequestedRange) -> (step: Step, body: BodyDisposition)
    {
        let decided = decideAnySize(head, requested: requested, answering: watch.willSend())
        guard let expected = expectedSize, let size = objectSize(decided.step), size != expected else { return decided }
        let error = DownloadError(
            .sizeMismatch, "\(url.redacted) is \(Wording.bytes(size)), not the \(expected) expected",
            remedy: .correctExpectedSize)
        return (.fail(error), .abort)
    }

    /// The object's size a step goes on with, if it names one.
    private func objectSize(_ step: Step) -> Int64? {
        switch step {
        case .ranged(let found, _), .stream(let found, _), .finishResumed(let found), .compareHeld(let found, _):
            found.size
        case .empty: 0
        case .alreadyComplete: if case .completed(let record) = basis { record.size } else { nil }
        case .redirect, .restart, .fail, .withoutRange, .askAgain: nil
        }
    }

    private mutating func decideAnySize(
        _ head: ResponseHead, requested: RequestedRange, answering request: Int
    ) -> (step: Step, body: BodyDisposition) {
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
            case .completed(let held), .resuming(let held):
                // The validators held are gone (a change), or this was a pool's other node.
                let why = "the server refused \(held.identity.precondition?.name ?? "the precondition") (412)"
                return (otherValidators(why, request: request), .discard)
            case .fresh:
                return (.fail(.httpStatus(412, url: url.redacted)), .discard)
            }
        case .unsatisfiable(let total, let etag):
            return (nothingAt(requested, total: total, etag: etag, lastModified: head.lastModified), .discard)
        case .partial(let found, let range):
            if let held = basis.identity?.size, held != found.size {
                let sizes = "its size \(held) became \(Wording.bytes(found.size ?? 0))"
                return (changedSinceHeld(sizes), .abort)
            }
            if let other = otherThanHeld(found) { return (otherValidators(other, request: request), .abort) }
            watch.pinnedAnswer(to: request)
            switch basis {
            case .completed:
                // 1 KiB from its middle, under the validators held, compared with the file's too
                // (a server may keep its validators over a change: the bytes held are the reference).
                return (.compareHeld(found, range: range), .deliver)
            case .resuming(let map):
                if map.isComplete { return (.compareHeld(found, range: range), .deliver) }
                // Under the validators held: the overlap with the bytes held is compared too
                // (the store compares it before the new bytes count).
                guard let planned = Self.firstRequest(for: map, sent: requested),
                    let first = planned.truncated(to: range)
                else {
                    let useless = "the server sent bytes \(range) of no use to resume (\(url))"
                    return (.fail(.invalidResponse(useless)), .abort)
                }
                return (.ranged(found, first: first), .deliver)
            case .fresh:
                return (.ranged(found, first: RangeRequest(own: range)), .deliver)
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
                // The whole object follows: its validators, size and first few KiB decide (a 200
                // may not say its size, chunked; without it, nothing is confirmed).
                guard found.size == record.size else {
                    return (changedSinceHeld("its size is not \(Wording.bytes(record.size)) now"), .abort)
                }
                if let other = otherThanHeld(found) { return (otherValidators(other, request: request), .abort) }
                watch.pinnedAnswer(to: request)
                return (.compareHeld(found, range: ByteRange(0, min(record.size, Self.confirmationWindow))), .deliver)
            case .resuming:
                return (.stream(found, discardsPartial: true), .deliver)
            case .fresh:
                return (.stream(found, discardsPartial: false), .deliver)
            }
        }
    }

    /// A `416`: nothing at the requested offset, and the object has `total` bytes when the
    /// server says (Apache httpd and lighttpd do not). An explicit `*/0` to a range from byte 0
    /// is an empty object; any other `416` to byte 0, or to the last few KiB of a size the server
    /// confirms, is asked again without `Range` (some servers refuse every range of a small
    /// object, RFC 9110 §14.1.1 notwithstanding), so it costs one request, not retries. A size
    /// other than the one held is another object.
    private func nothingAt(_ requested: RequestedRange, total: Int64?, etag: String?, lastModified: String?) -> Step {
        switch basis {
        case .fresh:
            if requested.lowerBound == 0 && total == 0 {
                return .empty(RemoteObject(url: url, size: 0, etag: etag, lastModified: nil, acceptsRanges: true))
            }
            if requested.lowerBound == 0 { return .withoutRange }
            return .fail(
                .invalidResponse(
                    "the server answered 416 to \(requested.headerValue) for an object of "
                        + "\(total.map(Wording.bytes) ?? "unknown size") (\(url))",
                    httpStatus: 416))
        case .completed(let record):
            if let total, total != record.size {
                return changedSinceHeld("its size \(record.size) became \(Wording.bytes(total))")
            }
            return .withoutRange
        case .resuming(let map):
            if let total, total != map.size {
                return .restart(
                    "the object on the server has \(Wording.bytes(total)), the partial download expected \(map.size)")
            }
            return .withoutRange
        }
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
