import SwoopStore

extension DownloadError {
    /// This error as it is true when a stop keeps nothing: a fix that says "resume" becomes "start
    /// again", with why nothing could be kept (`store`: the download's, if it had one;
    /// `streaming`: its bytes went to a reader, in order).
    func nothingKept(store: DownloadStore?, streaming: Bool = false) -> DownloadError {
        let remedy: DownloadError.Remedy
        switch self.remedy {
        case .resume?: remedy = .startAgain
        case .freeSpaceAndResume?: remedy = .freeSpace
        default: return self
        }
        let why =
            if streaming {
                " (a stream keeps nothing to resume from)"
            } else if let store {
                store.plan == nil
                    ? " (the server does not support ranges, so a download from it cannot resume)"
                    : " (a file that arrives in one response keeps no partial state)"
            } else {
                ""
            }
        return replacing(reason: reason + why, remedy: remedy)
    }
}
