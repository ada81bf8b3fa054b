import Logging
import SwoopStore
import SwoopCurl

/// How one run of a download starts: prepared on the downloader's `preparation` queue (the host's
/// addresses, the first look at the disk, the target's lock), then handed to the transfer thread.
extension Downloader {
    /// What a run found before it reaches the transfer thread.
    private enum Preparation {
        /// Finished by an earlier run, and the listing names the same object: no request.
        case complete(DownloadResult)
        /// A session to start: its sources, its settings (made from the configuration, where a
        /// listing's newer version overwrites), its logger (with the URL), and for a part file, the
        /// sink (holding the target's lock when it resumes) and what the disk holds.
        case start(url: RemoteURL, mirrors: [RemoteURL], settings: ExchangeSettings, logger: Logger, disk: DiskBasis?)
    }

    /// A part file's sink with what its disk holds, made off the transfer thread and then owned by
    /// it: `@unchecked Sendable` because the preparation queue lets go of it when it hands it over.
    private final class DiskBasis: @unchecked Sendable {
        let sink: PartFileSink
        let basis: Result<LocalState, DownloadError>

        init(sink: PartFileSink, basis: Result<LocalState, DownloadError>) {
            self.sink = sink
            self.basis = basis
        }
    }

    /// Starts one run of a download: returns its control at once, prepares the run on the
    /// `preparation` queue, then starts its session on the transfer thread. A pause or a cancel
    /// that comes first waits in the control for the session. `configuration.exchange`: its
    /// exchange settings when made once for many downloads, else `nil`.
    func launch(
        _ request: DownloadRequest, remote: (url: RemoteURL, service: (any ObjectService)?), mirrors: [RemoteURL],
        paths: DownloadPaths, configuration: (values: Configuration, exchange: ExchangeSettings?), sink kind: SinkKind,
        task: DownloadTask, run: Int
    ) -> DownloadControl {
        let control = DownloadControl(loop: loop, disk: disk, paths: paths)
        let id = ObjectIdentifier(control)
        active.withLock { $0[id] = control }
        let finished: @Sendable (Result<DownloadResult, DownloadError>) -> Void = { [self] outcome in
            control.sessionEnded()  // on the transfer thread, like every use of the session
            _ = active.withLock { $0.removeValue(forKey: id) }
            task.runEnded(outcome, run: run)
        }
        preparation.async { [self] in
            let prepared = prepare(
                request, named: remote.url, mirrors: mirrors, paths: paths, configuration: configuration.values,
                exchange: configuration.exchange, keepsPartialState: kind.isPartFile)
            guard case .start(let url, let mirrors, let settings, let logger, let disk) = prepared else {
                if case .complete(let result) = prepared {
                    _ = active.withLock { $0.removeValue(forKey: id) }
                    task.reportTransferEnd()
                    task.runEnded(.success(result), run: run)
                }
                return
            }
            let accepted = loop.execute { [loop] in
                let sink: BodySink
                if let disk {
                    sink = disk.sink
                } else if case .stream(let buffer, _) = kind {
                    sink = StreamSink(buffer: buffer, loop: loop)
                } else {
                    sink = DiscardSink(loop: loop)
                }
                let objectFound: ((RemoteObject, ResponseTiming?) -> Void)? =
                    if case .stream(_, let slot) = kind {
                        { slot.deliver(.success(DownloadResponse($0, timing: $1))) }
                    } else {
                        nil
                    }
                let session = DownloadSession(
                    loop: loop, settings: settings, request: request, url: url, service: remote.service,
                    mirrors: mirrors, paths: paths, sink: sink, objectFound: objectFound,
                    logger: logger, progress: { task.reportProgress($0) },
                    transferEnded: { task.reportTransferEnd() }, handedOver: { control.sessionHandedOver() },
                    completion: finished)
                control.attach(session)
                settings.configuration.tuning.faults.sessionStarted?(session)
                session.start(basis: disk?.basis)
            }
            if !accepted {
                disk?.sink.releaseClaim()
                finished(.failure(DownloadError(.cancelled, "the downloader was shut down")))
            }
        }
        return control
    }

