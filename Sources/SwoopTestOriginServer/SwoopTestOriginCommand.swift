import ArgumentParser
import SwoopTestOrigin

/// `swoop-test-origin`: the test origin as a process, for scripts and benchmarks.
@main
struct SwoopTestOriginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swoop-test-origin",
        abstract: "An HTTP/1.1 origin with deterministic content and fault switches.",
        subcommands: [Serve.self, WritePayload.self]
    )
}

/// A byte count or rate with an optional binary suffix: `512`, `64k`, `10m`, `1.5g`.
struct ByteCount: ExpressibleByArgument, Sendable {
    var value: Int64

    init?(argument: String) {
        let text = argument.lowercased()
        let multipliers: [Character: Double] = ["k": 1024, "m": 1024 * 1024, "g": 1024 * 1024 * 1024]
        var digits = Substring(text)
        var multiplier = 1.0
        if let last = text.last, let factor = multipliers[last] {
            digits = digits.dropLast()
            multiplier = factor
        }
        guard let number = Double(digits), number >= 0, number * multiplier < 9.2e18 else { return nil }
        value = Int64((number * multiplier).rounded())
    }
}
