import SwoopCurl

/// Every URL of one download, the one place they are held: each source as it was asked for (its
/// identity: what the segment map names, what a resume is matched by) and as it is used now (a
/// fresh URL from ``DownloadRequest/urlProvider`` replaces the first source's). The probe, a
/// restart, the refresher and the checkpoint read it here, so a refresh is seen by all of them;
/// the transfer's ``Source``s follow it. Transfer thread only.
final class SourceList {
    struct Entry {
        /// The URL as given (or as the address lookup pinned it).
        let asked: RemoteURL
        /// The URL requests go to now.
        var current: RemoteURL
    }

    private(set) var entries: [Entry]

    init(first: RemoteURL, mirrors: [RemoteURL]) {
        entries = ([first] + mirrors).map { Entry(asked: $0, current: $0) }
    }

    /// The first source: the one probed, whose map is kept.
    var first: Entry { entries[0] }

    /// The other sources' URLs, as in use now.
    var mirrors: [RemoteURL] { entries.dropFirst().map(\.current) }

    /// A resumed map was written for the source asked as `redacted`: that one goes first (its
    /// validators are that source's).
    func putFirst(named redacted: String) {
        guard entries[0].asked.redacted != redacted,
            let index = entries.firstIndex(where: { $0.asked.redacted == redacted })
        else { return }
        entries.swapAt(0, index)
    }

    /// The provider gave a fresh URL for the first source.
    func refreshed(_ url: RemoteURL) {
        entries[0].current = url
    }
}
