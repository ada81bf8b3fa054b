import Dispatch
import Logging
import SwoopCore
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One digest a download is checked against, and where the expected value came from.
package struct DigestCheck: Sendable {
    package var expected: Checksum
    package var source: VerifiedDigest.Source
    /// The header it came from, to show values as the server writes them.
    package var published: PublishedDigest?

    /// `digest` as the source writes it: a header's notation, or `ALGORITHM=HEX`.
    package func shown(_ digest: Checksum) -> String {
        published?.written(digest) ?? digest.description
    }

    /// The failure when the bytes give `computed`.
    package func mismatch(
        _ computed: Checksum, target: String,
        consequence: String = "nothing was kept at the target and the partial download was deleted"
    ) -> DownloadError {
        let what =
            switch source {
            case .expectedChecksum: "the expected checksum"
            case .server(let header): "the server's \(header) header"
            }
        return DownloadError(
            .checksumMismatch,
            "checksum mismatch for \(target): \(what) says \(shown(expected)), the downloaded bytes give "
                + "\(shown(computed)); \(consequence)"
        )
    }
}

extension DigestCheck {
    /// What a download is checked against: `expected` (the caller's), and the whole-object
    /// digest the server published that ``PublishedDigests/preference`` puts first, when
    /// `verifyingPublished`. Says at `info` level what else was seen and why it is not used.
    package static func checks(
        expected: Checksum?, published: PublishedDigests, verifyingPublished: Bool, logger: Logger
    ) -> [DigestCheck] {
        var checks: [DigestCheck] = []
        if let expected { checks.append(DigestCheck(expected: expected, source: .expectedChecksum, published: nil)) }
        for note in published.unusable { logger.info("server digest \(note)") }
        guard let chosen = published.preferred else { return checks }
        guard verifyingPublished else {
            logger.info("not verifying \(chosen) (verification of published digests is off)")
            return checks
        }
        logger.info("verifying the server's digest \(chosen)")
        for other in published.object where other != chosen {
            logger.debug("also published, not checked: \(other)")
        }
        checks.append(DigestCheck(expected: chosen.checksum, source: .server(header: chosen.header), published: chosen))
        return checks
    }
}

