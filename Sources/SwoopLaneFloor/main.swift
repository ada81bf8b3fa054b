// swoop-lane-floor LIST DIR [JOBS]: a measurement for issue 57, not a downloader. It fetches a
// list of small files the way Swoop's list does, on Swoop's own parts and nothing else: the
// preparation's look at the disk (the target and the working directory, on a queue of its own),
// one GET on the transfer thread (libcurl's multi, Swoop's exchanges and request headers), the
// body held in memory, then the publish queue's group commit (unnamed files, one syncfs a group,
// links, one directory fsync). What it leaves out is the per-file machinery a download has around
// those parts: the task and its control, the session and its stages, the prober and its exchange,
// the source set, the progress reporter, the list's loop of events; and every check a download
// makes of a response (it takes any 200 or 206 whole). So its time is a floor for a lean lane
// built from these parts (Benchmarks/README.md, issue 57), beside the file system's own
// (Benchmarks/fs-limit). Plain http:// URLs only; each file is DIR/the URL's last path segment.
import Dispatch
import Synchronization
import SwoopCore
import SwoopCurl
import SwoopStore

#if canImport(Glibc)
import Glibc
#endif

/// One file's response, held in memory as it arrives. `@unchecked Sendable`: the preparation
/// queue reads only its constants; the rest is touched on the transfer thread.
final class Fetch: ExchangeDelegate, @unchecked Sendable {
    let url: RemoteURL
    let target: String
    private unowned let lane: Lane
    var bytes: [UInt8] = []
    var status = 0
    var etag: String?
    var lastModified: String?

    init(url: RemoteURL, target: String, lane: Lane) {
        self.url = url
        self.target = target
        self.lane = lane
    }

    func exchange(_ exchange: HTTPExchange, didReceiveHead head: ResponseHead) -> BodyDisposition {
        status = head.status
        etag = head.etag
        lastModified = head.lastModified
        if let length = head.contentLength, length > 0, length <= 1 << 26 { bytes.reserveCapacity(Int(length)) }
        return .deliver
    }

    func exchange(_ exchange: HTTPExchange, didReceive body: UnsafeRawBufferPointer) -> BodyVerdict {
        bytes.append(contentsOf: body)
        return .take
    }

    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome) {
        lane.ended(self, outcome)
    }
}

/// The list, read line by line as files start: at most `jobs` files fetching and, like Swoop's
/// list, at most `max(jobs, 2 × PublishQueue.batchLimit)` fetched files waiting for their group.
/// `@unchecked Sendable`: its state is touched only on the transfer thread.
final class Lane: @unchecked Sendable {
    private let list: UnsafeMutablePointer<FILE>
    private let directory: String
    private let jobs: Int
    private let loop: TransferLoop
    private let publisher: PublishQueue
    private let preparation = DispatchQueue(label: "swoop-lane-floor.preparation")
    private let options = TransferOptions(
        connectTimeout: .seconds(30), stallTimeout: .seconds(60), lowSpeedLimit: 1, verifiesTLSCertificates: true,
        certificateAuthorities: TrustedCertificates(), userAgent: "swoop-lane-floor", receiveBufferSize: 0,
        proxy: .direct, netrc: .off)
    private var line: UnsafeMutablePointer<CChar>? = nil
    private var capacity = 0
    private var listEnded = false
    private var fetching = 0
    private var waiting = 0
    private(set) var files = 0
    private(set) var failures: [String] = []
    /// The exchanges' delegates (an exchange holds its delegate weakly).
    private var live: [ObjectIdentifier: Fetch] = [:]
    let done = DispatchSemaphore(value: 0)

    init(list: UnsafeMutablePointer<FILE>, directory: String, jobs: Int, loop: TransferLoop) {
        self.list = list
        self.directory = directory
        self.jobs = jobs
        self.loop = loop
        publisher = PublishQueue(loop: loop)
    }

    /// Starts files while there is room. Transfer thread.
    func startMore() {
        while fetching < jobs && waiting < max(jobs, 2 * PublishQueue.batchLimit), let url = nextURL() {
            guard let name = lastSegment(of: url.path) else { fail("no file name in \(url.redacted)") }
            let fetch = Fetch(url: url, target: directory + "/" + name, lane: self)
            files += 1
            fetching += 1
            preparation.async { [self] in
                let fresh = isFresh(fetch.target)
                loop.execute { [self] in
                    if fresh { send(fetch) } else { finish(failure: "\(fetch.target) exists", fetching: true) }
                }
            }
        }
        if listEnded && fetching == 0 && waiting == 0 { done.signal() }
    }

