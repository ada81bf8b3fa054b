import CSwoopBuildInfo
import Swoop

/// What `swoop --version` says: the version (``Downloader/version``, a semantic version raised
/// by hand when a release is made) and the commit the binary was built from.
enum BuildInfo {
    /// The commit (12 hex digits, "-modified" when the work tree had changes); `nil` when the
    /// build was not told (a plain `swift build`, without the scripts).
    static var commit: String? {
        let commit = String(cString: swoop_build_commit())
        return commit.isEmpty ? nil : commit
    }

    /// "swoop 0.1.0 (commit 0123456789ab)".
    static var versionLine: String {
        "swoop \(Downloader.version) (commit \(commit ?? "unknown: built without the scripts that record it"))"
    }
}
