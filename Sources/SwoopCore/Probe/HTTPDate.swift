/// HTTP dates as servers send them in `Last-Modified` (RFC 9110 §5.6.7's IMF-fixdate,
/// `Sun, 06 Nov 1994 08:49:37 GMT`), as seconds since 1970, to tell which of two dates is later.
/// The core has no Foundation; the obsolete formats are not read (a date that does not parse
/// is compared as text only).
package enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since 1970-01-01 00:00:00 UTC, or `nil` when `text` is not an IMF-fixdate.
    package static func seconds(_ text: String) -> Int64? {
        let fields = text.split(separator: " ")
        guard fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT",
            let day = Int64(fields[1]), let monthIndex = months.firstIndex(of: String(fields[2])),
            let year = Int64(fields[3])
        else { return nil }
        let time = fields[4].split(separator: ":")
        guard time.count == 3, let hour = Int64(time[0]), let minute = Int64(time[1]), let second = Int64(time[2]),
            (1...31).contains(day), (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second)
        else { return nil }
        return daysSinceEpoch(year: year, month: Int64(monthIndex) + 1, day: day) * 86_400
            + hour * 3600 + minute * 60 + second
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// days-from-civil algorithm).
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