    /// Everything a run does before the transfer thread sees it, on the `preparation` queue: the
    /// host's addresses (every address a source of its own: the first pinned for the probe, the
    /// others checked and used as mirrors are), and for a part file the disk: what it holds, and
    /// for a partial download the target's lock and a second look under it. `exchange`: the
    /// configuration's exchange settings, when made once for many downloads.
    private func prepare(
        _ request: DownloadRequest, named: RemoteURL, mirrors requested: [RemoteURL], paths: DownloadPaths,
        configuration: Configuration, exchange: ExchangeSettings?, keepsPartialState: Bool
    ) -> Preparation {
        let addresses = hostAddresses.lookup(named, configuration.addresses)
        let url = addresses.first.map { named.pinned(to: $0) } ?? named
        var mirrors = addresses.dropFirst().map { named.pinned(to: $0) }
        for mirror in requested
        where mirror.absoluteString != url.absoluteString
            && !mirrors.contains(where: { $0.absoluteString == mirror.absoluteString && $0.address == nil })
        {
            mirrors.append(mirror)
        }
        let sessionLogger = DownloadSession.logger(logger, url: url)
        guard keepsPartialState else {
            return .start(
                url: url, mirrors: mirrors, settings: exchange ?? ExchangeSettings(configuration),
                logger: sessionLogger,
                disk: nil)
        }
        var settings = configuration
        var exchange = exchange
        var firstLook = Result { () throws(DownloadError) in
            try PartialState.read(paths, url: url, rules: PartialState.Rules(settings))
        }
        if case .success(let state) = firstLook, Self.isOlderVersion(state, request: request) {
            // A file Swoop completed from an earlier version of a listed object: replaced, as
            // `aws s3 sync` does (a file that is not Swoop's is never replaced without --force).
            settings.files.overwritesExistingFile = true
            exchange = nil
            firstLook = Result { () throws(DownloadError) in
                try PartialState.read(paths, url: url, rules: PartialState.Rules(settings))
            }
        }
        if case .success(let state) = firstLook,
            let result = Self.completeAsListed(state, request: request, path: paths.target, files: settings.files)
        {
            return .complete(result)
        }
        let sink = PartFileSink(
            paths: paths, disk: disk, opening: opening, publisher: publisher, writer: writer,
            overwritesTarget: settings.files.overwritesExistingFile,
            beforeOpening: settings.tuning.faults.beforePartFileOpens)
        let basis = Result { () throws(DownloadError) in
            let found = try PartialState.basis(
                for: paths, url: url, sink: sink, rules: PartialState.Rules(settings),
                logger: sessionLogger, reading: firstLook)
            return try Self.shareBasis(found, paths: paths)
        }
        return .start(
            url: url, mirrors: mirrors, settings: exchange ?? ExchangeSettings(settings), logger: sessionLogger,
            disk: DiskBasis(sink: sink, basis: basis))
    }

    /// What one share of an object starts from (``DownloadPaths/share``): its own map, which must
    /// be of the version every share pinned, or a new one from the pin (the other shares' chunks
    /// counted as done). Any other download's basis is `found`.
    static func shareBasis(_ found: LocalState, paths: DownloadPaths) throws(DownloadError) -> LocalState {
        guard let share = paths.share else { return found }
        if case .completed = found { return found }
        guard let pin = try SharedObject.readPin(paths) else {
            throw DownloadError(.localIO, "internal: share \(share) of \(paths.target) started before its pin")
        }
        switch found {
        case .completed:
            return found
        case .fresh:
            return .resuming(SharedObject.freshMap(pin, share: share), samples: [])
        case .resuming(let map, _):
            guard map.layout == pin.layout, map.identity.compare(pin.identity) == .same else {
                throw DownloadError(
                    .objectChanged,
                    "\(paths.map), share \(share)'s map, is of another version of the object than the other shares "
                        + "agreed on (\(paths.pin ?? ""))", remedy: .restartShares)
            }
            return found
        }
    }

    /// Whether `state` is a file Swoop completed whose record names another version than the
    /// listing the request comes from (another size or ETag).
    static func isOlderVersion(_ state: PartialState, request: DownloadRequest) -> Bool {
        guard let listed = request.expectedETag, let listedSize = request.expectedSize,
            case .complete(let size, let record?) = state
        else { return false }
        return listedSize != size || !ETagForm.same(record.etag, listed)
    }

    /// The result of a download found complete from what its request says alone: a file an
    /// earlier run completed, whose record has the size and ETag a listing gave
    /// (``DownloadRequest/expectedSize`` and ``DownloadRequest/expectedETag``, compared in one
    /// normal form), unless ``Configuration/Files/rechecksCompleteFiles`` or an expected checksum
    /// asks for more. `nil`: the probe decides, as for any other run.
    static func completeAsListed(
        _ state: PartialState, request: DownloadRequest, path: String, files: Configuration.Files
    ) -> DownloadResult? {
        guard !files.rechecksCompleteFiles, !files.overwritesExistingFile, request.expectedChecksum == nil,
            case .complete(let size, let record?) = state, let listedSize = request.expectedSize, listedSize == size,
            record.size == size, ETagForm.same(record.etag, request.expectedETag)
        else { return nil }
        return DownloadResult(
            path: path, bytes: size, bytesReceived: 0, bytesResumed: size, duration: .zero, connectionsUsed: 0,
            requests: 0, retries: 0, etag: record.etag, alreadyComplete: true)
    }
}
