extension Downloader.Configuration {
    /// How one download spreads its bytes over its connections. The defaults suit most links;
    /// these are for measuring and for unusual servers.
    public struct Tuning: Sendable {
        /// The smallest byte range worth its own connection; small files are not over-split.
        public var minimumSegmentSize: Int64 = 1 << 20
        /// At the end of a download, when connections are idle, fetch a tail that an idle connection
        /// would clearly finish sooner (a straggler, a connection stalled in retransmissions) on
        /// that one too, and keep whichever is first. No byte is fetched more than twice.
        public var hedgesSlowTail = true
        /// Close a connection far slower than the others (under a quarter of the median rate)
        /// and open a new one in its place.
        public var replacesSlowConnections = true
        /// libcurl's receive buffer per connection (`CURLOPT_BUFFERSIZE`).
        public var receiveBufferSize = 128 << 10
        /// Faults that tests inject to reach states nothing else reaches on demand.
        var faults = Faults()

        public init() {}
    }

    struct Faults: Sendable {
        /// After the probe, the transfer sends no request and sets no timer: a download stuck
        /// with nothing in flight, for the watchdog to end.
        var transferSendsNothing = false
        /// Runs on the opening queue where a part file is about to be created, emptied or reserved:
        /// a test holds it there to stand for a disk that does not answer.
        var beforePartFileOpens: (@Sendable (_ part: String) -> Void)?
        /// Runs on the publish queue before each group of files is committed: a test holds a
        /// group there to look at what its files hold while they wait.
        var beforeEachPublishGroup: (@Sendable () -> Void)?
        /// Told each session as it starts, on the transfer thread: a test keeps a weak reference
        /// to see when it is let go.
        var sessionStarted: (@Sendable (AnyObject) -> Void)?
    }
}
