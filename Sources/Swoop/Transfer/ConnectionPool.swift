import SwoopStore
import SwoopTransfer

/// The connection slots of one transfer: slot 0 is the probe's connection, the others open as
/// work appears, up to ``target`` (which the adaptive controller moves). Each slot remembers the
/// source of its request in flight. What each slot asks for is the ``TransferRun``'s to decide.
/// Transfer thread only.
final class ConnectionPool {
    private let loop: TransferLoop
    private(set) var connections: [Connection] = []
    /// The slots kept busy.
    var target: Int
    /// The source of each slot's request in flight, by connection id.
    private var sources: [Int: Source] = [:]

    init(loop: TransferLoop, target: Int) {
        self.loop = loop
        self.target = max(1, target)
    }

    /// Takes over the probe's connection as slot 0.
    func adoptProbe(_ connection: Connection, delegate: any ConnectionDelegate) {
        precondition(connections.isEmpty && connection.id == 0, "the probe's connection is the first")
        connection.delegate = delegate
        connections.append(connection)
    }

    /// Slot `index`: the one that exists, or a new one whose bytes go to `store`.
    func slot(_ index: Int, store: DownloadStore, object: RemoteObject, delegate: any ConnectionDelegate) -> Connection
    {
        if index < connections.count { return connections[index] }
        let connection = Connection(id: connections.count, loop: loop, delegate: delegate)
        connection.attach(to: store, object: object)
        connections.append(connection)
        return connection
    }

    var isAnyBusy: Bool { connections.contains(where: \.isBusy) }

    /// Connections transferring right now.
    var activeConnections: Int { connections.count(where: \.isTransferring) }

    /// Busy connections, for counting requests.
    var busyCount: Int { connections.count(where: \.isBusy) }

    /// Whether `connection` is one of the first ``target`` slots (the others wind down).
    func isWithinTarget(_ connection: Connection) -> Bool {
        connections.prefix(target).contains { $0 === connection }
    }

    /// Slots within ``target`` with nothing in flight, opening the missing ones.
    func idleWithinTarget(store: DownloadStore, object: RemoteObject, delegate: any ConnectionDelegate) -> [Connection]
    {
        while connections.count < target {
            _ = slot(connections.count, store: store, object: object, delegate: delegate)
        }
        return connections.prefix(target).filter { !$0.isBusy }
    }

    /// Idle slots within ``target``, counting those not opened yet.
    var idleCount: Int { target - connections.prefix(target).count(where: \.isBusy) }

    /// The connection filling `segment`, if any.
    func connection(filling segment: Segment) -> Connection? {
        connections.first { $0.segment === segment }
    }

    func connection(_ id: Int) -> Connection? {
        connections.indices.contains(id) ? connections[id] : nil
    }

    /// What the transfer policy sees of every slot.
    func samples(at now: ContinuousClock.Instant) -> [ConnectionSample] {
        connections.map { $0.sample(at: now) }
    }

    /// Samples every slot's rate (each housekeeping tick).
    func sampleRates(at now: ContinuousClock.Instant) {
        for connection in connections { connection.sampleRate(at: now) }
    }

    /// The rates of the slots transferring now.
    var transferringRates: [Double] {
        connections.filter(\.isTransferring).map(\.recentRate)
    }

    // MARK: Sources of requests in flight

    /// `connection`'s request goes to `source`.
    func send(_ connection: Connection, to source: Source) {
        sources[connection.id] = source
        source.active += 1
        source.health.willSend(by: connection.token)
    }

    /// The source of `connection`'s request in flight.
    func source(of id: Int) -> Source? {
        sources[id]
    }

    /// `connection`'s request ended: its source, which no longer counts it.
    func requestEnded(_ connection: Connection) -> Source? {
        guard let source = sources.removeValue(forKey: connection.id) else { return nil }
        source.active -= 1
        source.bytes += connection.bytesThisRequest
        return source
    }

    /// Cancels every exchange under way. A request in flight that was its host's trial (or was
    /// finding out whether the host went away) gives that role up first: the host's health is
    /// shared by every download of the downloader, and a stopped transfer hears no more ends, so a
    /// trial left in flight would hold back every other download of that host for good.
    func cancelAll() {
        for connection in connections {
            sources[connection.id]?.health.abandonTrial(by: connection.token)
            if connection.isBusy { connection.cancel() }
        }
    }
}
