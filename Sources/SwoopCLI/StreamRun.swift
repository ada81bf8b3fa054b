import ArgumentParser
import Logging
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Get {
    /// `-o -`: the object to standard output, in order, fetched over many connections inside
    /// `--stream-window`. Progress and `--json` go to standard error. A reader that closes the
    /// pipe (`| head -c 100`) ends the download quietly with exit 0, as curl does for `head`; a
    /// failure mid-stream exits non-zero with the reason, never a silent short stream. Nothing is
    /// written to disk, so nothing resumes.
    func runStream(urls: [String], configuration: Downloader.Configuration, logger: Logger) async throws {
        var request = DownloadRequest(urls: urls, headers: try transfer.parsedHeaders())
        request.urlProvider = urlCommand.map { URLCommand(command: $0).provider }
        let downloader = Downloader(configuration: configuration, logger: logger)
        let renderer = ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1)
        let bytes: DownloadBytes
        do {
            (bytes, _) = try await downloader.bytes(for: request, window: Int(streamWindow.bytes)) {
                renderer.update($0)
            }
        } catch {
            await downloader.shutdown()
            throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage)
        }
        enum Ending { case done, pipeClosed, failed(DownloadError?) }
        let consumer = Task { () -> Ending in
            do {
                for try await chunk in bytes {
                    guard writeOut(chunk) else {
                        bytes.task.cancel()
                        return .pipeClosed
                    }
                }
                return .done
            } catch let error as DownloadError {
                return .failed(error)
            } catch {
                return .failed(nil)
            }
        }
        let interrupts = InterruptWatcher { consumer.cancel() }
        let ending = await consumer.value
        interrupts.stop()
        let result = try? await bytes.task.result()
        await downloader.shutdown()
        renderer.finish()
        switch ending {
        case .done, .pipeClosed:
            if json, let result { writeStderr(jsonText(Summary(result, url: urls[0])) + "\n") }
        case .failed(let error?) where error.kind != .cancelled:
            if json { writeStderr(jsonText(Summary(error: error, path: "-")) + "\n") }
            // A mismatch comes after the last byte: the stream is complete, and wrong.
            let state = error.kind == .checksumMismatch ? "" : Messages.streamIncomplete
            throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage + state)
        case .failed:
            throw CommandFailure(status: .interrupted, message: Messages.streamInterrupted)
        }
    }

    /// Writes all of `chunk` to standard output; `false` when the reader closed the pipe.
    private func writeOut(_ chunk: [UInt8]) -> Bool {
        chunk.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false  // EPIPE (the reader is gone), or standard output failed
                }
                offset += written
            }
            return true
        }
    }
}
