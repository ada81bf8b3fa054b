import SwoopCore

/// Where a download's body bytes go.
///
/// Connections write each response's bytes at their offsets in the object through the
/// ``DownloadStore``, which hands them to the sink; the engine never asks what kind of sink it
/// is. Implementations: ``PartFileSink`` (the part file, its segment map, and the finished file)
/// and ``DiscardSink`` (throughput measurements). A sink that delivers bytes in order (a pipe)
/// buffers what arrives ahead of its position; the plan keeps connections near it.
///
/// Used on the transfer thread only. Anything that may block (fsync, rename) goes to the
/// ``DiskQueue``, and its completion comes back on the transfer thread.
package protocol BodySink: AnyObject {
    /// Whether the sink keeps a partial download across runs: a download inspects what an
    /// earlier run left, checkpoints, and keeps its state when it stops, only when it does.
    var keepsPartialState: Bool { get }

    /// Takes the target for this download before its partial state is read or changed: from now
    /// until the sink closes, no other download (in any process) can write it. Throws
    /// ``DownloadError/Kind/targetInUse`` when another holds it. ``open(size:resuming:)`` claims
    /// too, if this was not called.
    func claim() throws(DownloadError)

    /// Deletes what an earlier run left (claimed first), so the download starts over.
    func discardPartialState() throws(DownloadError)

    /// Gives the claim up without having written anything (the target turned out complete).
    func releaseClaim()

    /// Whether ``open(size:resuming:)`` gets ready at once, without the disk: memory, a pipe, a
    /// part file this download already claimed and resumes. Otherwise (creating, emptying or
    /// reserving a file) ``open(size:resuming:then:)`` does it on the ``DiskQueue``.
    func opensAtOnce(size: Int64?, resuming: Bool) -> Bool

    /// Gets ready for an object of `size` bytes (`nil`: unknown), when ``opensAtOnce(size:resuming:)``.
    /// `resuming` keeps the bytes an earlier run wrote; otherwise whatever was there is discarded.
    func open(size: Int64?, resuming: Bool) throws(DownloadError)

    /// Gets ready for a new object whose bytes are all here, as ``open(size:resuming:)`` does for
    /// their count and then ``write(_:at:)`` does for them: a small object that arrived whole in
    /// one response. A sink that holds such an object in memory keeps `bytes` themselves.
    func open(holding bytes: [UInt8]) throws(DownloadError)

    /// Gets ready as ``open(size:resuming:)`` does, with the disk work on the ``DiskQueue``, then
    /// calls `then` on the transfer thread with the failure, if any. Nothing may be written
    /// before. A ``close(discarding:then:)`` meanwhile waits for the disk work and closes what it
    /// opened; `then` is not called then.
    func open(size: Int64?, resuming: Bool, then: @escaping (DownloadError?) -> Void)

    /// An in-order sink's window (bytes ahead of its reader it can hold); `nil`: any offset, any
    /// time. The plan then hands out work lowest first and only within it.
    var window: Int64? { get }

    /// Whether `count` bytes at `offset` can be taken now (a single stream pauses when not).
    func hasRoom(for count: Int, at offset: Int64) -> Bool

    /// Calls `handler` (transfer thread) with the reader's position whenever an in-order sink's
    /// reader made room.
    func observeRoom(_ handler: @escaping (Int64) -> Void)

    /// Takes `bytes` of the object at `offset`. Called for every piece of every response.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DownloadError)

    /// The bytes written at `range`, read back (to compare another source's bytes with them);
    /// `nil` when the sink keeps nothing to read.
    func read(_ range: ByteRange) -> [UInt8]?

    /// A mark after the bytes written so far, for work that reads the file by another descriptor
    /// (the ``ObjectVerifier``): it waits for them there. `nil`: written at once, or nothing to read.
    var pendingWrites: WriteFence? { get }

    /// Whether ``read(_:)`` gives back every byte written: then each response's overlap with
    /// the bytes of its neighbours is compared (``AgreementLedger``).
    var canReadBack: Bool { get }

    /// Makes the bytes written so far durable, then records `map` (data first, map second), and
    /// calls `then` on the transfer thread with the failure, if any.
    func checkpoint(_ map: SegmentMap, then: @escaping (DownloadError?) -> Void)

    /// An in-order sink (a pipe, nothing to read back) checks the bytes against `checks` itself as
    /// it delivers them, and fails ``finish(size:record:then:)`` on a mismatch. (A file is checked
    /// by an ``ObjectVerifier``; the others do nothing.)
    func verifyInOrder(_ checks: [DigestCheck])

    /// The object is complete at `size` bytes: deliver it (for a file: verify, make durable and
    /// visible), then call `then` on the transfer thread with the failure, if any.
    func finish(size: Int64, record: CompletedObject, then: @escaping (DownloadError?) -> Void)

    /// Every byte is written and the download's digests are still being checked: makes the
    /// bytes durable now, so ``finish(size:record:then:)`` has only the rename left. The others do
    /// nothing.
    func makeDurable(size: Int64, record: CompletedObject)

    /// Stops without finishing: releases what is open, deletes the partial state when
    /// `discarding`, then calls `then` on the transfer thread (after any checkpoint in flight).
    func close(discarding: Bool, then: @escaping () -> Void)
    /// The file at the target is an earlier version of this download's object (a file it
    /// finished, whose object changed since): the new one replaces it once whole.
    func replacesTarget()
    /// How long, in all, taking bytes waited for the machine's own side (the disk's write queue
    /// full): the adaptive count's local-limit signal. Zero where bytes go nowhere that waits.
    var localWait: Duration { get }
}

