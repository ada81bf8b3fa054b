#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import NIOHTTP1

/// What to send for one request: decided up front, under the origin's lock, and then carried
/// out on the wire by ``OriginConnectionHandler``.
struct ResponsePlan: Sendable {
    enum Body: Sendable {
        /// Bytes of `object` from `offset` on; the byte at object offset `flip`, if any, is sent
        /// wrong.
        case payload(TestObject, offset: Int64, flip: Int64?)
        /// A fixed small body (error pages, the busy page).
        case fixed([UInt8])
    }

    /// Where the body stops early, and what happens there.
    enum Interruption: Sendable {
        /// Close the connection once this many body bytes are written.
        case cut(after: Int64, fault: String)
        /// Send nothing more after this many body bytes, until the client closes.
        case stall(after: Int64)
    }

    var head: HTTPResponseHead
    var body: Body
    /// Body bytes to send if nothing interrupts (0 for HEAD, 304 and bodiless responses).
    var bodyLength: Int64
    var interruption: Interruption?
    /// Body pacing in bytes per second; nil = as fast as the socket takes it.
    var bytesPerSecond: Int?
    /// Every client address's shared rate (``FaultSwitches/perClientBytesPerSecond``).
    var perClientBytesPerSecond: Int? = nil
    var keepAlive: Bool
    /// Wait this long before answering at all (a refusal from a slow authorisation service).
    var headDelayMilliseconds: Int64? = nil
    /// Faults applied while planning (body faults are added when they happen).
    var faults: [String]
    /// The request as it will be logged, with `bodyBytesSent` and the body faults still to fill in.
    var record: RecordedRequest
    /// The arming of `changeAfterBodyBytes` whose count this response's body bytes add to.
    var countedArming: Int? = nil
    /// The path whose object is read again for each slice of the body: when it is this
    /// response's object rewritten in place, the rest of the body is its new bytes (a server
    /// reading a file patched under it). Not for a view a lying switch or a pool made.
    var readsInPlace: String? = nil
}

/// HTTP semantics of the origin: redirects, 404, preconditions (RFC 9110 §13), single byte
/// ranges (§14), and the fault switches that bend them. Preconditions and the choice of range
/// are in ResponsePlanner+Conditions.swift.
struct ResponsePlanner {
    var request: HTTPRequestHead
    var target: RequestTarget
    var ordinal: Int
    var connectionID: Int
    var faults: FaultSwitches

