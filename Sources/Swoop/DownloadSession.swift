import Dispatch
import Logging
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One download, from probe to finalize, run on the transfer thread.
///
/// The session owns the plan (a ``SegmentScheduler``), the part file and the connection slots
/// (``SegmentWorker``). Exchanges report back through the workers; fsyncs and renames run on
/// the downloader's disk queue and hop back with ``TransferLoop/execute(_:)``.
final class DownloadSession {
    enum Phase { case starting, probing, transferring, finalizing, stopped }

    let loop: TransferLoop
    let diskQueue: DispatchQueue
    let configuration: Downloader.Configuration
    let request: DownloadRequest
    let originalURL: RemoteURL
    let paths: DownloadPaths
    let logger: Logger
    private let onProgress: (@Sendable (DownloadProgress) -> Void)?
    private var completion: ((Result<DownloadResult, DownloadError>) -> Void)?
    private var keepAlive: DownloadSession?

    private(set) var phase = Phase.starting
    private let transferOptions: TransferOptions

    // Probe state.
    private var probeURL: RemoteURL
    private var redirects = 0
    /// Once a redirect leaves the original origin, credentials stay behind for good.
    private var crossedOrigin = false
    private var probeTries = 0
    private var probeRetryTimer: LoopTimer?
    /// A completed target to confirm with the server.
    private var completedTarget: CompletedObject?
    /// The segment map of an earlier run, if it can be trusted.
    private var resumeMap: SegmentMap?
    private var restartedAfterChange = false

    // Plan, store and transfer state.
    private(set) var object: RemoteObject?
    private(set) var scheduler: SegmentScheduler?
    private(set) var part: PartFile?
    private var workers: [SegmentWorker] = []
    private var targetConnections: Int
    /// Adaptive mode: grows or shrinks `targetConnections` with measured throughput.
    private var controller: ConnectionController?
    /// Every 100 ms while transferring: connection rates, slow-connection replacement, adaptation.
    private var housekeepingTimer: LoopTimer?
    /// Position of a single stream (server without range support).
    private(set) var streamPosition: Int64 = 0
    private var isStreaming = false
    private var retryTimer: LoopTimer?

    // Checkpoints, and early write-back between them.
    private var writebackInFlight = false
    private var bytesAtLastWriteback: Int64 = 0
    /// Start write-back after this many new bytes (pages reach the disk during the download).
    private static let writebackStride: Int64 = 32 << 20
    private var checkpointInFlight = false
    private var checkpointedChunks: ChunkSet?
    private var lastCheckpoint = ContinuousClock.now

    // Accounting.
    private let startedAt = ContinuousClock.now
    private var progressTimer: LoopTimer?
    private var meter = ThroughputMeter()
    private(set) var bytesReceived: Int64 = 0
    private var bytesResumed: Int64 = 0
    private var requests = 0
    private var retries = 0
    private var peakConnections = 0

    init(
        loop: TransferLoop, diskQueue: DispatchQueue, configuration: Downloader.Configuration,
        request: DownloadRequest, url: RemoteURL, paths: DownloadPaths, logger: Logger,
        progress: (@Sendable (DownloadProgress) -> Void)?,
        completion: @escaping (Result<DownloadResult, DownloadError>) -> Void
    ) {
        self.loop = loop
        self.diskQueue = diskQueue
        self.configuration = configuration
        self.request = request
        self.originalURL = url
        self.probeURL = url
        self.paths = paths
        var logger = logger
        logger[metadataKey: "url"] = "\(url.redacted)"
        self.logger = logger
        self.onProgress = progress
        self.completion = completion
        self.transferOptions = TransferOptions(configuration)
        self.targetConnections = max(1, configuration.connections.initial)
    }

    // MARK: Start

    func start() {
        loop.assertOnLoopThread()
        keepAlive = self
        if configuration.discardsData {
            scheduleProgress()
            probe()
            return
        }
        do {
            try inspectTarget()
            if completedTarget == nil { try inspectPartialState() }
        } catch {
            stop(with: .failure(error))
            return
        }
        scheduleProgress()
        probe()
    }