    /// The list's next URL, `nil` at its end. Read as bytes, as Swoop's list reader reads it: the
    /// `Character`s of a `String` (its `filter`, `prefix` and `split`) were 52k instructions a
    /// file, a quarter of this floor's transfer thread, which no lean lane would pay.
    private func nextURL() -> RemoteURL? {
        while !listEnded {
            var length = getline(&line, &capacity, list)
            guard length > 0, let line else {
                listEnded = true
                break
            }
            while length > 0, line[length - 1] == UInt8(ascii: "\n") || line[length - 1] == UInt8(ascii: "\r") {
                length -= 1
            }
            if length == 0 { continue }
            let text = line.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
            guard let url = remoteURL(text) else { fail("not a plain http:// URL: \(text)") }
            return url
        }
        return nil
    }

    /// What a list's preparation looks at before a fresh download: the target, and the
    /// working directory beside it. On the preparation queue.
    private func isFresh(_ target: String) -> Bool {
        var info = stat()
        guard stat(target, &info) != 0 else { return false }
        _ = stat(directory + "/.swoop", &info)
        return true
    }

    private func send(_ fetch: Fetch) {
        live[ObjectIdentifier(fetch)] = fetch
        let request = RequestHeaders([], originalURL: fetch.url).request(
            for: fetch.url, range: .from(0), options: options)
        loop.start(HTTPExchange(request, delegate: fetch))
    }

    fileprivate func ended(_ fetch: Fetch, _ outcome: ExchangeOutcome) {
        live[ObjectIdentifier(fetch)] = nil
        guard case .completed = outcome, fetch.status == 200 || fetch.status == 206 else {
            return finish(failure: "\(fetch.url.redacted): status \(fetch.status), \(outcome)", fetching: true)
        }
        fetching -= 1
        waiting += 1
        let size = Int64(fetch.bytes.count)
        let item = Finalizer.Item(
            body: .held(fetch.bytes), paths: DownloadPaths(target: fetch.target), size: size,
            record: CompletedObject(size: size, etag: fetch.etag, lastModified: fetch.lastModified),
            overwrite: false, removesMap: false)
        let target = fetch.target
        publisher.publish(item) { [self] failure in
            finish(failure: failure.map { "\(target): \($0)" }, fetching: false)
        }
        startMore()
    }

    /// A file ended, while `fetching` or once published.
    private func finish(failure: String?, fetching wasFetching: Bool) {
        if wasFetching { fetching -= 1 } else { waiting -= 1 }
        if let failure { failures.append(failure) }
        startMore()
    }
}

func fail(_ message: String) -> Never {
    let text = "swoop-lane-floor: \(message)\n"
    _ = write(2, text, text.utf8.count)
    exit(2)
}

/// `http://HOST[:PORT]/PATH` as Swoop's parts take it, read by its bytes.
func remoteURL(_ text: String) -> RemoteURL? {
    let bytes = text.utf8
    guard bytes.starts(with: "http://".utf8) else { return nil }
    let rest = bytes.index(bytes.startIndex, offsetBy: 7)
    guard let slash = bytes[rest...].firstIndex(of: UInt8(ascii: "/")) else { return nil }
    let colon = bytes[rest..<slash].firstIndex(of: UInt8(ascii: ":"))
    let host = String(text[rest..<(colon ?? slash)])
    let port = colon.map { Int(text[bytes.index(after: $0)..<slash]) } ?? 80
    guard !host.isEmpty, let port else { return nil }
    return RemoteURL(
        absoluteString: text, scheme: "http", host: host, port: port, path: String(text[slash...]), redacted: text)
}

/// The last segment of `path`, if it has one.
func lastSegment(of path: String) -> Substring? {
    let bytes = path.utf8
    let start = bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes.index(after: $0) } ?? bytes.startIndex
    return start == bytes.endIndex ? nil : path[start...]
}

let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4 else { fail("usage: swoop-lane-floor LIST DIR [JOBS]") }
let jobs = arguments.count == 4 ? Int(arguments[3]) ?? 0 : 64
guard jobs > 0 else { fail("JOBS must be a positive number") }
guard let list = fopen(arguments[1], "r") else { fail("cannot open \(arguments[1])") }
guard let loop = TransferLoop(budget: ConnectionBudget(total: jobs, perHost: jobs)) else {
    fail("cannot start the transfer loop")
}
let lane = Lane(list: list, directory: arguments[2], jobs: jobs, loop: loop)
loop.execute { lane.startMore() }
lane.done.wait()
let failures = lane.failures
if !failures.isEmpty {
    fail("\(failures.count) of \(lane.files) files failed, the first: \(failures[0])")
}