    /// `document`: a small body to answer with instead of an object (an S3 listing).
    func plan(view: ObjectView?, redirect: OriginCore.Redirect?, document: [UInt8]? = nil) -> ResponsePlan {
        var plan = ResponsePlan(
            head: HTTPResponseHead(version: request.version, status: .ok),
            body: .fixed([]),
            bodyLength: 0,
            interruption: nil,
            bytesPerSecond: nil,
            keepAlive: request.isKeepAlive,
            faults: [],
            record: RecordedRequest(
                method: request.method.rawValue,
                path: target.path,
                query: target.query,
                headers: request.headers.map { (name: $0.name.lowercased(), value: $0.value) },
                connectionID: connectionID,
                status: 0,
                bodyBytesSent: 0,
                faultApplied: nil
            )
        )
        plan.head.headers.add(name: "Date", value: HTTPDate.format(epochSeconds: Int64(time(nil))))
        plan.head.headers.add(name: "Server", value: "swoop-test-origin")

        if let failures = faults.failures, ordinal <= failures.firstRequests {
            fail(&plan, failures)
        } else if let signing = faults.urlSigning, target.path.hasPrefix(URLSigning.mintPrefix) {
            let path = "/" + target.path.dropFirst(URLSigning.mintPrefix.count)
            let host = request.headers.first(name: "Host") ?? "127.0.0.1"
            setText(&plan, status: .ok, "http://\(host)\(path)?\(signing.query(for: path))\n")
        } else if let tokens = faults.sessionTokens,
            request.headers.first(name: "x-amz-security-token") != tokens.valid
        {
            setText(&plan, status: .badRequest, FaultSwitches.SessionTokens.expiredBody, contentType: "application/xml")
            plan.faults.append("expiredToken")
        } else if let refusal = faults.urlSigning?.refusal(path: target.path, query: target.query) {
            setText(&plan, status: .forbidden, URLSigning.refusalBody, contentType: "application/xml")
            plan.headDelayMilliseconds = faults.urlSigning?.refusalDelayMilliseconds
            plan.faults.append("signature \(refusal)")
        } else if let document {
            plan.head.status = .ok
            plan.head.headers.add(name: "Content-Type", value: "application/xml")
            plan.body = .fixed(document)
            plan.bodyLength = Int64(document.count)
        } else if let redirect {
            plan.head.status = HTTPResponseStatus(statusCode: redirect.status)
            plan.head.headers.add(name: "Location", value: redirect.location)
        } else if let view {
            serve(view, into: &plan)
        } else {
            setText(&plan, status: .notFound, "not found: \(target.path)\n")
        }

        if !plan.keepAlive {
            plan.head.headers.replaceOrAdd(name: "Connection", value: "close")
        } else if request.version.major == 1, request.version.minor == 0 {
            plan.head.headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        let status = plan.head.status
        // Without a length, an HTTP/1.1 body goes chunked (NIO frames it so).
        let chunked = faults.chunkedBodies && view != nil && request.version.minor >= 1
        if status != .notModified, !chunked, !plan.head.headers.contains(name: "Content-Length") {
            plan.head.headers.add(name: "Content-Length", value: String(plan.bodyLength))
        }
        if request.method == .HEAD || status == .notModified {
            plan.bodyLength = 0
            plan.interruption = nil
        }
        plan.record.status = Int(status.code)
        return plan
    }

    // MARK: Responses

    private func fail(_ plan: inout ResponsePlan, _ failures: FaultSwitches.Failures) {
        let status =
            failures.gatewayReason.map { HTTPResponseStatus.custom(code: UInt(failures.status), reasonPhrase: $0) }
            ?? HTTPResponseStatus(statusCode: failures.status)
        setText(&plan, status: status, "\(status.code) \(status.reasonPhrase)\n")
        if let seconds = failures.retryAfterSeconds {
            plan.head.headers.add(name: "Retry-After", value: String(seconds))
        }
        for (name, value) in failures.gatewayFields.sorted(by: { $0.key < $1.key }) {
            plan.head.headers.add(name: name, value: value)
        }
        plan.faults.append("fail\(status.code)")
    }

    private func serve(_ view: ObjectView, into plan: inout ResponsePlan) {
        plan.faults += view.faults
        guard request.method == .GET || request.method == .HEAD else {
            plan.head.status = .methodNotAllowed
            plan.head.headers.add(name: "Allow", value: "GET, HEAD")
            return
        }
        let rangeField = request.headers.first(name: "Range")
        if let busy = faults.busyPage, isLying, rangeField != nil, ordinal <= (busy.firstRequests ?? .max) {
            let page =
                "<!DOCTYPE html>\n<html><head><title>Server busy</title></head>"
                + "<body><h1>Server busy</h1><p>Please try again later.</p></body></html>\n"
            setText(&plan, status: .ok, page, contentType: "text/html; charset=utf-8")
            plan.faults.append("busyHTML")
            return
        }

        let validators = view.validators
        let etag = validators.etagValue.flatMap { EntityTag(parsing: Substring($0)) }
        let lastModified = validators.lastModified ? validators.lastModifiedEpochSeconds : nil
        if let value = validators.etagValue { plan.head.headers.add(name: "ETag", value: value) }
        if let value = validators.lastModifiedValue { plan.head.headers.add(name: "Last-Modified", value: value) }
        if faults.rangeSupport { plan.head.headers.add(name: "Accept-Ranges", value: "bytes") }

        if let status = evaluatePreconditions(etag: etag, lastModified: lastModified) {
            plan.head.status = status
            return
        }
        let range: ClosedRange<Int64>?
        switch chooseRange(rangeField, size: view.declaredSize, etag: etag, lastModified: lastModified, &plan) {
        case .whole: range = nil
        case .part(let part): range = part
        case .unsatisfiable: return
        }

        let object = view.content
        plan.head.headers.add(name: "Content-Type", value: object.contentType)
        if let value = object.contentDisposition { plan.head.headers.add(name: "Content-Disposition", value: value) }
        for (name, value) in object.headers.sorted(by: { $0.key < $1.key }) {
            plan.head.headers.add(name: name, value: value)
        }
        if faults.gzipEncoding, isLying {
            plan.head.headers.add(name: "Content-Encoding", value: "gzip")
            plan.faults.append("gzip")
        }
        let first = range?.lowerBound ?? 0
        plan.bodyLength = range.map { $0.upperBound - $0.lowerBound + 1 } ?? view.declaredSize
        var flip: Int64?
        if let fault = faults.flipByte, (fault.responses ?? 1) > 0, fault.offset >= first,
            fault.offset < first + plan.bodyLength,
            request.method == .GET
        {
            flip = fault.offset
            plan.faults.append("flip@\(fault.offset)")
        }
        plan.body = .payload(object, offset: first, flip: flip)
        if view.faults.isEmpty { plan.readsInPlace = target.path }
        if faults.contentDigest {
            let digest = SHA256.hash(data: object.bytes(offset: first, count: Int(plan.bodyLength)))
            plan.head.headers.add(name: "Content-Digest", value: "sha-256=:\(base64(Array(digest))):")
        }
        if let range {
            if faults.rangeAs200 {
                plan.faults.append("range200")
            } else {
                plan.head.status = .partialContent
            }
            plan.head.headers.add(
                name: "Content-Range", value: contentRange(range, size: view.declaredSize, into: &plan))
        }
        if request.method == .GET {
            // Bytes past the end of the object as it is now do not exist (a declared size that is
            // no longer true): the body ends where they do.
            let existing = max(0, min(plan.bodyLength, object.size - first))
            planBodyFaults(&plan, objectEndsAfter: existing)
        }
        plan.bytesPerSecond = pace()
        plan.perClientBytesPerSecond = faults.perClientBytesPerSecond.map { max(1, $0) }
    }

    private func setText(
        _ plan: inout ResponsePlan,
        status: HTTPResponseStatus,
        _ text: String,
        contentType: String = "text/plain; charset=utf-8"
    ) {
        plan.head.status = status
        plan.head.headers.add(name: "Content-Type", value: contentType)
        let bytes = Array(text.utf8)
        plan.body = .fixed(bytes)
        plan.bodyLength = Int64(bytes.count)
    }

    // MARK: Faults

    /// Whether the lying faults apply to this request (see ``FaultSwitches/honestFirstRequests``).
    private var isLying: Bool { ordinal > faults.honestFirstRequests }

    private func contentRange(_ range: ClosedRange<Int64>, size: Int64, into plan: inout ResponsePlan) -> String {
        let (first, last) = (range.lowerBound, range.upperBound)
        switch isLying ? faults.contentRangeLie : nil {
        case nil:
            return "bytes \(first)-\(last)/\(size)"
        case .offByOne?:
            plan.faults.append("contentRangeLie")
            return "bytes \(first + 1)-\(last + 1)/\(size)"
        case .wrongTotal?:
            plan.faults.append("contentRangeLie")
            return "bytes \(first)-\(last)/\(size + 1)"
        case .wrongStart?:
            plan.faults.append("contentRangeLie")
            return "bytes 0-\(last - first)/\(size)"
        }
    }

    /// Picks the earliest cut (short body, drop, the object's end) or stall point inside the
    /// body, if any.
    private func planBodyFaults(_ plan: inout ResponsePlan, objectEndsAfter existing: Int64) {
        let length = plan.bodyLength
        guard length > 0 else { return }
        var cut: (after: Int64, fault: String)? = nil
        func consider(_ after: Int64, _ fault: String) {
            if after < length, after < (cut?.after ?? .max) { cut = (after, fault) }
        }
        consider(existing, "objectEnd")
        if faults.shortBody, isLying {
            consider(length >= 200 ? length - 100 : length / 2, "shortBody")
        }
        if let drops = faults.drops, ordinal <= (drops.firstRequests ?? .max) {
            if let after = drops.afterBytes { consider(max(0, after), "drop") }
            if drops.probability > 0, Double.random(in: 0..<1) < drops.probability {
                consider(Int64.random(in: 0..<length), "drop")
            }
        }
        let stallAt = faults.stall.flatMap { ordinal <= ($0.firstRequests ?? .max) ? max(0, $0.afterBytes) : nil }
        if let stallAt, stallAt < length, stallAt <= (cut?.after ?? .max) {
            plan.interruption = .stall(after: stallAt)
        } else if let cut {
            plan.interruption = .cut(after: cut.after, fault: cut.fault)
        }
    }

    /// The body rate: the throttle, lowered further on a straggler connection.
    private func pace() -> Int? {
        var rate = faults.throttleBytesPerSecond
        if let straggler = faults.straggler, connectionID % max(1, straggler.every) == 0 {
            rate = min(rate ?? .max, straggler.bytesPerSecond)
        }
        return rate.map { max(1, $0) }
    }
}

/// Standard base64 with padding (the test origin has no Foundation).
func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let chunk = bytes[index..<min(index + 3, bytes.count)]
        var value: UInt32 = 0
        for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * UInt32(offset)) }
        for position in 0..<4 {
            out.append(
                position <= chunk.count ? alphabet[Int((value >> (18 - 6 * UInt32(position))) & 63)] : UInt8(ascii: "=")
            )
        }
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}