    /// An existing target is an error unless overwriting is allowed or it is this very object,
    /// already downloaded (which the probe then confirms).
    private func inspectTarget() throws(DownloadError) {
        var info = CStat()
        let directory = FilePath(paths.target).removingLastComponent()
        if !directory.isEmpty, stat(directory.string, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR {
            // Before any network traffic: the file could not be written anyway.
            throw .localIO("cannot write into", path: directory.string, errno: stat(directory.string, &info) != 0 ? errno : ENOTDIR)
        }
        guard stat(paths.target, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFDIR {
            throw DownloadError(.localIO, "\(paths.target) is a directory; name a file with -o", errno: EISDIR)
        }
        if configuration.overwritesExistingFile { return }
        if let record = CompletedObject.read(from: paths.target), record.size == Int64(info.st_size) {
            completedTarget = record
            return
        }
        throw DownloadError(.targetExists, "\(paths.target) already exists; use --force to replace it or -o to choose another name")
    }

    /// Loads the segment map of an earlier run, or clears stale state that cannot be trusted.
    private func inspectPartialState() throws(DownloadError) {
        let partExists = access(paths.part, F_OK) == 0
        guard configuration.resumes else {
            if partExists { logger.info("starting over (--no-resume): discarding \(paths.part)") }
            discardPartialState()
            return
        }
        switch SegmentMapFile.read(at: paths.map) {
        case .failure(.missing):
            if partExists {
                warn("\(paths.part) has no segment map (\(paths.map)); starting over")
                discardPartialState()
            }
        case .failure(.io(let error)):
            throw error
        case .failure(.untrusted(let reason)):
            warn("ignoring \(paths.map): \(reason); starting over")
            discardPartialState()
        case .success(let map):
            var info = CStat()
            if stat(paths.part, &info) != 0 {
                warn("\(paths.part) is missing although \(paths.map) describes it; starting over")
                discardPartialState()
            } else if Int64(info.st_size) < map.objectSize {
                warn("\(paths.part) is shorter (\(info.st_size) bytes) than the segment map says (\(map.objectSize)); starting over")
                discardPartialState()
            } else if map.url != originalURL.redacted && map.strongETag == nil {
                warn("\(paths.map) is for \(map.url) and has no strong ETag to prove it is the same object; starting over")
                discardPartialState()
            } else {
                resumeMap = map
            }
        }
    }

    private func discardPartialState() {
        Self.discardFiles(paths)
    }

    /// Deletes a download's part file and segment map.
    static func discardFiles(_ paths: DownloadPaths) {
        unlink(paths.part)
        SegmentMapFile.remove(at: paths.map)
    }

    private func warn(_ message: String) {
        logger.warning("\(message)")
    }

    // MARK: Probe

    /// Headers for `url`: the caller's, unless a redirect left the original origin, in which case
    /// only those that carry no credentials.
    private func headerLines(for url: RemoteURL) -> [String] {
        var lines = ["Accept-Encoding: identity"]
        let stripCredentials = crossedOrigin || !url.isSameOrigin(as: originalURL)
        for (name, value) in request.headers {
            if stripCredentials && !DownloadRequest.headersSafeAcrossHosts.contains(name.lowercased()) { continue }
            lines.append("\(name): \(value)")
        }
        return lines
    }

    private var probeSize: Int64 { max(configuration.minimumSegmentSize, 1 << 20) }

    /// The first request: learns size and identity, and fetches the first bytes on the way.
    private func probe() {
        phase = .probing
        var lines = headerLines(for: probeURL)
        let range: RequestedRange
        if let record = completedTarget {
            range = .from(record.size)
            if let etag = record.etag, !etag.hasPrefix("W/") {
                lines.append("If-Match: \(etag)")
            } else if let modified = record.lastModified {
                lines.append("If-Unmodified-Since: \(modified)")
            }
        } else if let map = resumeMap {
            if let etag = map.strongETag {
                lines.append("If-Match: \(etag)")
            } else if let modified = map.lastModified {
                lines.append("If-Unmodified-Since: \(modified)")
            }
            if let first = map.missingRanges.first {
                range = .bounded(ByteRange(first.lowerBound, min(first.upperBound, first.lowerBound + probeSize)))
            } else {
                range = .from(map.objectSize)
            }
        } else {
            range = .bounded(ByteRange(0, probeSize))
        }
        let worker = workers.first ?? makeWorker()
        guard acquirePermit(for: worker, host: probeURL, retry: { $0.probe() }) else { return }
        worker.begin(.probe(range), ExchangeRequest(url: probeURL.absoluteString, headerLines: lines, range: range, options: transferOptions))
    }

    /// Takes a connection permit for `worker` from the downloader's shared budget; without one,
    /// arranges for `retry` to run (outside callbacks) when a permit frees up.
    private func acquirePermit(for worker: SegmentWorker, host url: RemoteURL, retry: @escaping (DownloadSession) -> Void) -> Bool {
        let key = "\(url.host):\(url.port)"
        if loop.budget.acquire(host: key) {
            worker.permitHost = key
            return true
        }
        loop.budget.wait(self) { [weak self, loop] in
            loop.afterCallbacks { [weak self] in
                guard let self, self.phase != .stopped else { return }
                retry(self)
            }
        }
        return false
    }

    private func makeWorker() -> SegmentWorker {
        let worker = SegmentWorker(session: self, id: workers.count)
        workers.append(worker)
        return worker
    }

    /// Counts a request as it is handed to curl.
    func willSend(_ worker: SegmentWorker) {
        requests += 1
        peakConnections = max(peakConnections, workers.count(where: \.isBusy))
    }

    /// Decides what to do with a probe's response head.
    func probeDidReceiveHead(_ worker: SegmentWorker, _ head: ResponseHead, requested: RequestedRange) -> BodyDisposition {
        let result: ResponseValidator.ProbeResult
        do {
            result = try ResponseValidator.probe(head, requested: requested, url: probeURL)
        } catch {
            worker.failure = error
            return .abort
        }
        switch result {
        case .redirect(let location):
            redirects += 1
            guard redirects <= configuration.redirect.maxRedirects else {
                worker.failure = .invalidResponse("too many redirects (more than \(configuration.redirect.maxRedirects)) starting at \(originalURL)")
                return .abort
            }
            do {
                let next = try probeURL.resolving(redirect: location)
                if !next.isSameOrigin(as: originalURL) { crossedOrigin = true }
                logger.debug("redirected", metadata: ["to": "\(next.redacted)", "status": "\(head.status)"])
                worker.next = .redirect(next)
                return .discard
            } catch {
                worker.failure = error
                return .abort
            }
        case .preconditionFailed:
            if completedTarget != nil {
                worker.failure = DownloadError(.targetExists, "\(paths.target) already exists and the object on the server has changed since; use --force to download it again")
            } else if resumeMap != nil {
                worker.next = .restart("the object changed on the server since the partial download (412 Precondition Failed)")
            } else {
                worker.failure = .httpStatus(412, url: probeURL.redacted)
            }
            return .discard
        case .unsatisfiable(let total, let etag):
            return probeFoundNothingAt(requested, total: total, etag: etag, worker: worker)
        case .partial(let found, let range):
            if let record = completedTarget {
                worker.failure = DownloadError(.targetExists, "\(paths.target) already exists but the object on the server now has \(found.size ?? 0) bytes, not \(record.size); use --force to download it again")
                return .abort
            }
            if let map = resumeMap, let reason = mismatch(map, found) {
                worker.next = .restart(reason)
                return .abort
            }
            do {
                try beginRanged(found, firstRange: range, worker: worker)
            } catch {
                worker.failure = error
                return .abort
            }
            return .deliver
        case .whole(let found):
            if Self.looksLikeErrorPage(head, url: probeURL) {
                worker.failure = .invalidResponse("the server answered a range request with an HTML page (200 \(head.contentType ?? "text/html")) instead of \(probeURL.lastPathComponent), likely an error or 'busy' page (\(probeURL))", httpStatus: 200)
                return .abort
            }
            if let record = completedTarget {
                if found.size == record.size && (record.etag == nil || record.etag == found.etag) {
                    worker.next = .alreadyComplete
                } else {
                    worker.failure = DownloadError(.targetExists, "\(paths.target) already exists and differs from the object on the server; use --force to download it again")
                }
                return .abort
            }
            if resumeMap != nil {
                warn("the server no longer answers range requests; starting over in a single stream")
                resumeMap = nil
                discardPartialState()
            }
            do {
                try beginStream(found, worker: worker)
            } catch {
                worker.failure = error
                return .abort
            }
            return .deliver
        }
    }

    /// A 200 `text/html` answer to a range request for a file whose name says it is something
    /// else (`.iso`, `.bin`, `.tar.gz`): an error or "server busy" page, not the file.
    static func looksLikeErrorPage(_ head: ResponseHead, url: RemoteURL) -> Bool {
        guard head.status == 200, head.contentType?.lowercased().hasPrefix("text/html") == true else { return false }
        let name = url.lastPathComponent.lowercased()
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        let pageExtensions: Set<String> = ["html", "htm", "xhtml", "shtml", "php", "asp", "aspx", "jsp", "cgi", "pl"]
        return !pageExtensions.contains(String(name[name.index(after: dot)...]))
    }

    /// A 416: the object has `total` bytes and none at the requested offset.
    private func probeFoundNothingAt(_ requested: RequestedRange, total: Int64, etag: String?, worker: SegmentWorker) -> BodyDisposition {
        if let record = completedTarget {
            if total == record.size && (etag == nil || record.etag == nil || etag == record.etag) {
                worker.next = .alreadyComplete
            } else {
                worker.failure = DownloadError(.targetExists, "\(paths.target) already exists and differs from the object on the server (\(total) bytes); use --force to download it again")
            }
            return .discard
        }
        if let map = resumeMap {
            if map.chunks.isComplete && total == map.objectSize && (etag == nil || map.etag == nil || etag == map.etag) {
                worker.next = .finishResumed
            } else {
                worker.next = .restart("the object on the server has \(total) bytes, the partial download expected \(map.objectSize)")
            }
            return .discard
        }
        if requested.lowerBound == 0 && total == 0 {
            worker.next = .empty(RemoteObject(url: probeURL, size: 0, etag: etag, lastModified: nil, acceptsRanges: true))
            return .discard
        }
        worker.failure = .invalidResponse("the server answered 416 to \(requested.headerValue) for an object of \(total) bytes (\(probeURL))", httpStatus: 416)
        return .discard
    }

    /// Why a resumed map does not describe `found`, or `nil` when it does.
    private func mismatch(_ map: SegmentMap, _ found: RemoteObject) -> String? {
        if found.size != map.objectSize {
            return "the object on the server has \(found.size ?? -1) bytes, the partial download expected \(map.objectSize)"
        }
        if let expected = map.strongETag, found.etag != expected {
            return "the object's ETag changed from \(expected) to \(found.etag ?? "none")"
        }
        if map.strongETag == nil, let modified = map.lastModified, let now = found.lastModified, modified != now {
            return "the object's Last-Modified changed from \(modified) to \(now)"
        }
        return nil
    }

    /// A probe step finished without bytes to keep (a redirect, a 416, a restart).
    func probeDidFinish(_ worker: SegmentWorker, next: ProbeNext) {
        switch next {
        case .redirect(let url):
            probeURL = url
            probe()
        case .restart(let reason):
            restartFromScratch(reason)
        case .alreadyComplete:
            logger.info("already complete", metadata: ["path": "\(paths.target)"])
            stop(with: .success(result(size: completedTarget?.size ?? 0, alreadyComplete: true)))
        case .finishResumed:
            guard let map = resumeMap else { return }
            object = RemoteObject(url: probeURL, size: map.objectSize, etag: map.etag, lastModified: map.lastModified, acceptsRanges: true)
            bytesResumed = map.objectSize
            do {
                part = try PartFile.open(path: paths.part, truncate: false)
            } catch {
                stop(with: .failure(error))
                return
            }
            finalize()
        case .empty(let found):
            object = found
            do {
                if !configuration.discardsData { part = try PartFile.open(path: paths.part, truncate: true) }
            } catch {
                stop(with: .failure(error))
                return
            }
            finalize()
        }
    }

    /// Retries a failed probe after a backoff, or gives up.
    private func probeFailed(_ error: DownloadError, retryAfter: Int?) {
        probeTries += 1
        guard error.isTransient, probeTries < configuration.retry.maxTries else {
            let suffix = probeTries > 1 ? " (after \(probeTries) tries)" : ""
            stop(with: .failure(DownloadError(error.kind, error.message + suffix, httpStatus: error.httpStatus, curlCode: error.curlCode, errno: error.errno)))
            return
        }
        retries += 1
        let delay = backoff(tries: probeTries, retryAfter: retryAfter)
        logger.info("probe failed; retrying", metadata: ["error": "\(error)", "delay": "\(delay)"])
        probeRetryTimer = loop.schedule(after: delay) { [weak self] in self?.probe() }
    }

    /// Starts over from byte 0: the object changed, or the partial state did not match it.
    private func restartFromScratch(_ reason: String) {
        guard configuration.onObjectChange == .restart, !restartedAfterChange else {
            discardAfterStop = true
            stop(with: .failure(DownloadError(.objectChanged, "\(reason); not mixing versions, the partial download was discarded")))
            return
        }
        restartedAfterChange = true
        warn("\(reason); starting over from the beginning")
        for worker in workers where worker.isBusy { worker.cancel() }
        retryTimer?.cancel()
        scheduler = nil
        object = nil
        resumeMap = nil
        isStreaming = false
        streamPosition = 0
        checkpointedChunks = nil
        probeURL = originalURL
        crossedOrigin = false
        redirects = 0
        phase = .starting
        let session = LoopBound(self)
        closeAndDiscard(discard: true) {
            session.value.probe()
        }
    }

    private var discardAfterStop = false

    // MARK: Plan

    /// The probe's 206 arrived: plan the rest and start the other connections.
    private func beginRanged(_ found: RemoteObject, firstRange: ByteRange, worker: SegmentWorker) throws(DownloadError) {
        guard let size = found.size else { return }
        let fresh = resumeMap == nil
        if !configuration.discardsData {
            let file = try PartFile.open(path: paths.part, truncate: fresh)
            if fresh {
                do {
                    try file.preallocate(size)
                } catch {
                    file.close()
                    unlink(paths.part)  // nothing was downloaded; leave nothing behind
                    throw error
                }
            }
            part = file
        }
        object = found
        let layout = resumeMap?.layout ?? ChunkLayout(objectSize: size)
        let missing = resumeMap?.missingRanges ?? [ByteRange(0, size)]
        let plan = SegmentScheduler(layout: layout, missing: missing, minimumSegmentSize: configuration.minimumSegmentSize)
        scheduler = plan
        bytesResumed = size - missing.reduce(0) { $0 + $1.count }
        checkpointedChunks = resumeMap?.chunks
        if let map = resumeMap {
            logger.info("resuming", metadata: ["done": "\(map.completedBytes)", "size": "\(size)"])
        }
        guard let segment = plan.reserve(ByteRange(firstRange.lowerBound, layout.alignUp(firstRange.upperBound)), ownerID: worker.id) else {
            throw .invalidResponse("internal: the probe's range \(firstRange) is not missing")
        }
        worker.adopt(segment, request: firstRange)
        plan.noteRequested(segment, upTo: firstRange.upperBound)
        phase = .transferring
        if case .adaptive(let maximum) = configuration.connections {
            let firstByte = worker.exchange.flatMap { exchange in exchange.startedAt.map { ContinuousClock.now - $0 } }
            targetConnections = ConnectionController.initialCount(probeTimeToFirstByte: firstByte?.seconds ?? 0, maximum: maximum)
            controller = ConnectionController(initial: targetConnections, maximum: maximum)
        }
        scheduleHousekeeping()
        plan.split(into: max(0, targetConnections - 1))
        if configuration.checkpointInterval != nil && fresh {
            checkpoint(force: true)
        }
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    /// The probe's 200 arrived: the server ignores ranges, so this one response is the download.
    private func beginStream(_ found: RemoteObject, worker: SegmentWorker) throws(DownloadError) {
        if !configuration.discardsData {
            let file = try PartFile.open(path: paths.part, truncate: true)
            if let size = found.size {
                do {
                    try file.preallocate(size)
                } catch {
                    file.close()
                    unlink(paths.part)
                    throw error
                }
            }
            part = file
        }
        object = found
        isStreaming = true
        streamPosition = 0
        phase = .transferring
        worker.adoptStream()
        logger.info("the server does not support ranges; downloading in one stream")
    }

    /// Gives idle connections work; finalizes when nothing is left.
    func dispatchWork() {
        guard phase == .transferring, let scheduler else { return }
        if scheduler.isComplete {
            if !workers.contains(where: \.isBusy) { finalize() }
            return
        }
        let now = ContinuousClock.now
        while workers.count < targetConnections { _ = makeWorker() }
        for worker in workers.prefix(targetConnections) where !worker.isBusy {
            guard let object, acquirePermit(for: worker, host: object.url, retry: { $0.dispatchWork() }) else { break }
            guard let segment = scheduler.claim(now: now, ownerID: worker.id, cut: cutPoint) else {
                worker.releasePermit()
                break
            }
            startSegmentRequest(worker, segment)
        }
        if configuration.hedgesSlowTail { hedgeSlowTail() }
        if !workers.contains(where: \.isBusy), let next = scheduler.nextRetryTime {
            retryTimer?.cancel()
            retryTimer = loop.schedule(after: max(.zero, next - .now)) { [weak self] in self?.dispatchWork() }
        }
    }

    /// Every 100 ms while transferring: samples each connection's rate, replaces slow
    /// connections, and lets the adaptive controller see the throughput.
    private func scheduleHousekeeping() {
        housekeepingTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, self.phase == .transferring else { return }
            let now = ContinuousClock.now
            for worker in self.workers { worker.sampleRate(at: now) }
            self.kickWriteback()
            self.replaceSlowConnections(at: now)
            self.adaptConnections(at: now)
            self.scheduleHousekeeping()
        }
    }

    /// The quickest first byte is the best round-trip estimate (slower ones include
    /// retransmissions, queueing and new connections' handshakes).
    private var roundTripEstimate: Double {
        workers.map(\.timeToFirstByte).filter { $0 > 0 }.min() ?? 0.05
    }

    private func adaptConnections(at now: ContinuousClock.Instant) {
        guard var controller, !controller.isSettled else { return }
        let remaining = scheduler?.remainingBytes ?? 0
        if let count = controller.observe(totalBytes: bytesReceived, remainingBytes: remaining, at: now, roundTrip: roundTripEstimate) {
            logger.debug("adapting connections", metadata: ["from": "\(targetConnections)", "to": "\(count)", "why": "\(controller.lastReason)"])
            targetConnections = count
            dispatchWork()
        }
        if controller.isSettled {
            logger.debug("connections settled", metadata: ["count": "\(targetConnections)", "why": "\(controller.lastReason)"])
        }
        self.controller = controller
    }

    /// When idle connections remain and a connection far behind the others holds the last work,
    /// fetch its tail on an idle connection too.
    private func hedgeSlowTail() {
        guard let scheduler, scheduler.segments.allSatisfy(\.isOwned) else { return }
        let idle = workers.prefix(targetConnections).filter { !$0.isBusy }
        guard !idle.isEmpty else { return }
        let busy = workers.filter { $0.isBusy && $0.segment != nil }
        let rates = busy.map(\.recentRate).filter { $0 > 0 }
        guard rates.count >= 2 else { return }
        let median = rates.sorted()[rates.count / 2]
        var available = idle.makeIterator()
        for worker in busy {
            guard let segment = worker.segment, segment.partner == nil, segment.remaining > 0 else { continue }
            let rate = max(worker.recentRate, 1)
            let timeLeft = Double(segment.remaining) / rate
            let timeOnFresh = Double(segment.remaining) / median
            guard rate < median / 3, timeLeft > 2 * timeOnFresh + 0.5 else { continue }
            guard let helper = available.next(), acquirePermit(for: helper, host: object?.url ?? probeURL, retry: { $0.dispatchWork() }) else { return }
            guard let hedge = scheduler.hedge(segment, ownerID: helper.id) else {
                helper.releasePermit()
                return
            }
            logger.debug("hedging a slow tail", metadata: ["segment": "\(segment)", "rate": "\(Int(rate))"])
            startSegmentRequest(helper, hedge)
        }
    }

    /// Where to cut `victim`'s request in flight for an idle connection, or `nil` to leave it:
    /// only when its connection would need well over a round trip to finish, and then so that
    /// both finish together. (Cutting a request wastes what the server already sent.)
    private func cutPoint(_ victim: Segment) -> Int64? {
        guard let id = victim.ownerID, workers.indices.contains(id), workers[id].isTransferring else { return nil }
        let worker = workers[id]
        let rate = worker.recentRate
        guard rate > 0 else { return nil }
        let secondsLeft = Double(victim.remaining) / rate
        // The path's round trip, not this connection's first-byte time: on a lossy path that is
        // inflated by retransmissions, and would leave the last second of a slow tail uncut.
        guard secondsLeft > max(0.25, 4 * roundTripEstimate) else { return nil }
        let rates = workers.filter(\.isTransferring).map(\.recentRate).filter { $0 > 0 }.sorted()
        let thiefRate = rates.isEmpty ? rate : rates[rates.count / 2]
        let victimShare = rate / (rate + thiefRate)
        let point = victim.frontier + Int64(Double(victim.remaining) * victimShare)
        // Leave each side at least one steal's worth; the scheduler refuses anything smaller.
        guard let scheduler, victim.remaining >= 2 * scheduler.minimumStealSize else { return nil }
        let minimum = scheduler.minimumStealSize
        return min(max(point, victim.frontier + minimum), scheduler.layout.alignDown(victim.end - minimum))
    }

    /// The size of `worker`'s next request: about `max(0.5 s, 50 round trips)` of its measured
    /// rate, so the idle round trip between requests costs at most about 2%, and connections
    /// stay alive between requests.
    private func requestSize(for worker: SegmentWorker) -> Int64 {
        guard worker.recentRate > 0 else { return 4 << 20 }
        let seconds = max(0.5, 50 * worker.timeToFirstByte)
        return min(1 << 30, max(configuration.minimumSegmentSize, Int64(worker.recentRate * seconds)))
    }

    private func startSegmentRequest(_ worker: SegmentWorker, _ segment: Segment) {
        guard let object, let scheduler else { return }
        // A hedge pair fetches its whole tail in one request, so the pair never splits between requests.
        var size = segment.partner == nil ? requestSize(for: worker) : segment.end - segment.position
        // Take a remainder under half a request along now rather than leave a sliver that costs a
        // request (a round trip, and on a lossy path a slow start) of its own later.
        if segment.end - segment.position < size + size / 2 { size = segment.end - segment.position }
        let range = ByteRange(segment.position, min(segment.end, segment.position + size))
        scheduler.noteRequested(segment, upTo: range.upperBound)
        var lines = headerLines(for: object.url)
        if let precondition = object.precondition { lines.append("\(precondition.name): \(precondition.value)") }
        worker.adopt(segment, request: range)
        logger.trace("request", metadata: ["connection": "\(worker.id)", "range": "\(range)"])
        worker.begin(.segment(range), ExchangeRequest(url: object.url.absoluteString, headerLines: lines, range: .bounded(range), options: transferOptions))
    }

    // MARK: Store

    /// Writes a segment's body bytes. Returns `false` to stop the exchange (its end shrank, the
    /// hedge partner finished, or the write failed).
    @inline(__always)
    func write(_ body: UnsafeRawBufferPointer, for worker: SegmentWorker, segment: Segment) -> Bool {
        guard let scheduler else { return false }
        let step = scheduler.plannedWrite(segment, count: body.count)
        if !step.write.isEmpty, let part {
            do {
                try part.write(UnsafeRawBufferPointer(rebasing: body[step.write]), at: step.offset)
            } catch {
                worker.failure = .localIO("cannot write to", path: paths.part, errno: error.rawValue)
                return false
            }
        }
        scheduler.advance(segment, by: step.accepted)
        bytesReceived += Int64(body.count)
        if bytesReceived - bytesAtLastWriteback >= Self.writebackStride { kickWriteback() }
        if step.accepted < body.count { return false }
        if segment.isDone {
            if let partner = segment.partner {
                loop.afterCallbacks { [weak self] in self?.workers.first { $0.segment === partner }?.cancel() }
            }
            return worker.requestEnd <= segment.end
        }
        return true
    }

    /// Writes a single stream's bytes in order.
    @inline(__always)
    func writeStream(_ body: UnsafeRawBufferPointer, for worker: SegmentWorker) -> Bool {
        if let part {
            do {
                try part.write(body, at: streamPosition)
            } catch {
                worker.failure = .localIO("cannot write to", path: paths.part, errno: error.rawValue)
                return false
            }
        } else if !configuration.discardsData {
            return false
        }
        streamPosition += Int64(body.count)
        bytesReceived += Int64(body.count)
        return true
    }

    // MARK: Transfer outcomes

    /// A segment request ended: continue, retry or fail.
    func segmentDidFinish(_ worker: SegmentWorker, segment: Segment, requested: ByteRange, outcome: ExchangeOutcome, failure: DownloadError?, retryAfter: Int?) {
        guard phase == .transferring, let scheduler else { return }
        var error = failure
        if error == nil {
            switch outcome {
            case .failed(let transfer):
                error = networkError(transfer)
            case .completed where !segment.isDone && segment.position < min(requested.upperBound, segment.end):
                error = .invalidResponse("the server closed the response after \(segment.position - requested.lowerBound) of \(requested.count) bytes (\(object?.url.redacted ?? ""))")
            default:
                break
            }
        }
        if case .cancelled = outcome, segment.isDone || segment.partner == nil {
            // A hedge partner won, or the session is stopping.
            if segment.isDone { scheduler.finish(segment) } else { scheduler.release(segment, failed: false) }
            dispatchWork()
            return
        }
        if let error {
            if error.kind == .objectChanged {
                restartFromScratch(error.message)
                return
            }
            guard error.isTransient else {
                stop(with: .failure(error))
                return
            }
            let delay = backoff(tries: segment.failuresWithoutProgress + 1, retryAfter: retryAfter)
            scheduler.release(segment, failed: true, retryAt: .now + delay)
            if segment.failuresWithoutProgress >= configuration.retry.maxTries {
                // The segment map keeps everything else; running the command again resumes.
                stop(with: .failure(DownloadError(
                    error.kind, error.message + " (gave up after \(configuration.retry.maxTries) tries; the partial download is kept, run the same command to resume)",
                    httpStatus: error.httpStatus, curlCode: error.curlCode, errno: error.errno)))
                return
            }
            retries += 1
            logger.info("request failed; retrying", metadata: ["range": "\(requested)", "error": "\(error)", "delay": "\(delay)"])
        } else if segment.isDone {
            scheduler.finish(segment)
        } else if segment.isOwned && segment.partner == nil && workers.prefix(targetConnections).contains(where: { $0 === worker }),
                  let object, acquirePermit(for: worker, host: object.url, retry: { $0.dispatchWork() }) {
            // The request ended inside the segment: the same connection asks for the next part.
            maybeCheckpoint()
            startSegmentRequest(worker, segment)
            return
        } else {
            scheduler.release(segment, failed: false)
        }
        maybeCheckpoint()
        dispatchWork()
    }

    /// The single stream ended.
    func streamDidFinish(_ worker: SegmentWorker, outcome: ExchangeOutcome, failure: DownloadError?) {
        guard phase == .transferring else { return }
        if let failure {
            stop(with: .failure(failure))
            return
        }
        switch outcome {
        case .completed:
            if let size = object?.size, streamPosition != size {
                stop(with: .failure(.invalidResponse("the server closed the connection after \(streamPosition) of \(size) bytes and does not support ranges to resume; try again")))
                return
            }
            if object?.size == nil { object?.size = streamPosition }
            finalize()
        case .failed(let transfer):
            let error = networkError(transfer)
            stop(with: .failure(DownloadError(error.kind, error.message + "; the server does not support ranges, so the download cannot resume", httpStatus: error.httpStatus, curlCode: error.curlCode)))
        case .aborted, .cancelled:
            break
        }
    }

    /// A probe ended; `next` says what its head decided.
    func probeDidComplete(_ worker: SegmentWorker, outcome: ExchangeOutcome, failure: DownloadError?, next: ProbeNext?, retryAfter: Int?) {
        guard phase == .probing else { return }
        if let failure {
            if failure.kind == .objectChanged {
                restartFromScratch(failure.message)
            } else {
                probeFailed(failure, retryAfter: retryAfter)
            }
            return
        }
        if let next {
            switch outcome {
            case .failed(let transfer) where !next.toleratesTransferFailure:
                probeFailed(networkError(transfer), retryAfter: nil)
            default:
                probeDidFinish(worker, next: next)
            }
            return
        }
        switch outcome {
        case .failed(let transfer):
            probeFailed(networkError(transfer), retryAfter: nil)
        case .completed, .aborted:
            probeFailed(.invalidResponse("the server's response ended without a complete header (\(probeURL))"), retryAfter: nil)
        case .cancelled:
            break
        }
    }

    private func networkError(_ failure: TransferFailure) -> DownloadError {
        let url = object?.url.redacted ?? probeURL.redacted
        if failure.isUnreachable && object == nil {
            // Like curl and wget, do not keep knocking on a door nobody answers before the first
            // response; once a download is under way the same failure is retried.
            return DownloadError(.unreachable, "cannot connect to \(url): \(failure.message); check the host name and port, and that the server is up", curlCode: failure.curlCode)
        }
        if failure.isTLS {
            return DownloadError(.tls, "TLS failure talking to \(url): \(failure.message); check the certificate, or pass --insecure to skip verification (unsafe)", curlCode: failure.curlCode)
        }
        if failure.isTimeout {
            return DownloadError(.network, "timed out talking to \(url): \(failure.message)", curlCode: failure.curlCode)
        }
        return DownloadError(.network, "network error talking to \(url): \(failure.message)", curlCode: failure.curlCode)
    }

    /// Exponential backoff with full jitter, at least `Retry-After`, capped.
    private func backoff(tries: Int, retryAfter: Int?) -> Duration {
        let base = configuration.retry.baseDelay.seconds
        let cap = configuration.retry.maxDelay.seconds
        let exponential = min(cap, base * Double(1 << min(max(tries - 1, 0), 20)))
        var delay = Double.random(in: (exponential / 2)...max(exponential / 2, exponential))
        if let retryAfter { delay = max(delay, min(Double(retryAfter), cap)) }
        return .milliseconds(Int64(delay * 1000))
    }

    // MARK: Checkpoints

    private func maybeCheckpoint() {
        guard let interval = configuration.checkpointInterval, ContinuousClock.now - lastCheckpoint >= interval else { return }
        checkpoint(force: false)
    }

    /// Makes the written chunks durable, then records them in the map: data first, map second.
    private func checkpoint(force: Bool, then completion: (() -> Void)? = nil) {
        // Not once finalizing has taken the descriptor: the map would be written after the
        // finalizer removed it, by syncing a descriptor number that may belong to another file.
        guard configuration.checkpointInterval != nil, let scheduler, let object, let descriptor = part?.openDescriptor,
              let size = object.size
        else {
            completion?()
            return
        }
        let chunks = scheduler.written
        if (checkpointInFlight || chunks == checkpointedChunks) && !force && completion == nil { return }
        checkpointInFlight = true
        lastCheckpoint = .now
        let map = SegmentMap(
            objectSize: size, chunkSize: scheduler.layout.chunkSize, etag: object.etag,
            lastModified: object.lastModified, url: originalURL.redacted, chunks: chunks)
        let paths = self.paths
        let session = LoopBound(self)
        let done = LoopBound(completion)
        let loop = self.loop
        diskQueue.async {
            var failure: DownloadError?
            do {
                try descriptor.syncData()
                try SegmentMapFile.write(map, to: paths.map)
            } catch let error as Errno {
                failure = .localIO("cannot flush", path: paths.part, errno: error.rawValue)
            } catch let error as DownloadError {
                failure = error
            } catch {
                failure = DownloadError(.localIO, "\(error)")
            }
            let reported = failure
            loop.execute {
                let session = session.value
                session.checkpointInFlight = false
                if let reported {
                    session.stop(with: .failure(reported))
                } else {
                    session.checkpointedChunks = map.chunks
                }
                done.value?()
            }
        }
    }

    // MARK: Progress

    private func scheduleProgress() {
        progressTimer = loop.schedule(after: configuration.progressInterval) { [weak self] in
            guard let self, self.phase != .stopped else { return }
            self.reportProgress()
            self.maybeCheckpoint()
            self.scheduleProgress()
        }
    }

    var bytesDone: Int64 {
        if isStreaming { return streamPosition }
        return bytesResumed + (scheduler?.bytesWritten ?? 0)
    }

    func progressSnapshot() -> DownloadProgress {
        DownloadProgress(
            bytesDone: bytesDone, totalBytes: object?.size, bytesPerSecond: meter.bytesPerSecond,
            activeConnections: workers.count(where: \.isTransferring), elapsed: .now - startedAt)
    }

    /// Hands the part file's dirty pages to the disk every ``writebackStride`` bytes, on the disk
    /// queue, so writing overlaps the transfer instead of all waiting for the final fsync.
    private func kickWriteback() {
        guard !writebackInFlight, let descriptor = part?.openDescriptor, bytesReceived - bytesAtLastWriteback >= Self.writebackStride
        else { return }
        writebackInFlight = true
        bytesAtLastWriteback = bytesReceived
        let session = LoopBound(self)
        let loop = self.loop
        diskQueue.async {
            descriptor.startWriteback()
            loop.execute { session.value.writebackInFlight = false }
        }
    }

    private func reportProgress() {
        let now = ContinuousClock.now
        meter.record(totalBytes: bytesReceived, at: now)
        onProgress?(progressSnapshot())
    }

    /// A connection delivering under a quarter of the median rate (a bad path, a throttled or
    /// overloaded server node) is closed and its slot reconnects: its request is cancelled, the
    /// bytes it wrote are kept, and the rest of its segment goes back to the plan.
    private func replaceSlowConnections(at now: ContinuousClock.Instant) {
        guard configuration.replacesSlowConnections, phase == .transferring, let scheduler, !isStreaming else { return }
        let measured = workers.filter { $0.isTransferring && $0.recentRate > 0 }
        guard measured.count >= 4 else { return }
        let rates = measured.map(\.recentRate).sorted()
        let median = rates[rates.count / 2]
        let roundTrip = roundTripEstimate
        for worker in measured where worker.recentRate < median / 4 && worker.replacements < 3 {
            guard let firstByte = worker.exchange?.firstByteAt, (now - firstByte).seconds > max(0.2, 10 * roundTrip),
                  let segment = worker.segment, segment.partner == nil,
                  segment.remaining >= 2 * scheduler.minimumStealSize
            else { continue }
            logger.debug("replacing a slow connection", metadata: [
                "connection": "\(worker.id)", "rate": "\(Int(worker.recentRate))", "median": "\(Int(median))",
            ])
            worker.replacements += 1
            worker.wantsFreshConnection = true
            worker.cancel()
        }
    }

    // MARK: Finalize and stop

    private func finalize() {
        if configuration.discardsData, phase != .finalizing && phase != .stopped {
            stop(with: .success(result(size: object?.size ?? streamPosition, alreadyComplete: false)))
            return
        }
        guard phase != .finalizing && phase != .stopped, let object, let descriptor = part?.takeDescriptorForClosing() else { return }
        phase = .finalizing
        retryTimer?.cancel()
        let size = object.size ?? streamPosition
        let record = CompletedObject(size: size, etag: object.etag, lastModified: object.lastModified, url: originalURL.redacted)
        let paths = self.paths
        let overwrite = configuration.overwritesExistingFile
        let checksum = request.expectedChecksum
        let session = LoopBound(self)
        let loop = self.loop
        diskQueue.async {
            var outcome: DownloadError?
            do throws(DownloadError) {
                try Finalizer.finalize(part: descriptor, paths: paths, size: size, record: record, checksum: checksum, overwrite: overwrite)
            } catch {
                outcome = error
            }
            let failure = outcome
            loop.execute {
                let session = session.value
                session.part = nil
                if let failure {
                    session.stop(with: .failure(failure))
                } else {
                    session.stop(with: .success(session.result(size: size, alreadyComplete: false)))
                }
            }
        }
    }

    private func result(size: Int64, alreadyComplete: Bool) -> DownloadResult {
        DownloadResult(
            path: paths.target, bytes: size, bytesReceived: bytesReceived,
            bytesResumed: alreadyComplete ? size : bytesResumed, duration: .now - startedAt,
            connectionsUsed: peakConnections, requests: requests, retries: retries,
            etag: object?.strongETag ?? completedTarget?.etag, alreadyComplete: alreadyComplete)
    }

    /// Pauses: stops every transfer, checkpoints, and reports ``DownloadError/Kind/interrupted``.
    func pause() {
        guard phase == .probing || phase == .transferring || phase == .starting else { return }
        let message = "download paused; \(bytesDone) bytes are kept in \(paths.part) — resume with the same command"
        stop(with: .failure(DownloadError(.interrupted, message)))
    }

    /// Cancels: stops every transfer and deletes the partial state.
    func cancel() {
        guard phase != .stopped && phase != .finalizing else { return }
        discardAfterStop = true
        stop(with: .failure(DownloadError(.cancelled, "download cancelled; partial data deleted")))
    }

    /// Ends the session once: cancels transfers and timers, saves or discards state, reports.
    private func stop(with result: Result<DownloadResult, DownloadError>) {
        guard phase != .stopped else { return }
        let wasTransferring = phase == .transferring
        phase = .stopped
        loop.budget.cancelWait(self)
        progressTimer?.cancel()
        housekeepingTimer?.cancel()
        retryTimer?.cancel()
        probeRetryTimer?.cancel()
        for worker in workers where worker.isBusy { worker.cancel() }
        if case .success = result { onProgress?(progressSnapshot()) }
        let report = { [self] in
            closeAndDiscard(discard: discardAfterStop) { [self] in
                let completion = self.completion
                self.completion = nil
                completion?(result)
                keepAlive = nil
            }
        }
        if case .failure = result, wasTransferring, !discardAfterStop, !isStreaming {
            // Keep what arrived: one last checkpoint before reporting.
            checkpoint(force: true, then: report)
        } else {
            report()
        }
    }
}

extension DownloadSession {
    /// Closes the part file and, if asked, deletes the partial state, on the disk queue so it
    /// happens after any checkpoint in flight; then runs `then` on the transfer thread.
    fileprivate func closeAndDiscard(discard: Bool, then: @escaping () -> Void) {
        let descriptor = part?.takeDescriptorForClosing()
        part = nil
        let paths = self.paths
        let work = LoopBound(then)
        let loop = self.loop
        diskQueue.async {
            try? descriptor?.close()
            if discard { DownloadSession.discardFiles(paths) }
            if !loop.execute({ work.value() }) {
                // The loop is shutting down; nothing can run on it any more.
            }
        }
    }
}

/// What a probe's head decided should happen once its exchange ends.
enum ProbeNext {
    case redirect(RemoteURL)
    case restart(String)
    case alreadyComplete
    case finishResumed
    case empty(RemoteObject)

    /// A decision that does not need the (discarded) body to arrive intact.
    var toleratesTransferFailure: Bool {
        switch self {
        case .redirect: false
        case .restart, .alreadyComplete, .finishResumed, .empty: true
        }
    }
}

/// Carries a transfer-thread object through a `@Sendable` closure that runs on the transfer thread.
///
/// `@unchecked Sendable`: `value` is only read inside closures passed to ``TransferLoop/execute(_:)``.
struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension Downloader.Configuration.Connections {
    /// Connections to start with.
    var initial: Int {
        switch self {
        case .fixed(let count): count
        case .adaptive(let maximum): min(maximum, 8)
        }
    }
}
