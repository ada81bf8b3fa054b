import Swoop
import Testing

@testable import SwoopCLI

/// The command's lines, worded once: counts agree with their nouns, units are right.
@Suite("Messages")
struct MessagesTests {
    @Test("a saved file's line: one connection, one retry; several of each")
    func savedLine() {
        let one = Messages.saved(
            path: "./a.bin", bytes: 1, seconds: 0.5, bytesPerSecond: 2, connections: 1, resumed: 0, retries: 1)
        #expect(one == "saved ./a.bin (1 B) in 0.50 s, 2 B/s, 1 connection, 1 retry")
        let many = Messages.saved(
            path: "./b.bin", bytes: 3 << 20, seconds: 1, bytesPerSecond: 3 * 1_048_576, connections: 8,
            resumed: 1 << 20,
            retries: 2)
        #expect(many == "saved ./b.bin (3.00 MiB) in 1.00 s, 3.00 MiB/s, 8 connections, 1.00 MiB resumed, 2 retries")
    }
}

extension MessagesTests {
    @Test("lists and prefixes: one file, one entry, one source")
    func listLines() {
        #expect(Messages.listStarting(files: 1, jobs: 8, share: nil) == "downloading 1 file, 8 at a time")
        #expect(
            Messages.listStarting(files: 3, jobs: 2, share: "shard 0/2: 3 of 5 entries")
                == "downloading 3 files, 2 at a time (shard 0/2: 3 of 5 entries)")
        #expect(
            Messages.listSummary(
                files: 1, succeeded: 1, alreadyComplete: 1, failed: 0, bytesReceived: 0, seconds: 0)
                == "1 file: 1 done (1 already complete), 0 failed; 0 B received in 0.0 s")
        #expect(
            Messages.listSummary(
                files: 2, succeeded: 1, alreadyComplete: 0, failed: 1, bytesReceived: 2 << 20, seconds: 2)
                == "2 files: 1 done, 1 failed; 2.00 MiB received in 2.0 s (1.00 MiB/s)")
        #expect(Messages.shardShare(index: 0, count: 1, included: 1, entries: 1) == "shard 0/1: 1 of 1 entry")
        #expect(Messages.shardShare(index: 1, count: 2, included: 2, entries: 4) == "shard 1/2: 2 of 4 entries")
        #expect(Messages.sourcesUsed(1, of: 1) == ", 1 of 1 source")
        #expect(Messages.sourcesUsed(1, of: 3) == ", 1 of 3 sources")
    }

    @Test("get, bench and status: sizes in units, counts with their nouns")
    func otherLines() {
        #expect(
            Messages.alreadyComplete(path: "./a.bin", bytes: 1)
                == "./a.bin is already complete (1 B); nothing to download")
        #expect(Messages.benchLine(connections: 1, figure: "x") == "  1 connection: x")
        #expect(Messages.benchLine(connections: 16, figure: "x") == "  16 connections: x")
        #expect(Messages.statusSize(1) == "  size           1 byte")
        #expect(Messages.statusSize(0) == "  size           0 bytes")
    }

    @Test("a fix is given in the command's terms: the proxy's names the flag and the variables")
    func remedies() {
        #expect(DownloadError.Remedy.checkProxy.commandLineText.contains("--proxy"))
        #expect(DownloadError.Remedy.checkProxy.commandLineText.contains("http_proxy"))
        #expect(!DownloadError.Remedy.checkProxy.commandLineText.contains("Configuration."))
    }
}
