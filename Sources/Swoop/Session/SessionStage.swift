import SwoopStore

/// Where a download is (``DownloadSession``), and what that stage owns.
enum SessionStage {
    /// Reading the disk, or waiting for the sink to close before starting over.
    case starting
    case probing(Prober)
    case transferring(Transfer)
    case finalizing(Finishing)
    case stopped

    /// A transfer under way: its run, the store its bytes go to, the object, and the verifier.
    struct Transfer {
        let run: TransferRun
        let store: DownloadStore
        let object: RemoteObject
        let verifier: ObjectVerifier?
    }

    /// Every byte is in the sink: the object of `size` bytes is being checked and published.
    struct Finishing {
        let run: TransferRun?
        let store: DownloadStore?
        let object: RemoteObject
        let verifier: ObjectVerifier?
        let size: Int64
    }
}

extension SessionStage {
    /// The store of a transfer, or of an object being finalized after one.
    var store: DownloadStore? {
        switch self {
        case .transferring(let transfer): transfer.store
        case .finalizing(let finishing): finishing.store
        case .starting, .probing, .stopped: nil
        }
    }

    var run: TransferRun? {
        switch self {
        case .transferring(let transfer): transfer.run
        case .finalizing(let finishing): finishing.run
        case .starting, .probing, .stopped: nil
        }
    }

    var object: RemoteObject? {
        switch self {
        case .transferring(let transfer): transfer.object
        case .finalizing(let finishing): finishing.object
        case .starting, .probing, .stopped: nil
        }
    }
}
