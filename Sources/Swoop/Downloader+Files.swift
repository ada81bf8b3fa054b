extension Downloader.Configuration {
    /// What a download does with what is at and beside its target: the finished file, a partial
    /// download (its part file and segment map in `.swoop/`) and the directory.
    public struct Files: Sendable {
        /// Resume from a partial download left by an earlier run, when it is the same object.
        public var resumes = true
        /// How often the segment map is checkpointed while bytes arrive; `nil` turns checkpoints off
        /// (a crash then loses the partial download).
        public var checkpointInterval: Duration? = .seconds(1)
        /// What to do when the object changes on the server mid-download or between runs.
        public var onObjectChange: ObjectChangePolicy = .restart
        /// Replace an existing file at the target path instead of failing.
        public var overwritesExistingFile = false
        /// Create the target's directory and its missing parents (mode 0755 less the umask)
        /// instead of failing with ``DownloadError/Remedy/createDirectory``.
        public var createsMissingDirectories = true
        /// Ask the server about a file an earlier run completed even when the request's listed
        /// size and ETag (``DownloadRequest/expectedSize``, ``DownloadRequest/expectedETag``)
        /// already match its record. `false` (the default) takes such a file as complete with no
        /// request, as `aws s3 sync` decides from a listing; a request without a listed ETag is
        /// always confirmed with the server.
        public var rechecksCompleteFiles = false

        public init() {}
    }

    /// What to do when the object on the server changes mid-download.
    /// What a download does when its object changed on the server: its pinned validators went
    /// (four answers in a row under others, on new connections), or two responses' bytes differed.
    public enum ObjectChangePolicy: Sendable, Equatable {
        /// Discard what was downloaded and start over on the new version, within
        /// ``RetryPolicy/maxTries``; a finished file of the earlier version is replaced once the
        /// new one is whole.
        case restart
        /// Fail with ``DownloadError/Kind/objectChanged``, keeping nothing (a finished file of the
        /// earlier version is left as it was).
        case fail
    }
}
