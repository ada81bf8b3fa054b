/// A snapshot of a download in progress.
public struct DownloadProgress: Sendable, Equatable {
    /// Bytes of the object present in the partial file, including bytes resumed from an earlier run.
    public var bytesDone: Int64
    /// The object's size, when the server said.
    public var totalBytes: Int64?
    /// The recent receive rate, in bytes per second.
    public var bytesPerSecond: Double
    /// Connections transferring right now.
    public var activeConnections: Int
    /// Time since this run of the download started.
    public var elapsed: Duration
    /// With several URLs: each source's bytes and state so far (see ``DownloadResult/sources``).
    public var sources: [DownloadResult.Source] = []

    /// `bytesDone / totalBytes`, or `nil` when the size is unknown.
    public var fractionCompleted: Double? {
        guard let total = totalBytes else { return nil }
        return total == 0 ? 1 : Double(bytesDone) / Double(total)
    }

    /// The expected time to completion at the recent rate.
    public var estimatedTimeRemaining: Duration? {
        guard let total = totalBytes, bytesPerSecond > 0 else { return nil }
        return .seconds(Double(max(0, total - bytesDone)) / bytesPerSecond)
    }
}
