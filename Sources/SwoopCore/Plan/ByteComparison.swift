/// Whether two runs of bytes are the same, eight bytes at a time.
///
/// The agreement ledger compares every byte two responses both delivered (the overlap of a
/// range with its neighbour, a hedge's duplicate): `elementsEqual` went byte by byte and was the
/// largest share of the transfer's own CPU on a large download. The core has no `memcmp`
/// (no libc), so this is the word-wise loop it would be.
package enum ByteComparison {
    package static func equal(_ first: some Collection<UInt8>, _ second: some Collection<UInt8>) -> Bool {
        guard first.count == second.count else { return false }
        let fast = first.withContiguousStorageIfAvailable { a in
            second.withContiguousStorageIfAvailable { b in equal(UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b)) }
        }
        return fast.flatMap { $0 } ?? first.elementsEqual(second)
    }

    package static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        let words = a.count / 8
        for word in 0..<words {
            let offset = word * 8
            if a.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                != b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            {
                return false
            }
        }
        for offset in (words * 8)..<a.count where a[offset] != b[offset] { return false }
        return true
    }
}
