import Foundation
import Testing

/// What scripts/install and scripts/package put beside the binary, made from the binary built for
/// the tests: its version line, the manual pages swoop-manual writes from its argument
/// definitions, and the completions scripts/completions writes (scripts/check-install does the
/// same with the release binary, installed for real).
@Suite("Installable: version, manual pages, completions")
struct InstallableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `swoop-manual`, beside `swoop` in the build directory.
    static var manualTool: String {
        URL(fileURLWithPath: CLI.executable).deletingLastPathComponent().appendingPathComponent("swoop-manual").path
    }

    /// Runs `bash -c script` with `arguments` as $1...; its status, standard output and error.
    func bash(_ script: String, _ arguments: [String] = []) async throws -> (status: Int32, out: String, err: String) {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let process = try ChildProcess(
            executable: "/bin/bash", arguments: ["--norc", "--noprofile", "-c", script, "bash"] + arguments,
            stdout: scratch.path("out"), stderr: scratch.path("err"))
        guard let status = await process.wait(timeout: .seconds(120)) else {
            process.signal(SIGKILL)
            throw TestFailure("bash -c \(script) did not end within 120 s")
        }
        let read = { (name: String) in (try? String(contentsOfFile: scratch.path(name), encoding: .utf8)) ?? "" }
        return (status, read("out"), read("err"))
    }

    @Test("swoop --version names the version and the commit it was built from, or says it was not told")
    func versionLine() async throws {
        let run = try await CLI.run(["--version"], in: URL(fileURLWithPath: "/"))
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let line = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pattern = #/swoop \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-modified)?|unknown: [a-z ]+)\)/#
        #expect(line.wholeMatch(of: pattern) != nil, "--version said: \(line)")
    }

    @Test("the manual pages: swoop.1 with every subcommand's options, one page per subcommand, dated")
    func manualPages() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let written = try await bash(
            #""$1" --experimental-dump-help | "$2" "$3" 2026-01-02"#,
            [CLI.executable, Self.manualTool, scratch.url.path])
        #expect(written.status == 0, "stderr: \(written.err)")
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).sorted()
        #expect(names == ["swoop-bench.1", "swoop-get.1", "swoop-status.1", "swoop.1"], "\(names)")

        let page = try String(contentsOfFile: scratch.path("swoop.1"), encoding: .utf8)
        #expect(page.contains(".Dd \"January 2, 2026\""))
        let shown = try await bash(#"MANWIDTH=200 man -l "$1""#, [scratch.path("swoop.1")])
        #expect(shown.status == 0, "man -l: \(shown.err)")
        for text in ["-c, --connections connections", "--max-connections", "--proxy URL", "(default: 64)", "bench"] {
            #expect(shown.out.contains(text), "swoop.1 as man shows it lacks \(text):\n\(shown.out)")
        }
        let get = try await bash(#"MANWIDTH=200 man -l "$1""#, [scratch.path("swoop-get.1")])
        #expect(get.out.contains("swoop get") && get.out.contains("--connections"), "\(get.out)")
        #expect(!get.err.contains("warning"), "mdoc warnings: \(get.err)")
    }

    @Test("bash completes swoop --conn<TAB> to --connections, also after a URL (get is the default)")
    func bashCompletion() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let root = Self.root.path
        let made = try await bash(#""$1/scripts/completions" "$2" "$3""#, [root, CLI.executable, scratch.url.path])
        #expect(made.status == 0, "stderr: \(made.err)")
        let complete = #"""
            source "$1"
            function=$(complete -p swoop | sed -E "s/.* -F ([^ ]+) .*/\1/")
            shift
            for line in "$@"; do
                read -ra COMP_WORDS <<<"$line"
                COMP_LINE=$line COMP_POINT=${#line} COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) COMPREPLY=()
                "$function" swoop "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
                echo "$line -> ${COMPREPLY[*]}"
            done
            """#
        let lines = [
            "swoop --conn", "swoop https://example.com/f.iso --max-c", "swoop get --conn", "swoop bench --dur",
            "swoop st",
        ]
        let run = try await bash(complete, [scratch.path("swoop.bash")] + lines)
        #expect(run.status == 0, "stderr: \(run.err)")
        let answers = run.out.split(separator: "\n").map(String.init)
        #expect(
            answers == [
                "swoop --conn -> --connections --connect-timeout",
                "swoop https://example.com/f.iso --max-c -> --max-connections",
                "swoop get --conn -> --connections --connect-timeout",
                "swoop bench --dur -> --duration",
                "swoop st -> status",
            ], "\(answers)")

        // The zsh and fish scripts exist and parse (each shell checks its own, where installed).
        for (file, shell) in [("_swoop", "zsh"), ("swoop.fish", "fish")] {
            #expect(FileManager.default.fileExists(atPath: scratch.path(file)))
            let check = try await bash(#"! command -v "$1" >/dev/null || "$1" -n "$2""#, [shell, scratch.path(file)])
            #expect(check.status == 0, "\(shell) -n \(file): \(check.err)")
        }
    }
}