/// Computes a download's digests while it runs, off the transfer thread: the file is never read
/// a second time.
///
/// The store hands over the stretches of the object that completed, every few MiB or each
/// progress tick (``add(_:)``; see ``DownloadStore/verify(with:)``), and the rest at the end,
/// which is checked while the part file is flushed to disk. CRCs are computed per stretch, in any
/// order, and combined (``CRCRuns``, kept in the segment map); the hashes (SHA-2, MD5) need the
/// bytes in order and follow the complete prefix of the file. Both
/// read the stretches back from the part file, from the page cache, on the verifier's own queue.
/// ``finish(size:inMemory:then:)`` checks whatever is left and compares.
package final class ObjectVerifier: @unchecked Sendable {
    package let checks: [DigestCheck]
    /// A digest follows the file in order (a hash, not a CRC): the transfer then fetches the
    /// lowest work first, so the complete prefix grows steadily and little is left at the end.
    package let hashesInOrder: Bool
    private let path: String
    private let target: String
    private let work: DiskQueue
    /// The CRC runs so far, for checkpoints (read on the transfer thread).
    private let snapshot: Mutex<CRCRuns?>
    private let cancelled = Atomic<Bool>(false)

    // The queue's own state.
    private var crc: CRCRuns?
    private var ordered: [DigestHasher]
    /// Bytes below this offset went through the ordered hashers.
    private var prefix: Int64 = 0
    /// Complete stretches beyond the prefix, in order, disjoint.
    private var ahead: [ByteRange] = []
    private var descriptor: FileDescriptor?
    private var failure: DownloadError?
    /// Where read-back bytes land: one buffer for the verifier's life, made at the first read (a
    /// fresh 1 MiB for every read was a fresh mapping each time, its page faults a real cost).
    private var readBuffer: UnsafeMutableRawBufferPointer?

    /// `resumed`: CRC runs a segment map kept, already limited to its complete chunks.
    package init(checks: [DigestCheck], path: String, target: String, loop: any LoopExecutor, resumed: CRCRuns?) {
        self.checks = checks
        self.path = path
        self.target = target
        work = DiskQueue(queue: DispatchQueue(label: "swoop.verify"), loop: loop)
        let crcAlgorithm = checks.lazy.map(\.expected.algorithm).first { $0.isCRC }
        if let crcAlgorithm {
            crc = resumed?.algorithm == crcAlgorithm ? resumed : CRCRuns(algorithm: crcAlgorithm)
        }
        // Everything else goes in order (a second CRC too: one set of runs is kept).
        var seen: Set<Checksum.Algorithm> = crcAlgorithm.map { [$0] } ?? []
        ordered = checks.compactMap { check in
            let algorithm = check.expected.algorithm
            guard seen.insert(algorithm).inserted else { return nil }
            return DigestHasher(algorithm)
        }
        snapshot = Mutex(crc)
        hashesInOrder = !ordered.isEmpty
    }

    /// The CRC runs checked so far, for the segment map (`nil`: no CRC is checked).
    package var crcRuns: CRCRuns? { snapshot.withLock { $0 } }

    /// Stretches of the object that are complete (transfer thread). They are read and hashed
    /// on the verifier's queue, once the writes before `writes` are in the file.
    package func add(_ ranges: [ByteRange], after writes: WriteFence? = nil) {
        guard !ranges.isEmpty else { return }
        work.run { [self] in
            writes?.wait()
            for range in ranges { absorb(range) }
            advancePrefix(to: nil)
            let runs = crc
            snapshot.withLock { $0 = runs }
        }
    }

    /// Stops reading: the download is over or starts again. Pending work ends early.
    package func cancel() {
        cancelled.store(true, ordering: .relaxed)
        work.run { [self] in closeDescriptor() }
    }

    /// Checks the rest (everything no stretch covered, as after a resume), compares, and calls
    /// `then` on the transfer thread with the digests verified or the mismatch. `inMemory`: the
    /// object's bytes, for one small enough to be held (nothing is read from disk then). `writes`: as
    /// in ``add(_:after:)``.
    package func finish(
        size: Int64, inMemory: [UInt8]?, after writes: WriteFence?,
        then: @escaping (Result<[VerifiedDigest], DownloadError>) -> Void
    ) {
        if let inMemory {
            then(
                compare(
                    checks.map { check in
                        var hasher = DigestHasher(check.expected.algorithm)
                        hasher.update(inMemory)
                        return hasher.finalize()
                    }))
            return
        }
        work.run(
            { [self] () -> Result<[VerifiedDigest], DownloadError> in
                defer { closeDescriptor() }
                if let failure = writes?.waitForWrites() { return .failure(failure) }
                absorb(ByteRange(0, size))
                advancePrefix(to: size)
                if let failure { return .failure(failure) }
                var computed: [Checksum] = []
                for check in checks {
                    if let crc, crc.algorithm == check.expected.algorithm {
                        guard let value = crc.whole(size: size) else {
                            return .failure(
                                DownloadError(
                                    .localIO, "internal: the CRC of \(path) does not cover its \(Wording.bytes(size))")
                            )
                        }
                        computed.append(Checksum(algorithm: crc.algorithm, crc: value))
                    } else if let hasher = ordered.first(where: { $0.algorithm == check.expected.algorithm }) {
                        computed.append(hasher.finalize())
                    }
                }
                return compare(computed)
            }, then: then)
    }

    private func compare(_ computed: [Checksum]) -> Result<[VerifiedDigest], DownloadError> {
        for (check, digest) in zip(checks, computed) where digest != check.expected {
            return .failure(check.mismatch(digest, target: target))
        }
        return .success(checks.map { VerifiedDigest(source: $0.source, checksum: $0.expected) })
    }

    // MARK: On the queue

    /// Takes one complete stretch: CRCs for the parts not yet checked, the ordered hashers too
    /// when it continues the prefix (one read for both), else it waits in `ahead`.
    private func absorb(_ range: ByteRange) {
        let feedsPrefix = !ordered.isEmpty && range.lowerBound <= prefix && range.upperBound > prefix
        if var runs = crc {
            for gap in runs.gaps(in: range) {
                var value: UInt64 = 0
                let crcOfGap = runs.algorithm.crc!
                let continues = feedsPrefix && gap.lowerBound == prefix
                read(gap) { bytes in
                    value = crcOfGap.update(value, bytes)
                    if continues { for index in ordered.indices { ordered[index].update(bytes) } }
                }
                guard failure == nil else { return }
                runs.insert(gap, crc: value)
                if continues { prefix = gap.upperBound }
            }
            crc = runs
        }
        guard !ordered.isEmpty, range.upperBound > prefix else { return }
        let rest = ByteRange(max(range.lowerBound, prefix), range.upperBound)
        let index = ahead.firstIndex { $0.lowerBound > rest.lowerBound } ?? ahead.endIndex
        ahead.insert(rest, at: index)
    }

    /// Feeds the ordered hashers every byte that is now contiguous from the prefix (to `size`
    /// at the end, whatever was recorded).
    private func advancePrefix(to size: Int64?) {
        guard !ordered.isEmpty else { return }
        while failure == nil {
            var end = prefix
            ahead.removeAll { range in
                guard range.lowerBound <= end else { return false }
                end = max(end, range.upperBound)
                return true
            }
            if let size { end = size }
            guard end > prefix else { return }
            read(ByteRange(prefix, end)) { bytes in
                for index in ordered.indices { ordered[index].update(bytes) }
            }
            prefix = end
            if size != nil { return }
        }
    }

    /// Reads `range` of the part file in pieces of at most 1 MiB.
    private func read(_ range: ByteRange, _ body: (UnsafeRawBufferPointer) -> Void) {
        guard failure == nil, !range.isEmpty else { return }
        if cancelled.load(ordering: .relaxed) {
            failure = DownloadError(.cancelled, "the download stopped")
            return
        }
        let descriptor: FileDescriptor
        if let open = self.descriptor {
            descriptor = open
        } else {
            do {
                descriptor = try FileDescriptor.open(path, .readOnly, options: .closeOnExec)
            } catch {
                failure = .localIO("cannot read back", path: path, errno: (error as? Errno)?.rawValue ?? EIO)
                return
            }
            self.descriptor = descriptor
        }
        let buffer = readBuffer ?? UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        readBuffer = buffer
        switch descriptor.readPieces(range, into: buffer, while: { !self.cancelled.load(ordering: .relaxed) }, body) {
        case .done:
            break
        case .stopped:
            failure = DownloadError(.cancelled, "the download stopped")
        case .failed(let error):
            failure = .localIO("cannot read back", path: path, errno: error.rawValue)
        case .endsAt(let offset):
            failure = DownloadError(
                .localIO, "cannot read back \(path): it ends after \(Wording.bytes(offset)), before \(range.upperBound)"
            )
        }
    }

    deinit {
        readBuffer?.deallocate()
    }

    private func closeDescriptor() {
        try? descriptor?.close()
        descriptor = nil
    }
}

extension ObjectVerifier {
    /// A verifier of `checks` (``DigestCheck/checks(expected:published:verifyingPublished:logger:)``)
    /// for `found`. It follows `store`'s completed chunks (an object small
    /// enough to be held in memory is checked there at the end instead); a resumed `map`'s CRC runs
    /// are kept, and its complete bytes are checked now, while the rest arrives.
    package static func start(
        _ checks: [DigestCheck], for found: RemoteObject, paths: DownloadPaths, store: DownloadStore?,
        resumed map: SegmentMap?,
        loop: any LoopExecutor
    ) -> ObjectVerifier {
        let runs = map.flatMap { map in map.crcRuns?.keeping(complete: map.chunks, layout: map.layout) }
        let verifier = ObjectVerifier(checks: checks, path: paths.part, target: paths.target, loop: loop, resumed: runs)
        guard let store, (found.size ?? .max) > PartFileSink.holdLimit || map != nil else { return verifier }
        store.verify(with: verifier)
        if let map { verifier.add(map.completeRanges) }
        return verifier
    }
}
