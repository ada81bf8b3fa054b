import Dispatch
import Logging
import SwoopStore
import SwoopCurl
import SystemPackage

/// The last step of a shared download: one task at a time (the part file's finishing lock) looks
/// at every share's map; the one that finds them all complete checks the seams and the digests
/// and publishes the object.
extension Downloader {
    func finishIfLast(
        _ request: DownloadRequest, paths: DownloadPaths, pin: SegmentMap, configuration: Configuration,
        into result: inout ShareResult
    ) async throws(DownloadError) {
        // Waiting for the lock, reading the maps: off the cooperative pool.
        let looked = await Self.offPool { () throws(DownloadError) -> (FinishingLock?, [SharedObject.ShareState]) in
            guard let descriptor = try SharedObject.lockForFinishing(paths) else { return (nil, []) }
            return (FinishingLock(descriptor), SharedObject.shares(of: paths, pin: pin))
        }
        let (lock, shares) = try looked.get()
        guard let lock else {
            // No part file: another task published the object meanwhile, or (a share without
            // stripes) none has written a byte yet.
            let published = (try? fileInfo(paths.target)) != nil
            result.sharesComplete =
                published ? result.share.count : SharedObject.shares(of: paths, pin: pin).filter(\.isComplete).count
            return
        }
        result.sharesComplete = shares.filter(\.isComplete).count
        guard result.sharesComplete == shares.count else {
            lock.close()
            if let unusable = shares.compactMap({ if case .unusable(let why) = $0 { why } else { nil } }).first {
                throw DownloadError(
                    .localIO, "the object's shares cannot be finished: \(unusable)", remedy: .restartShares)
            }
            return
        }
        let object: RemoteObject?
        do throws(DownloadError) {
            let checked = try await checkSeams(
                request, pin: pin, count: result.share.count, configuration: configuration, part: lock)
            object = checked.object
            result.seamsChecked = checked.seams
        } catch {
            if error.kind == .objectChanged { Self.discardAll(paths, lock: lock) } else { lock.close() }
            throw error
        }
        let checks = DigestCheck.checks(
            expected: request.expectedChecksum, published: object?.digests ?? PublishedDigests(),
            verifyingPublished: configuration.verifiesPublishedDigests, logger: logger)
        let published = await Self.offPool { () throws(DownloadError) -> (verified: [VerifiedDigest], combined: Int) in
            var verified: [VerifiedDigest] = []
            do throws(DownloadError) {
                // A CRC every share recorded for its stripes is combined; the rest read the file once.
                var reading: [DigestCheck] = []
                for check in checks {
                    let algorithm = check.expected.algorithm
                    guard let crc = SharedObject.combinedCRC(of: paths, pin: pin, algorithm: algorithm) else {
                        reading.append(check)
                        continue
                    }
                    let computed = Checksum(algorithm: algorithm, crc: crc)
                    guard computed == check.expected else {
                        throw check.mismatch(
                            computed, target: paths.target,
                            consequence: "nothing was kept at the target and every share's download was deleted")
                    }
                    verified.append(VerifiedDigest(source: check.source, checksum: computed))
                }
                let combined = verified.count
                verified += try SharedObject.verify(
                    lock.descriptor, size: pin.objectSize, checks: reading, target: paths.target)
                try SharedObject.publish(
                    lock.take(), paths: paths, pin: pin, overwrite: configuration.files.overwritesExistingFile)
                return (verified, combined)
            } catch {
                if error.kind == .checksumMismatch { Self.discardAll(paths, lock: lock) } else { lock.close() }
                throw error
            }
        }
        (result.verified, result.digestsFromShares) = try published.get()
        result.finishedObject = true
        logger.info("every share is complete: published", metadata: ["path": "\(paths.target)"])
    }

    /// Fetches the bytes around every seam again and compares them with the part file: a
    /// difference means two shares hold two versions, and nothing is published.
    private func checkSeams(
        _ request: DownloadRequest, pin: SegmentMap, count: Int, configuration: Configuration, part: FinishingLock
    ) async throws(DownloadError) -> (object: RemoteObject?, seams: Int) {
        let windows = SeamCheck.windows(of: pin.layout, count: count)
        guard !windows.isEmpty else {
            // No seams (one share, or one stripe): one head-only probe still says what the server
            // publishes and that it serves the version pinned.
            let found = try await lookUpRefreshing(request, configuration: configuration).object
            if let found, case .changed(let what) = pin.identity.compare(found.identity) {
                throw DownloadError(
                    .objectChanged, "the object changed on the server since its shares began: \(what)",
                    remedy: .restartShares)
            }
            return (found, 0)
        }
        let settings = ExchangeSettings(configuration)
        let (loop, logger) = (self.loop, self.logger)
        var address = request.url
        var outcome: SeamCheck.Outcome
        var refreshed = false
        repeat {
            let (url, service) = try remote(address, configuration: configuration)
            outcome = await loop.result(
                of: { completion in
                    SeamCheck(
                        url: url, headers: request.headers, service: service, pin: pin.identity, windows: windows,
                        settings: settings, loop: loop, logger: logger, completion: completion)
                }, shutDown: .failure(DownloadError(.cancelled, "the downloader was shut down")))
            // A URL that expired since the shares began (a presigned one): once more with a fresh one.
            guard case .failure(let error) = outcome, error.kind == .network, !refreshed,
                let fresh = try await request.freshURL(replacing: address, for: "the seams' check")
            else { break }
            refreshed = true
            address = fresh
        } while true
        let (samples, object) = try outcome.get()
        let differs = await Self.offPool { SharedObject.firstDifference(in: part.descriptor, samples: samples) }
        if let range = differs {
            throw DownloadError(
                .objectChanged,
                "the shares of \(request.url) hold two versions: bytes \(range), fetched again, differ from what the "
                    + "shares wrote, though the server's validators did not change; every share was discarded",
                remedy: .restartShares)
        }
        return (object, windows.count)
    }

    /// Deletes every share's state and the part file (under the finishing lock), so that the
    /// next run of the shares starts over: what they hold cannot become the object.
    private static func discardAll(_ paths: DownloadPaths, lock: FinishingLock) {
        SharedObject.discardShares(paths)
        removeFile(paths.part)
        paths.removeWorkingDirectoryIfEmpty()
        lock.close()
    }

    /// Runs blocking file work on a thread of its own rather than the cooperative pool.
    static func offPool<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async -> Result<T, DownloadError> {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { () throws(DownloadError) in try work() })
            }
        }
    }

    static func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }
}

/// The part file open under the finishing lock, until it is published or closed.
/// `@unchecked Sendable`: used by one task at a time, in order.
final class FinishingLock: @unchecked Sendable {
    let descriptor: FileDescriptor
    private var isOpen = true

    init(_ descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// Hands the descriptor to whoever closes it (the publisher).
    func take() -> FileDescriptor {
        isOpen = false
        return descriptor
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        try? descriptor.close()
    }

    deinit { close() }
}
