import ArgumentParser
import Swoop

/// What `get` does with what is already at the target: a finished file, a partial download and its saved state.
struct ExistingFileOptions: ParsableArguments {
    @Flag(name: [.short, .long], help: "Replace the target file if it exists.")
    var force = false

    @Flag(name: .long, help: "Discard any partial download and start over.")
    var noResume = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "When the object changed on the server (its validators went, or two responses' bytes differ), also since a "
                + "partial or finished download: start over on the new version (up to --max-tries times) or fail."))
    var onChange: Downloader.Configuration.ObjectChangePolicy = .restart

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "With -r: confirm each finished file with the store (one small request each) even when the listing's size "
                + "and ETag match what it recorded."))
    var recheck = false

    @Option(name: .long, help: "Seconds between segment-map checkpoints (0 turns them off).")
    var checkpointInterval: Double = 1

    func validate() throws {
        guard checkpointInterval >= 0, checkpointInterval.isFinite else {
            throw ValidationError("--checkpoint-interval must be 0 or a positive number of seconds")
        }
    }

    /// These choices written into `configuration`.
    func apply(to configuration: inout Downloader.Configuration) {
        configuration.files.overwritesExistingFile = force
        configuration.files.resumes = !noResume
        configuration.files.rechecksCompleteFiles = recheck
        configuration.files.onObjectChange = onChange
        configuration.files.checkpointInterval =
            checkpointInterval > 0 ? .milliseconds(Int64(checkpointInterval * 1000)) : nil
    }
}
