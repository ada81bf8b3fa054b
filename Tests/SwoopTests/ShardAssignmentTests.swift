import Testing
import Swoop

/// How a list is split over workers: both rules are part of Swoop's stable behaviour, because
/// machines running different releases must compute the same split.
@Suite("ShardAssignment")
struct ShardAssignmentTests {
    /// Pinned values: if one of these changes, machines on the old and the new release would
    /// fetch some files twice and others never. Change them only with a note in the release.
    @Test func hashIsPinned() {
        #expect(ShardAssignment.hash("") == 0xe3b0_c442_98fc_1c14)
        #expect(ShardAssignment.hash("a") == 0xca97_8112_ca1b_bdca)
        #expect(ShardAssignment.hash("https://data.example.com/v2/shard-000.parquet") == 0xc0a4_daa7_cf3d_26b9)
        let four = ShardAssignment(count: 4)
        #expect(four.worker(forKey: "https://data.example.com/v2/shard-000.parquet") == 1)
        #expect(four.worker(forKey: "https://data.example.com/v2/shard-001.parquet") == 0)
        #expect(four.worker(forKey: "http://127.0.0.1:8080/a.bin?rate=2m") == 1)
        #expect(four.worker(forKey: "http://127.0.0.1:8080/a.bin?rate=8m") == 0)
        let seven = ShardAssignment(count: 7)
        #expect(seven.worker(forKey: "https://data.example.com/v2/shard-001.parquet") == 4)
        #expect(seven.worker(forKey: "e") == 4)
        #expect(ShardAssignment(count: 1).worker(forKey: "anything") == 0)
    }

    /// FNV-1a modulo a power of two looked only at the low bits of each byte: keys that differed
    /// in one character fell into a fixed pattern. Every bit of this hash mixes the whole key.
    @Test func oneCharacterApartSpreadsEvenly() {
        let four = ShardAssignment(count: 4)
        var counts = [0, 0, 0, 0]
        for index in 0..<4000 { counts[four.worker(forKey: "http://127.0.0.1/f.bin?rate=\(index)m")] += 1 }
        #expect(counts.allSatisfy { (900...1100).contains($0) }, "\(counts)")
    }

    @Test func bySizeLargestFirstToTheLightestWorker() {
        var sizes = ShardAssignment.Sizes()
        let big = (0..<4).map { "big-\($0)" }
        for key in big { sizes.add(key: key, size: 64 << 20) }
        for index in 0..<200 { sizes.add(key: "small-\(index)", size: 100_000 + Int64(index % 7) * 1000) }
        let split = ShardAssignment(count: 4, sizes: sizes)
        #expect(split.isBalancedBySize)
        #expect(Set(big.map(split.worker(forKey:))) == [0, 1, 2, 3], "one large file per worker")
        let loads = (0..<4).compactMap { split.load(ofWorker: $0) }
        #expect(loads.map(\.files).reduce(0, +) == 204)
        let bytes = loads.map(\.bytes)
        #expect(bytes.max()! - bytes.min()! <= 106_000, "within the largest small file: \(bytes)")
        // The same sizes added in another order give the same split.
        var reversed = ShardAssignment.Sizes()
        for index in (0..<200).reversed() {
            reversed.add(key: "small-\(index)", size: 100_000 + Int64(index % 7) * 1000)
        }
        for key in big.reversed() { reversed.add(key: key, size: 64 << 20) }
        let again = ShardAssignment(count: 4, sizes: reversed)
        for key in big + (0..<200).map({ "small-\($0)" }) {
            #expect(again.worker(forKey: key) == split.worker(forKey: key))
        }
    }

    @Test func bySizeIsPinned() {
        var sizes = ShardAssignment.Sizes()
        for (key, size) in [("a", 10), ("b", 10), ("c", 30), ("d", 5), ("e", 10)] {
            sizes.add(key: key, size: Int64(size))
        }
        let split = ShardAssignment(count: 3, sizes: sizes)
        // c (30) → 0; the 10s in hash order: b (0x3e23…) → 1, e (0x3f79…) → 2, a (0xca97…) → 1
        // (1 and 2 hold 10 each: the lower index); d (5) → 2, the lightest.
        let workers = ["a", "b", "c", "d", "e"].map(split.worker(forKey:))
        #expect(workers == [1, 1, 0, 2, 2], "\(workers)")
        #expect(split.worker(forKey: "not in the list") == ShardAssignment(count: 3).worker(forKey: "not in the list"))
    }

    @Test func aKeyListedTwiceIsOneFileOfItsLargestSize() {
        var sizes = ShardAssignment.Sizes()
        sizes.add(key: "x", size: 5)
        sizes.add(key: "x", size: 50)
        sizes.add(key: "y", size: 20)
        #expect(sizes.count == 2)
        let split = ShardAssignment(count: 2, sizes: sizes)
        let x = split.worker(forKey: "x")
        #expect(split.load(ofWorker: x)?.bytes == 50)
        #expect(split.load(ofWorker: x)?.files == 2, "both entries of x are fetched by that worker")
        #expect(split.worker(forKey: "y") == 1 - x)
    }
}
