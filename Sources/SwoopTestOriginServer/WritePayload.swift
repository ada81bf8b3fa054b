import ArgumentParser
import SwoopTestOrigin

extension SwoopTestOriginCommand {
    /// Writes an object's bytes to a file, e.g. to give nginx the same content.
    struct WritePayload: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "payload",
            abstract: "Write the bytes of an object (Payload stream SEED, SIZE bytes) to a file."
        )

        @Option(help: "The payload seed.")
        var seed: UInt64 = 1

        @Option(help: "The size in bytes (k/m/g suffixes).")
        var size: ByteCount

        @Option(help: "The file to create or overwrite.")
        var output: String

        func run() throws {
            try Payload.write(toFile: output, seed: seed, size: size.value)
        }
    }
}
