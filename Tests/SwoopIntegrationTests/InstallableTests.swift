import Foundation
import Testing

/// What an installed swoop says about itself: its version line.
@Suite("Installable: version, manual pages, completions")
struct InstallableTests {
    @Test("swoop --version names the version and the commit it was built from, or says it was not told")
    func versionLine() async throws {
        let run = try await CLI.run(["--version"], in: URL(fileURLWithPath: "/"))
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let line = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pattern = #/swoop \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-modified)?|unknown: [a-z ]+)\)/#
        #expect(line.wholeMatch(of: pattern) != nil, "--version said: \(line)")
    }
}
