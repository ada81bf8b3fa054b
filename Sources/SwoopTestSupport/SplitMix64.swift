/// A small, fast, seedable generator (Steele, Lea & Flood's SplitMix64), so every randomised test
/// is reproducible from the seed it reports.
package struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension RandomNumberGenerator {
    /// A value in `range`, roughly uniform in its number of binary digits, so small and large
    /// magnitudes are both common.
    package mutating func logUniform(_ range: ClosedRange<Int64>) -> Int64 {
        precondition(range.lowerBound >= 0)
        let span = range.upperBound - range.lowerBound
        guard span > 0 else { return range.lowerBound }
        let bits = Int64.random(in: 0...Int64(64 - span.leadingZeroBitCount), using: &self)
        let cap = bits >= 63 ? span : min(span, (Int64(1) << bits) - 1)
        return range.lowerBound + Int64.random(in: 0...cap, using: &self)
    }

    /// `true` with probability `probability`.
    package mutating func chance(_ probability: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < probability
    }

    /// One of `choices`, each with its weight.
    package mutating func weighted<T>(_ choices: [(Int, T)]) -> T {
        let total = choices.reduce(0) { $0 + $1.0 }
        var pick = Int.random(in: 0..<total, using: &self)
        for (weight, value) in choices {
            if pick < weight { return value }
            pick -= weight
        }
        return choices[choices.count - 1].1
    }
}

/// A set of byte offsets as sorted, disjoint, non-adjacent half-open ranges.
package struct IntervalSet: Equatable, CustomStringConvertible {
    package private(set) var ranges: [Range<Int64>] = []

    package init() {}

    package init(_ ranges: [Range<Int64>]) {
        for range in ranges { formUnion(range) }
    }

    package var count: Int64 { ranges.reduce(0) { $0 + Int64($1.count) } }

    /// Index of the first stored range whose upper bound is above `offset`.
    private func firstIndex(endingAfter offset: Int64) -> Int {
        var low = 0, high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].upperBound <= offset { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Whether any offset of `range` is in the set.
    package func intersects(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return false }
        let index = firstIndex(endingAfter: range.lowerBound)
        return index < ranges.count && ranges[index].lowerBound < range.upperBound
    }

    /// Whether every offset of `range` is in the set.
    package func contains(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return true }
        let index = firstIndex(endingAfter: range.lowerBound)
        return index < ranges.count && ranges[index].lowerBound <= range.lowerBound
            && ranges[index].upperBound >= range.upperBound
    }

    /// How many offsets of `range` are in the set.
    package func overlapCount(_ range: Range<Int64>) -> Int64 {
        var total: Int64 = 0
        var index = firstIndex(endingAfter: range.lowerBound)
        while index < ranges.count, ranges[index].lowerBound < range.upperBound {
            total += min(ranges[index].upperBound, range.upperBound) - max(ranges[index].lowerBound, range.lowerBound)
            index += 1
        }
        return total
    }

    package mutating func formUnion(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var lower = range.lowerBound, upper = range.upperBound
        // Ranges touching or overlapping `range` merge with it.
        var first = firstIndex(endingAfter: lower)
        if first > 0, ranges[first - 1].upperBound == lower { first -= 1 }
        var last = first
        while last < ranges.count, ranges[last].lowerBound <= upper {
            lower = min(lower, ranges[last].lowerBound)
            upper = max(upper, ranges[last].upperBound)
            last += 1
        }
        ranges.replaceSubrange(first..<last, with: [lower..<upper])
    }

    /// The offsets of `self` not in `other`.
    package func subtracting(_ other: IntervalSet) -> IntervalSet {
        var result: [Range<Int64>] = []
        var index = 0
        for range in ranges {
            var lower = range.lowerBound
            while index < other.ranges.count, other.ranges[index].upperBound <= lower { index += 1 }
            var probe = index
            while probe < other.ranges.count, other.ranges[probe].lowerBound < range.upperBound {
                let cut = other.ranges[probe]
                if cut.lowerBound > lower { result.append(lower..<cut.lowerBound) }
                lower = max(lower, cut.upperBound)
                probe += 1
            }
            if lower < range.upperBound { result.append(lower..<range.upperBound) }
        }
        var set = IntervalSet()
        set.ranges = result
        return set
    }

    package var description: String { ranges.map { "\($0.lowerBound)..<\($0.upperBound)" }.joined(separator: ", ") }
}