extension BodySink {
    // Sinks that keep no file at the target.
    package func replacesTarget() {}
    package var localWait: Duration { .zero }

    // Sinks that open without the disk (the benchmark's discard, a pipe).
    package func opensAtOnce(size: Int64?, resuming: Bool) -> Bool { true }
    package func open(size: Int64?, resuming: Bool, then: @escaping (DownloadError?) -> Void) {
        openAtOnce(size: size, resuming: resuming, then: then)
    }

    package func open(holding bytes: [UInt8]) throws(DownloadError) {
        try openWriting(bytes)
    }

    /// ``open(size:resuming:)`` for a new object of `bytes`' count, then ``write(_:at:)`` of them.
    package func openWriting(_ bytes: [UInt8]) throws(DownloadError) {
        try open(size: Int64(bytes.count), resuming: false)
        let written = bytes.withUnsafeBytes { body in Result { () throws(DownloadError) in try write(body, at: 0) } }
        try written.get()
    }

    /// ``open(size:resuming:)`` with its outcome handed to `then` at once.
    package func openAtOnce(size: Int64?, resuming: Bool, then: (DownloadError?) -> Void) {
        do throws(DownloadError) {
            try open(size: size, resuming: resuming)
            then(nil)
        } catch {
            then(error)
        }
    }
    // Sinks that take any offset at any time (files, the benchmark's discard).
    package var window: Int64? { nil }
    package func hasRoom(for count: Int, at offset: Int64) -> Bool { true }
    package func observeRoom(_ handler: @escaping (Int64) -> Void) {}
    package func verifyInOrder(_ checks: [DigestCheck]) {}
    package func makeDurable(size: Int64, record: CompletedObject) {}
    package var canReadBack: Bool { false }
    package var pendingWrites: WriteFence? { nil }
}

/// The sink of throughput measurements (`swoop bench`): counts nothing, keeps nothing.
package final class DiscardSink: BodySink {
    private let loop: any LoopExecutor

    package init(loop: any LoopExecutor) {
        self.loop = loop
    }

    package var keepsPartialState: Bool { false }
    package func claim() {}
    package func discardPartialState() {}
    package func releaseClaim() {}
    package func open(size: Int64?, resuming: Bool) {}
    @inline(__always) package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {}
    package func read(_ range: ByteRange) -> [UInt8]? { nil }
    package func checkpoint(_ map: SegmentMap, then: @escaping (DownloadError?) -> Void) { then(nil) }
    package func finish(size: Int64, record: CompletedObject, then: @escaping (DownloadError?) -> Void) { then(nil) }

    package func close(discarding: Bool, then: @escaping () -> Void) {
        loop.afterCallbacks(then)
    }
}
