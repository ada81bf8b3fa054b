import FoundationEssentials
import Swoop

/// The `--json` summary.
struct Summary: Encodable {
    var ok: Bool
    var path: String
    var bytes: Int64?
    var seconds: Double?
    var bytesPerSecond: Double?
    var connections: Int?
    /// The count the adaptive default settled on (absent with `-c`).
    var settledConnections: Int?
    var requests: Int?
    var retries: Int?
    var resumedBytes: Int64?
    /// Bytes received to compare with the bytes of neighbouring responses (included in the rate).
    var comparedBytes: Int64?
    var receivedBytes: Int64?
    var alreadyComplete: Bool?
    var etag: String?
    var lastModified: String?
    /// Times the object changed on the server and the download started over, and the bytes it
    /// held then (fetched again); absent when it did not change.
    var objectChanges: Int?
    var refetchedBytes: Int64?
    /// With several URLs: each source's bytes and state.
    var sources: [SourceSummary]?
    /// The digests the file matched: `{"algorithm", "value" (hex), "source"}`, the source being
    /// "expected checksum" or the server's header.
    var verified: [VerifiedSummary]?
    /// With `--shard K/N` on one URL: this task's share ("K/N"), its bytes, the shares complete
    /// when it last looked, and whether it published the object (after checking the seams).
    var share: String?
    var shareBytes: Int64?
    var sharesComplete: Int?
    var finishedObject: Bool?
    var seamsChecked: Int?
    /// Digests checked by combining the CRCs each share recorded of its stripes (no second read).
    var digestsFromShares: Int?
    var error: String?
    var errorKind: String?
    var exitCode: Int32?

    init(_ result: ShareResult, url: String) {
        if let run = result.download {
            self.init(run, url: url)
        } else {
            self.init(path: result.path)
            alreadyComplete = result.alreadyComplete
        }
        bytes = result.objectBytes
        share = result.share.description
        shareBytes = result.shareBytes
        sharesComplete = result.sharesComplete
        finishedObject = result.finishedObject
        seamsChecked = result.finishedObject ? result.seamsChecked : nil
        digestsFromShares = result.finishedObject ? result.digestsFromShares : nil
        if !result.verified.isEmpty { verified = result.verified.map(VerifiedSummary.init) }
    }

    init(_ result: DownloadResult, url: String) {
        ok = true
        path = result.path
        bytes = result.bytes
        seconds = Format.seconds(result.duration)
        bytesPerSecond = result.bytesPerSecond
        connections = result.connectionsUsed
        settledConnections = result.connectionsSettled
        requests = result.requests
        retries = result.retries
        resumedBytes = result.bytesResumed
        comparedBytes = result.bytesCompared
        receivedBytes = result.bytesReceived
        alreadyComplete = result.alreadyComplete
        etag = result.etag
        lastModified = result.lastModified
        if result.objectChanges > 0 {
            objectChanges = result.objectChanges
            refetchedBytes = result.bytesRefetched
        }
        sources = result.sources.isEmpty ? nil : result.sources.map(SourceSummary.init)
        verified = result.verified.isEmpty ? nil : result.verified.map(VerifiedSummary.init)
    }

    private init(path: String) {
        ok = true
        self.path = path
    }

    init(error: DownloadError, path: String) {
        ok = false
        self.path = path
        self.error = error.commandLineMessage
        errorKind = error.kind.summary
        exitCode = ExitStatus(error).rawValue
    }
}

/// One source in the `--json` summary.
struct SourceSummary: Encodable {
    var url: String
    /// The address its connections went to, for one of several addresses of the URL's host.
    var address: String?
    var bytes: Int64
    /// "used", "dropped" or "checking".
    var state: String
    var reason: String?

    init(_ source: DownloadResult.Source) {
        url = source.url
        address = source.address
        bytes = source.bytes
        state = source.droppedBecause != nil ? "dropped" : source.isChecking ? "checking" : "used"
        reason = source.droppedBecause
    }
}

/// One digest in the `--json` summary.
struct VerifiedSummary: Encodable {
    var algorithm: String
    var value: String
    var source: String

    init(_ digest: VerifiedDigest) {
        algorithm = digest.checksum.algorithm.rawValue
        value = digest.checksum.hex
        source = Format.source(of: digest)
    }
}

/// `value` as one line of JSON.
func jsonText(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
}

func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    if let data = try? encoder.encode(value) {
        print(String(decoding: data, as: UTF8.self))
    }
}
