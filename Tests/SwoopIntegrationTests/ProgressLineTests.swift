import Foundation
import SwoopTestOrigin
import Testing

/// The progress line leaves nothing behind: not on a rerun of a finished download, and not when
/// the terminal is narrower than the line. A terminal is a pseudo-terminal from script(1).
@Suite("Progress line")
struct ProgressLineTests {
    /// Runs `swoop arguments` on a pseudo-terminal `columns` wide, in `directory`; what the
    /// terminal received.
    private func onTerminal(_ arguments: [String], columns: Int, in directory: URL) async throws -> String {
        let output = directory.appendingPathComponent("terminal.out").path
        let command =
            "stty cols \(columns) rows 24; exec "
            + ([CLI.executable] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = try ChildProcess(
            executable: "/usr/bin/script", arguments: ["-qec", command, "/dev/null"], directory: directory.path,
            stdout: output, stderr: output)
        guard let status = await process.wait(timeout: .seconds(120)) else {
            process.signal(SIGKILL)
            throw TestFailure("swoop \(arguments) on a terminal did not end within 120 s")
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(status == 0, "terminal: \(text)")
        try? FileManager.default.removeItem(atPath: output)
        return text
    }

    @Test("a rerun of a finished download says so and draws no progress, on a terminal or not")
    func rerunOfFinishedDownload() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 101), at: "/done.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let first = try await CLI.run([origin.url("/done.bin")], in: scratch.url)
            #expect(first.status == 0, "stderr: \(first.stderr)")

            let again = try await CLI.run([origin.url("/done.bin")], in: scratch.url)
            #expect(again.status == 0)
            #expect(
                again.stderr == "./done.bin is already complete (1.00 MiB); nothing to download\n",
                "stderr: \(again.stderr)")

            let terminal = try await onTerminal([origin.url("/done.bin")], columns: 80, in: scratch.url)
            #expect(terminal.contains("./done.bin is already complete (1.00 MiB); nothing to download"), "\(terminal)")
            #expect(!terminal.contains("conn") && !terminal.contains("%"), "a progress line was drawn: \(terminal)")
        }
    }

    @Test("on a terminal narrower than the line, each progress line is cut to fit, so none wraps and stays")
    func narrowTerminal() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3 << 20, seed: 102), at: "/slow.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let terminal = try await onTerminal([origin.url("/slow.bin"), "-c", "2"], columns: 40, in: scratch.url)
            // Each redraw starts with "\r" and erase-line; what follows up to the next "\r" is one line.
            let drawn = terminal.components(separatedBy: "\r\u{1B}[2K").dropFirst().map {
                $0.prefix { $0 != "\r" && $0 != "\n" }
            }.filter { !$0.hasPrefix("saved ") && !$0.isEmpty }
            #expect(!drawn.isEmpty, "no progress line was drawn: \(terminal)")
            for line in drawn {
                #expect(line.count < 40, "wider than the terminal: \(line)")
            }
            #expect(terminal.contains("saved ./slow.bin"), "\(terminal)")
        }
    }
}
