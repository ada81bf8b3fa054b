import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Where a download writes: missing directories are created, one process per target (the
/// target's lock), and errors about files that vanished say so.
@Suite("Targets: directories and the one-writer lock")
struct TargetTests {
    // MARK: Directories

    @Test("-d creates the directory and its parents (mode 0755 less the umask)")
    func dashDCreatesParents() async throws {
        let nginx = try await Nginx.start()
        defer { nginx.stop() }
        let small = try await nginx.addFile("small.bin", size: 3000, seed: 1)
        let large = try await nginx.addFile("large.bin", size: 5 << 20, seed: 2)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let one = try await CLI.run(["get", nginx.url("/small.bin"), "-d", "new/a/b", "-q"], in: scratch.url)
        #expect(one.status == 0, "stderr: \(one.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("new/a/b/small.bin")) == small)
        let two = try await CLI.run(["get", nginx.url("/large.bin"), "-d", "new/c", "-q"], in: scratch.url)
        #expect(two.status == 0, "stderr: \(two.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("new/c/large.bin")) == large)
        let mask = umask(0)
        umask(mask)
        let mode = try FileManager.default.attributesOfItem(atPath: scratch.path("new/a"))[.posixPermissions] as? Int
        #expect(mode == 0o755 & ~Int(mask))
    }

    @Test("-d through a regular file: a clear error, exit 3")
    func dashDThroughAFile() async throws {
        let nginx = try await Nginx.start()
        defer { nginx.stop() }
        _ = try await nginx.addFile("f.bin", size: 1000, seed: 3)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        #expect(FileManager.default.createFile(atPath: scratch.path("plain"), contents: Data("x".utf8)))
        let result = try await CLI.run(["get", nginx.url("/f.bin"), "-d", "plain/sub", "-q"], in: scratch.url)
        #expect(result.status == 3, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("plain is a file, not a directory"), "stderr: \(result.stderr)")
    }

    @Test("the library creates missing parents for download(to:) and downloadAll, unless turned off")
    func libraryCreatesParents() async throws {
        let nginx = try await Nginx.start()
        defer { nginx.stop() }
        var sums: [String] = []
        for index in 0..<20 {
            sums.append(try await nginx.addFile("f\(index).bin", size: 2000 + index * 70_000, seed: UInt64(index)))
        }
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withDownloader { downloader in
            _ = try await downloader.download(
                DownloadRequest(url: nginx.url("/f0.bin")), to: scratch.path("one/two/f0.bin"))
            #expect(try await TestData.sha256(of: scratch.path("one/two/f0.bin")) == sums[0])
            let items = (0..<20).map {
                BulkItem(DownloadRequest(url: nginx.url("/f\($0).bin")), to: scratch.path("many/x\($0 % 3)/f\($0).bin"))
            }
            var summary: BulkSummary?
            for await event in downloader.downloadAll(items) {
                if case .completed(let done) = event { summary = done }
            }
            #expect(summary?.succeeded == 20 && summary?.failed == 0, "\(String(describing: summary?.failures))")
            for index in 0..<20 {
                #expect(try await TestData.sha256(of: scratch.path("many/x\(index % 3)/f\(index).bin")) == sums[index])
            }
        }
        var off = Downloader.Configuration()
        off.files.createsMissingDirectories = false
        try await withDownloader(off) { downloader in
            do {
                _ = try await downloader.download(
                    DownloadRequest(url: nginx.url("/f1.bin")), to: scratch.path("absent/f1.bin"))
                Issue.record("expected a failure")
            } catch let error as DownloadError {
                #expect(error.kind == .localIO && error.remedy == .createDirectory, "\(error)")
                #expect(error.message.contains("does not exist"), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: scratch.path("absent")))
        }
    }

    // MARK: One process per target

    /// Starts a `swoop get` of `/slow.bin` that holds the target until the test lets it finish,
    /// and waits until it holds it (its lock, taken when the part file opens). The origin paces
    /// each response at 64 KiB/s (4 connections: 48 MiB would take over three minutes), and
    /// ``release(_:)`` lifts the pace and drops the connections, so the holder's retries fetch
    /// the rest at full speed. Nothing depends on how fast the machine is (a rate-limited holder
    /// was seen to finish before the test looked, on a loaded CI machine).
    private func startHolder(_ origin: TestOrigin, in scratch: Scratch) async throws -> CLI.Running {
        origin.updateFaults { $0.throttleBytesPerSecond = 64 << 10 }
        let holder = try CLI.start(["get", origin.url("/slow.bin"), "-c", "4", "-q"], in: scratch.url)
        let held = try await eventually { Downloader.status(of: scratch.path("slow.bin")).isInUse }
        #expect(held, "the first process holds the target")
        return holder
    }

    private func release(_ origin: TestOrigin) {
        origin.updateFaults { $0.throttleBytesPerSecond = nil }
        origin.dropConnections()
    }

    @Test("a second process for the same target stops at once with exit 5 naming the first; the first finishes")
    func secondProcessStops() async throws {
        // Exclusive for the second process's start-up time, which is measured.
        try await exclusively {
            try await withTestOrigin { origin in
                let object = TestObject(size: 48 << 20, seed: 7)
                origin.addObject(object, at: "/slow.bin")
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let holder = try await startHolder(origin, in: scratch)
                let started = ContinuousClock.now
                let second = try await CLI.run(
                    ["get", origin.url("/slow.bin"), "-c", "4"], in: scratch.url, timeout: .seconds(60))
                let took = ContinuousClock.now - started
                #expect(second.status == 5, "stderr: \(second.stderr)")
                #expect(second.stderr.contains("pid \(holder.pid)"), "stderr: \(second.stderr)")
                #expect(second.stderr.contains("being downloaded by another process"), "stderr: \(second.stderr)")
                // No request, no waiting: it is a start-up and a lock attempt (well under a second
                // when quiet); waiting for the first, which is held until released below, would
                // take 60 s, and the bound is only that it did not wait.
                #expect(took < .seconds(45), "the second process took \(took)")
                #expect(Downloader.status(of: scratch.path("slow.bin")).isInUse, "the first still holds the target")
                release(origin)
                let first = try await holder.wait(timeout: .seconds(120))
                #expect(first.status == 0, "stderr: \(first.stderr)")
                #expect(try await TestData.sha256(of: scratch.path("slow.bin")) == object.sha256)
                #expect(!scratch.exists(part: "slow.bin") && !scratch.exists(map: "slow.bin"))
            }
        }
    }

    @Test("a holder killed with SIGKILL does not block the next run, which resumes")
    func killedHolderDoesNotBlock() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 48 << 20, seed: 8)
            origin.addObject(object, at: "/slow.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let holder = try await startHolder(origin, in: scratch)
            let checkpointed = try await eventually(timeout: .seconds(60)) {
                Downloader.status(of: scratch.path("slow.bin")).bytesDone >= 2 << 20
            }
            #expect(checkpointed, "the holder recorded some bytes")
            holder.signal(SIGKILL)
            _ = try? await holder.wait(timeout: .seconds(20))
            let kept = Downloader.status(of: scratch.path("slow.bin"))
            #expect(kept.state == .partial && !kept.isInUse && kept.bytesDone >= 2 << 20)
            release(origin)
            let next = try await CLI.run(
                ["get", origin.url("/slow.bin"), "-c", "16", "-q"], in: scratch.url, timeout: .seconds(120))
            #expect(next.status == 0, "stderr: \(next.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("slow.bin")) == object.sha256)
        }
    }

    @Test("with -i, a line whose target another process holds fails; the other lines are fetched")
    func listLineLocked() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 48 << 20, seed: 9), at: "/slow.bin")
            let other = TestObject(size: 100_000, seed: 10)
            origin.addObject(other, at: "/other.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let holder = try await startHolder(origin, in: scratch)
            let list = scratch.path("list.txt")
            try "\(origin.url("/slow.bin"))\n\(origin.url("/other.bin"))\n".write(
                toFile: list, atomically: true, encoding: .utf8)
            let run = try await CLI.run(["get", "-i", list, "-q"], in: scratch.url, timeout: .seconds(60))
            #expect(run.status == 5, "stderr: \(run.stderr)")
            #expect(run.stderr.contains("pid \(holder.pid)"), "stderr: \(run.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("other.bin")) == other.sha256)
            holder.signal(SIGKILL)
            _ = try? await holder.wait(timeout: .seconds(20))
        }
    }

    @Test("two Downloaders in one process: the second gets targetInUse")
    func twoDownloadersOneProcess() async throws {
        try await withTestOrigin { origin in
            // Paced until the test lets it finish (see startHolder).
            origin.updateFaults { $0.throttleBytesPerSecond = 64 << 10 }
            let object = TestObject(size: 16 << 20, seed: 11)
            origin.addObject(object, at: "/slow.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(4)
            let first = Downloader(configuration: configuration)
            let second = Downloader(configuration: configuration)
            let task = try first.start(DownloadRequest(url: origin.url("/slow.bin")), to: scratch.path("slow.bin"))
            let underWay = try await eventually {
                let status = Downloader.status(of: scratch.path("slow.bin"))
                return status.state == .partial && status.bytesDone > 0
            }
            #expect(underWay, "the first download is under way")
            do {
                _ = try await second.download(
                    DownloadRequest(url: origin.url("/slow.bin")), to: scratch.path("slow.bin"))
                Issue.record("the second download should not run")
            } catch let error as DownloadError {
                #expect(error.kind == .targetInUse, "\(error)")
                #expect(error.message.contains("another download in this process"), "\(error)")
            }
            release(origin)
            _ = try await task.result()
            #expect(try await TestData.sha256(of: scratch.path("slow.bin")) == object.sha256)
            await first.shutdown()
            await second.shutdown()
        }
    }

    // MARK: True messages

    @Test("a part file removed mid-download: the error says so, not 'create the directory'")
    func partFileRemoved() async throws {
        try await withTestOrigin { origin in
            // Paced until the part file is gone, so the download cannot end before.
            origin.updateFaults { $0.throttleBytesPerSecond = 64 << 10 }
            origin.addObject(TestObject(size: 32 << 20, seed: 12), at: "/gone.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(4)
            try await withDownloader(configuration) { downloader in
                let task = try downloader.start(
                    DownloadRequest(url: origin.url("/gone.bin")), to: scratch.path("gone.bin"))
                // The part file exists from the first response on.
                let created = try await eventually { scratch.exists(part: "gone.bin") }
                #expect(created)
                try FileManager.default.removeItem(atPath: scratch.part("gone.bin"))
                release(origin)
                do {
                    _ = try await task.result()
                    Issue.record("expected a failure")
                } catch let error as DownloadError {
                    #expect(error.message.contains("no longer exists (something else removed it"), "\(error)")
                    #expect(error.remedy != .createDirectory, "\(error)")
                }
                #expect(!scratch.exists("gone.bin"))
            }
        }
    }
}
