import SwoopStore
import SwoopCurl

// The pure policies take values; these read them from a configuration.

extension TransferPolicy {
    init(_ configuration: Downloader.Configuration) {
        self.init(minimumSegmentSize: configuration.tuning.minimumSegmentSize)
    }
}

/// What every exchange of one download reads from its configuration, made once for the download
/// (not once per probe, mirror check and transfer): the exchange options — timeouts, TLS, the
/// proxy, with the environment's proxy variables read once — and the failure policy. Made off the
/// transfer thread: on the preparation queue, or once for a whole list by the list's task (reading
/// the environment is not free: made for each small file, it was 2% of a list's processor time).
final class ExchangeSettings: Sendable {
    let configuration: Downloader.Configuration
    let options: TransferOptions
    /// The probe's: `options` with a receive buffer of at most 16 KiB. The first response is at
    /// most about a MiB, and for a list of small files it is the whole file: libcurl's own default
    /// buffer (16 KiB) costs it nothing, and each buffer is memory held per file in flight. 200
    /// files of 256 KiB, 64 at a time: peak RSS 38 MB with 64 KiB buffers, 31.5 MB with 16 KiB,
    /// the same processor time (4 KiB: 30.3 MB, a third more CPU). Made here, once: changed in
    /// each probe, the options were copied for each file.
    let probeOptions: TransferOptions
    let failures: FailurePolicy
    /// What a transfer's machine reads, among it the single response's confirmation rule
    /// (``TransferMachine/Settings/confirmsOneResponseAfter``), which a small object kept whole
    /// in the probe's response follows too (``DownloadSession+Whole``).
    let machine: TransferMachine.Settings

    init(_ configuration: Downloader.Configuration) {
        self.configuration = configuration
        options = TransferOptions(configuration)
        var probeOptions = options
        probeOptions.receiveBufferSize = min(options.receiveBufferSize, 16 << 10)
        self.probeOptions = probeOptions
        failures = FailurePolicy(configuration)
        machine = TransferMachine.Settings(
            policy: TransferPolicy(configuration), failures: failures,
            hedgesSlowTail: configuration.tuning.hedgesSlowTail,
            replacesSlowConnections: configuration.tuning.replacesSlowConnections,
            sendsNothing: configuration.tuning.faults.transferSendsNothing)
    }
}

extension FailurePolicy {
    init(_ configuration: Downloader.Configuration) {
        self.init(
            baseDelay: configuration.retry.baseDelay, maxDelay: configuration.retry.maxDelay,
            maxTries: configuration.retry.maxTries, maxOutage: configuration.retry.maxOutage)
    }
}

extension QuietWatch {
    /// The timeouts and every retry's backoff; while a server is down, the longest outage too.
    init(_ configuration: Downloader.Configuration) {
        let policy = FailurePolicy(configuration)
        let limit = policy.longestQuietPeriod(
            connectTimeout: configuration.timeout.connect, stallTimeout: configuration.timeout.stall)
        self.init(limit: limit, outageLimit: limit + policy.maxOutage)
    }
}

extension PartialState.Rules {
    init(_ configuration: Downloader.Configuration) {
        self.init(
            createsMissingDirectories: configuration.files.createsMissingDirectories,
            overwritesTarget: configuration.files.overwritesExistingFile, resumes: configuration.files.resumes)
    }
}
