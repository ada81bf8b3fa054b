import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Whether this process may mount file systems (root in the sandbox and in CI).
let canMount: Bool = {
    let probe = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-mount-probe-\(getpid())")
    try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: probe) }
    guard mount("tmpfs", probe.path, "tmpfs", 0, "size=1m") == 0 else { return false }
    umount(probe.path)
    return true
}()

/// A small tmpfs, so a disk can fill up.
final class SmallDisk: Sendable {
    let url: URL

    init(megabytes: Int) throws {
        url = try TemporaryDirectory.make(prefix: "swoop-disk")
        guard mount("tmpfs", url.path, "tmpfs", 0, "size=\(megabytes)m") == 0 else {
            throw TestFailure("mount tmpfs: \(String(cString: strerror(errno)))")
        }
    }

    /// Fills the disk to the last byte with a junk file.
    func fill() throws {
        let junk = url.appendingPathComponent("junk")
        _ = FileManager.default.createFile(atPath: junk.path, contents: nil)
        let handle = try FileHandle(forWritingTo: junk)
        defer { try? handle.close() }
        let block = Data(count: 64 << 10)
        while (try? handle.write(contentsOf: block)) != nil {}
        var byte = Data(count: 1)
        while (try? handle.write(contentsOf: byte)) != nil { byte = Data(count: 1) }
    }

    func freeSpace() throws {
        try FileManager.default.removeItem(at: url.appendingPathComponent("junk"))
    }

    deinit {
        umount2(url.path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(at: url)
    }
}

@Suite("Local faults", .serialized)
struct LocalFaultTests {
    @Test(
        "disk full before the download: a clear error, nothing left, then it works once space is freed",
        .enabled(if: canMount))
    func diskFullAtStart() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 6 << 20, seed: 30)
            origin.addObject(object, at: "/big.iso")
            let disk = try SmallDisk(megabytes: 8)
            // 4 MiB of junk leaves too little for 6 MiB.
            try await TestData.write(to: disk.url.appendingPathComponent("junk"), size: 4 << 20, seed: 1)
            let full = try await CLI.run([origin.url("/big.iso"), "-d", disk.url.path, "-q"], in: disk.url)
            #expect(full.status == 3, "stderr: \(full.stderr)")
            #expect(full.stderr.contains("No space left on device"), "stderr: \(full.stderr)")
            #expect(full.stderr.contains("free some space"), "stderr: \(full.stderr)")
            // Nothing is kept, so nothing can resume: the message must not promise it.
            #expect(full.stderr.contains("nothing was kept"), "stderr: \(full.stderr)")
            #expect(!full.stderr.contains("resume"), "stderr: \(full.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: disk.url.path) == ["junk"])
            try disk.freeSpace()
            let ok = try await CLI.run([origin.url("/big.iso"), "-d", disk.url.path, "-q"], in: disk.url)
            #expect(ok.status == 0, "stderr: \(ok.stderr)")
            #expect(try await TestData.sha256(of: disk.url.appendingPathComponent("big.iso").path) == object.sha256)
        }
    }

    @Test(
        "disk full mid-download: a clear error, the partial state kept, resumable after freeing space",
        .enabled(if: canMount))
    func diskFullMidDownload() async throws {
        try await exclusively {
            try await withTestOrigin { origin in
                let object = TestObject(size: 6 << 20, seed: 31)
                origin.addObject(object, at: "/big.iso")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let disk = try SmallDisk(megabytes: 16)
                let target = disk.url.appendingPathComponent("big.iso").path
                // Start, let a few chunks land, then fill the disk so the next checkpoint cannot be written.
                let process = try CLI.start(
                    [origin.url("/big.iso"), "-d", disk.url.path, "-c", "2", "--checkpoint-interval", "0.1", "-q"],
                    in: disk.url)
                try await waitThenAct(
                    within: .seconds(20), until: { Downloader.status(of: target).bytesDone >= 1 << 20 },
                    then: { try disk.fill() })
                let failed = try await process.wait(timeout: .seconds(30))
                #expect(failed.status == 3, "stderr: \(failed.stderr)")
                #expect(failed.stderr.contains("No space left on device"), "stderr: \(failed.stderr)")
                #expect(!FileManager.default.fileExists(atPath: target))
                let kept = Downloader.status(of: target)
                #expect(kept.state == .partial, "the partial download is kept: \(kept.state)")
                #expect(kept.bytesDone >= 1 << 20)

                try disk.freeSpace()
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let resumed = try await CLI.run([origin.url("/big.iso"), "-d", disk.url.path, "-q"], in: disk.url)
                #expect(resumed.status == 0, "stderr: \(resumed.stderr)")
                #expect(try await TestData.sha256(of: target) == object.sha256)
                #expect(origin.requests.first?.header("if-match") != nil, "it resumed rather than started over")
                #expect(origin.requests.reduce(0) { $0 + $1.bodyBytesSent } <= object.size - kept.bytesDone + (1 << 20))
            }
        }
    }

    @Test("an unwritable directory: permission denied, named, exit 3")
    func permissionDenied() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 32), at: "/f.iso")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            // Root may write anywhere, so run swoop as nobody against a root-owned directory.
            let locked = scratch.url.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: locked.path)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: scratch.url.path)
            let swoop = CLI.executable
            // The build directory must be reachable for nobody.
            guard access(swoop, X_OK) == 0 else { return }
            let out = scratch.url.appendingPathComponent("out.txt").path
            let err = scratch.url.appendingPathComponent("err.txt").path
            let process = try ChildProcess(
                executable: "/usr/bin/setpriv",
                arguments: [
                    "--reuid=nobody", "--regid=nogroup", "--clear-groups", swoop, origin.url("/f.iso"), "-d",
                    locked.path, "-q",
                ],
                stdout: out, stderr: err)
            let status = await process.wait(timeout: .seconds(30))
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            if stderr.contains("Permission denied") && stderr.contains("swoop") == false {
                // nobody cannot even run the binary (a build under a private home): nothing to test here.
                return
            }
            #expect(status == 3, "stderr: \(stderr)")
            #expect(stderr.contains("Permission denied"), "stderr: \(stderr)")
            #expect(stderr.contains("choose a writable location"), "stderr: \(stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: locked.path).isEmpty)
        }
    }

    @Test("a directory at the target path is refused")
    func targetIsDirectory() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 33), at: "/d.iso")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try FileManager.default.createDirectory(
                at: scratch.url.appendingPathComponent("d.iso"), withIntermediateDirectories: true)
            let result = try await CLI.run([origin.url("/d.iso"), "-q"], in: scratch.url)
            #expect(result.status == 3, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("is a directory"), "stderr: \(result.stderr)")
            let forced = try await CLI.run([origin.url("/d.iso"), "-q", "--force"], in: scratch.url)
            #expect(forced.status == 3, "--force never replaces a directory: \(forced.stderr)")
        }
    }

    @Test("a missing output directory is created, for -o as for -d")
    func missingDirectory() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 1 << 20, seed: 34)
            origin.addObject(object, at: "/m.iso")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let result = try await CLI.run([origin.url("/m.iso"), "-o", "no/such/dir/m.iso", "-q"], in: scratch.url)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("no/such/dir/m.iso")) == object.sha256)
        }
    }
}
