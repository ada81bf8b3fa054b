import Swoop

/// The lines `swoop` prints about what it did, worded in one place: every count goes through
/// ``Wording`` (so no line says "1 files" or "1 bytes"), sizes and rates through ``Format``.
/// Failures are worded by the library (``DownloadError/reason``) and their fixes in
/// ErrorMessages.swift. Tested in SwoopCLITests.
enum Messages {
    // MARK: get

    static func alreadyComplete(path: String, bytes: Int64) -> String {
        "\(path) is already complete (\(Format.bytes(bytes))); nothing to download"
    }

    /// "saved ./a.bin (2.86 MiB) in 0.01 s, 198.6 MiB/s, 1 connection, 1 retry".
    static func saved(
        path: String, bytes: Int64, seconds: Double, bytesPerSecond: Double, connections: Int, resumed: Int64,
        retries: Int
    ) -> String {
        var line = "saved \(path) (\(Format.bytes(bytes))) in \(Format.fixed(seconds, digits: 2)) s"
        line += ", \(Format.rate(bytesPerSecond)), \(Wording.count(connections, "connection"))"
        if resumed > 0 { line += ", \(Format.bytes(resumed)) resumed" }
        if retries > 0 { line += ", \(Wording.count(retries, "retry", plural: "retries"))" }
        return line
    }

    /// ", 1 of 2 sources".
    static func sourcesUsed(_ used: Int, of total: Int) -> String {
        ", \(used) of \(Wording.count(total, "source"))"
    }

    // MARK: streams (-o -)

    /// Appended to a failure that ended a stream before its last byte.
    static let streamIncomplete = " (the stream to standard output is incomplete)"

    static let streamInterrupted =
        "interrupted; a stream to standard output cannot resume: run the command again to start over"

    // MARK: lists (-i) and prefixes (-r)

    /// "downloading 1 file, 8 at a time (shard 0/2: ...)".
    static func listStarting(files: Int, jobs: Int, share: String?) -> String {
        "downloading \(Wording.count(files, "file")), \(jobs) at a time" + (share.map { " (\($0))" } ?? "")
    }

    static func prefixStarting(prefix: String, folder: String, jobs: Int, share: String?) -> String {
        "downloading the objects under \(prefix) into \(folder)/, \(jobs) at a time" + (share.map { " (\($0))" } ?? "")
    }

    /// "3 files: 2 done (1 already complete), 1 failed; 4.00 MiB received in 1.2 s (3.33 MiB/s)".
    static func listSummary(
        files: Int, succeeded: Int, alreadyComplete: Int, skipped: Int = 0, failed: Int, bytesReceived: Int64,
        seconds: Double
    ) -> String {
        var line = "\(Wording.count(files, "file")): \(succeeded) done"
        if alreadyComplete > 0 { line += " (\(alreadyComplete) already complete)" }
        if skipped > 0 { line += ", \(skipped) skipped" }
        line += ", \(failed) failed; \(Format.bytes(bytesReceived)) received in \(Format.fixed(seconds, digits: 1)) s"
        if seconds > 0 { line += " (\(Format.rate(Double(bytesReceived) / seconds)))" }
        return line
    }

    static let listInterrupted = "interrupted; run the same command to resume"

    /// "shard 0/2: 1 of 3 entries, 2.00 MiB, balanced by size=".
    /// What one share of an object fetched in shares did (`--shard K/N` on one URL).
    static func shareDone(_ result: ShareResult) -> String {
        var line = "share \(result.share) of \(result.path)"
        if let run = result.download {
            line += ": \(Format.bytes(result.shareBytes)) in \(Format.fixed(Format.seconds(run.duration), digits: 2)) s"
            line += ", \(Format.rate(run.bytesPerSecond)), \(Wording.count(run.connectionsUsed, "connection"))"
            if run.bytesResumed > 0 { line += ", \(Format.bytes(run.bytesResumed)) resumed" }
        } else if !result.alreadyComplete {
            line += ": complete already"
        }
        if result.alreadyComplete { return line + ": the object is complete already" }
        if result.finishedObject {
            line += "; every share complete: checked \(Wording.count(result.seamsChecked, "seam")), saved "
            line += "\(result.path) (\(Format.bytes(result.objectBytes)))"
        } else if result.sharesComplete == result.share.count {
            line += "; every share complete: another task saved \(result.path)"
        } else {
            line += "; \(result.sharesComplete) of \(result.share.count) shares complete: the last to finish saves "
            line += result.path
        }
        return line
    }

    static func shardShare(index: Int, count: Int, included: Int, entries: Int) -> String {
        "shard \(index)/\(count): \(included) of \(Wording.count(entries, "entry", plural: "entries"))"
    }

    // MARK: bench

    /// "  1 connection: 80.0 MiB/s (...)".
    static func benchLine(connections: Int, figure: String) -> String {
        "  \(Wording.count(connections, "connection")): \(figure)"
    }

    // MARK: status

    /// "  size           1 byte".
    static func statusSize(_ bytes: Int64) -> String {
        "  size           \(Wording.bytes(bytes))"
    }
}
