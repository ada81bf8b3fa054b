import SwoopStore
import SwoopCurl

/// The connection slots of one transfer: slot 0 is the probe's connection, the others open as
/// the ``TransferMachine`` gives them work. What each slot asks for, and where it goes, is the
/// machine's to decide. Transfer thread only.
final class ConnectionPool {
    private let loop: TransferLoop
    private(set) var connections: [Connection] = []

    init(loop: TransferLoop) {
        self.loop = loop
    }

    /// Takes over the probe's connection as slot 0.
    func adoptProbe(_ connection: Connection, delegate: any ConnectionDelegate) {
        precondition(connections.isEmpty && connection.id == 0, "the probe's connection is the first")
        connection.delegate = delegate
        connections.append(connection)
    }

    /// Slot `index`: the one that exists, or a new one (opening any below it first) whose bytes
    /// go to `store`.
    func slot(_ index: Int, store: DownloadStore, object: RemoteObject, delegate: any ConnectionDelegate) -> Connection
    {
        while connections.count <= index {
            let connection = Connection(id: connections.count, loop: loop, delegate: delegate)
            connection.attach(to: store, object: object)
            connections.append(connection)
        }
        return connections[index]
    }

    var isAnyBusy: Bool { connections.contains(where: \.isBusy) }

    /// Connections transferring right now.
    var activeConnections: Int { connections.count(where: \.isTransferring) }

    /// Busy connections, for counting requests.
    var busyCount: Int { connections.count(where: \.isBusy) }

    func connection(_ id: Int) -> Connection? {
        connections.indices.contains(id) ? connections[id] : nil
    }

    /// What the transfer policy sees of every slot.
    func samples(at now: Moment) -> [ConnectionSample] {
        connections.map { $0.sample(at: now) }
    }

    /// Samples every slot's rate (each housekeeping tick).
    func sampleRates(at now: Moment) {
        for connection in connections { connection.sampleRate(at: now) }
    }

    /// Cancels every exchange under way (the machine gave up their sources' trials first).
    func cancelAll() {
        for connection in connections where connection.isBusy { connection.cancel() }
    }
}
