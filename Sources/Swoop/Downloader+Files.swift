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
    public enum ObjectChangePolicy: Sendable, Equatable {
        /// Discard what was downloaded and start over once.
        case restart
        /// Fail with ``DownloadError/Kind/objectChanged``.
        case fail
    }
}
