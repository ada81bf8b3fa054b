import Logging
import SwoopStore
import SwoopCurl

/// The bytes around every seam of an object fetched in shares (``ObjectShare/seams(of:)``), fetched
/// again by the task that finishes it, so that they can be compared with what each share wrote:
/// no single task saw both sides of a seam, and a server whose validators lie could have served
/// two versions to two tasks. Each window is a ``MirrorCheck`` of the object's URL (its own
/// redirects and retries, the size checked); a few run at once. Transfer thread only.
final class SeamCheck: MirrorCheckDelegate, LoopJob {
    /// Fetched bytes and where they belong.
    typealias Samples = [(range: ByteRange, bytes: [UInt8])]
    /// The samples, with the object as the first response showed it (its published digests).
    typealias Outcome = Result<(samples: Samples, object: RemoteObject?), DownloadError>

    private let url: RemoteURL
    private let headers: [(name: String, value: String)]
    private let service: (any ObjectService)?
    private let pin: ObjectIdentity
    private let windows: [ByteRange]
    private let settings: ExchangeSettings
    private let loop: TransferLoop
    private let logger: Logger
    private var completion: ((Outcome) -> Void)?
    private var next = 0
    private var running: [MirrorCheck] = []
    private var samples: Samples = []
    /// The object as the first window's response showed it (its published digests).
    private var object: RemoteObject?

    /// Windows checked at once.
    static let parallel = 8

    /// The bytes compared on each side of a seam.
    static let window = ProbeDecision.window

    /// The windows to fetch for an object laid out as `layout` in `count` shares.
    static func windows(of layout: ChunkLayout, count: Int) -> [ByteRange] {
        guard let share = ObjectShare(index: 0, count: count) else { return [] }
        return share.seams(of: layout).map {
            ByteRange(max(0, $0 - window), min(layout.objectSize, $0 + window))
        }
    }

    init(
        url: RemoteURL, headers: [(name: String, value: String)], service: (any ObjectService)?, pin: ObjectIdentity,
        windows: [ByteRange], settings: ExchangeSettings, loop: TransferLoop, logger: Logger,
        completion: @escaping (Outcome) -> Void
    ) {
        self.url = url
        self.headers = headers
        self.service = service
        self.pin = pin
        self.windows = windows
        self.settings = settings
        self.loop = loop
        self.logger = logger
        self.completion = completion
    }

    /// Fetches every window (``parallel`` at a time); the completion hears once.
    func start() {
        guard completion != nil else { return }
        if next == windows.count && running.isEmpty { return finish(.success((samples, object))) }
        while running.count < Self.parallel, next < windows.count {
            let check = MirrorCheck(
                url: url, headers: headers, size: pin.size ?? 0, range: windows[next], settings: settings, loop: loop,
                logger: logger, service: service)
            next += 1
            check.delegate = self
            running.append(check)
            check.start()
        }
    }

    func cancel() {
        for check in running { check.stop() }
        running = []
        finish(.failure(DownloadError(.cancelled, "the check of the shares' seams was cancelled")))
    }

    func mirrorCheck(_ check: MirrorCheck, sampled found: RemoteObject, headers: RequestHeaders, bytes: [UInt8]) {
        running.removeAll { $0 === check }
        guard completion != nil else { return }
        if case .changed(let what) = pin.compare(found.identity) {
            return fail(
                DownloadError(
                    .objectChanged,
                    "the object changed on the server since its shares began: \(what) (at bytes \(check.range))",
                    remedy: .restartShares))
        }
        if object == nil { object = found }
        samples.append((check.range, bytes))
        start()
    }

    func mirrorCheck(_ check: MirrorCheck, failed reason: String) {
        running.removeAll { $0 === check }
        if check.servesOtherObject {
            return fail(
                DownloadError(
                    .objectChanged, "the object changed on the server since its shares began: \(reason)",
                    remedy: .restartShares))
        }
        fail(DownloadError(.network, "cannot check bytes \(check.range) of \(url.redacted) again: \(reason)"))
    }

    private func fail(_ error: DownloadError) {
        for other in running { other.stop() }
        running = []
        finish(.failure(error))
    }

    private func finish(_ result: Outcome) {
        let completion = self.completion
        self.completion = nil
        completion?(result)
    }
}
