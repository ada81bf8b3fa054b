import Swoop

/// Where adding connections stops paying, and why (`swoop bench`'s recommendation).
struct BenchKnee {
    /// The fewest connections within 5% of the best throughput.
    var recommended: ThroughputMeasurement
    /// What limits the rate there, in a few words.
    var reason: String
    /// Every connection is capped and the rate still grows at the most connections measured: more
    /// may add (the network's per-connection limit binds, whatever else is busy).
    var growsWithCount = false

    /// The knee of `results`; `nil` when nothing was measured.
    static func find(_ results: [ThroughputMeasurement]) -> BenchKnee? {
        let sorted = results.sorted { $0.connections < $1.connections }
        guard let best = sorted.map(\.bytesPerSecond).max(), best > 0,
            let recommended = sorted.first(where: { $0.bytesPerSecond >= 0.95 * best }),
            let fewest = sorted.first
        else { return nil }
        // Each connection delivers about what one alone does: a per-connection cap (a CDN's, a
        // server's limit_rate, a window over a long round trip), so the rate grows with the count.
        let perConnection = fewest.bytesPerSecondPerConnection
        let capped = recommended.bytesPerSecondPerConnection >= 0.8 * perConnection
        let reason = why(recommended: recommended, capped: capped, perConnection: perConnection, best: best, sorted)
        let grows = capped && recommended.connections == sorted.last?.connections
        return BenchKnee(recommended: recommended, reason: reason, growsWithCount: grows)
    }

    /// Why the rate stops growing at `recommended`: the server slows down with more connections
    /// (``BenchPath/slowsDown(beyond:_:)``), each connection is capped,
    /// or the link is saturated.
    private static func why(
        recommended: ThroughputMeasurement, capped: Bool, perConnection: Double, best: Double,
        _ sorted: [ThroughputMeasurement]
    ) -> String {
        let rates = sorted.map { (connections: $0.connections, rate: $0.bytesPerSecond) }
        if let most = BenchPath.slowsDown(beyond: recommended.connections, rates) {
            return "more connections than \(recommended.connections) are slower (\(Format.rate(most.rate)) "
                + "at \(most.connections))"
        }
        if capped && recommended.connections == sorted.last?.connections {
            return "each connection capped near \(Format.rate(perConnection)); more than \(recommended.connections) "
                + "connections may still add"
        }
        if capped && recommended.connections > (sorted.first?.connections ?? 1) {
            return "each connection capped near \(Format.rate(perConnection)) up to \(recommended.connections); "
                + "beyond, the link is saturated near \(Format.rate(best))"
        }
        return "the link is saturated near \(Format.rate(best))"
    }
}
