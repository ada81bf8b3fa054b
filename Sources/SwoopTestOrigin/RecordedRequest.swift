/// One request the origin received and what it sent back.
public struct RecordedRequest: Sendable {
    /// The request method, e.g. `GET`.
    public var method: String
    /// The request target's path, without the query.
    public var path: String
    /// The query (after `?`), if any.
    public var query: String?
    /// The request headers in order, names lowercased.
    public var headers: [(name: String, value: String)]
    /// Which connection carried it: 1, 2, 3… in accept order.
    public var connectionID: Int
    /// The client's IP address, as the connection came from it.
    public var clientAddress: String?
    /// The response status.
    public var status: Int
    /// Body bytes actually written to the socket before the response ended or the connection
    /// was cut.
    public var bodyBytesSent: Int64
    /// The faults that shaped the response, joined with `+` (e.g. `drop`, `stall`, `fail503`,
    /// `busyHTML`, `noRanges`, `contentRangeLie`, `shortBody`, `gzip`, `staleValidators`,
    /// `firstMetadata`, `objectEnd`, `range200`, `rangeCapped`, `refuse416`, and a pool's node
    /// as `node0`, `node1`, ...); nil if it was served normally. Pacing (throttle, straggler) is
    /// not listed.
    public var faultApplied: String?

    /// The first value of the header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first(where: { $0.name == wanted })?.value
    }
}
