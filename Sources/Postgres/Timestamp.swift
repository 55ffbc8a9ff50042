import Foundation

/// Fast conversion between `Date` and PostgreSQL's ISO timestamptz text, without a DateFormatter
/// (which costs microseconds per call and would dominate a job that reads a million rows).
/// Connections set `TimeZone = 'UTC'` and `DateStyle = 'ISO'`, so the server always writes
/// `YYYY-MM-DD HH:MM:SS[.ffffff]+00`.
public enum Timestamp {
    /// `2026-11-22 00:10:04.123456+00` (microsecond precision, UTC).
    public static func format(_ date: Date) -> String {
        // PostgreSQL's infinities, as `Row` reads them: written back as themselves (not year 1 or 4001).
        if date == .distantPast { return "-infinity" }
        if date == .distantFuture { return "infinity" }
        let totalMicros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        var seconds = totalMicros / 1_000_000
        var micros = totalMicros % 1_000_000
        if micros < 0 { micros += 1_000_000; seconds -= 1 }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (y, m, d) = civil(fromDays: days)
        var text = pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + " "
        text += pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay % 3600 / 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if micros != 0 { text += "." + pad(micros, 6) }
        return text + "+00"
    }

    /// ISO 8601 with a `T` and `Z`, for JSON output and messages: `2026-11-22T00:10:04Z`.
    public static func iso8601(_ date: Date) -> String {
        // A row's -infinity read "0000-12-30T00:00:00Z" in `why` (its joined_at, say).
        if date == .distantPast { return "-infinity" }
        if date == .distantFuture { return "infinity" }
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (y, m, d) = civil(fromDays: days)
        return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay % 3600 / 60, 2) + ":" + pad(secondOfDay % 60, 2) + "Z"
    }

    /// Parses the server's text for a timestamptz (or timestamp, read as UTC). Returns nil if malformed.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0
        func number(_ count: Int) -> Int64? {
            guard index + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for _ in 0..<count {
                let c = bytes[index]
                guard c >= 48, c <= 57 else { return nil }
                value = value * 10 + Int64(c - 48)
                index += 1
            }
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == c else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2),
              month >= 1, month <= 12, day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        var seconds = days(fromCivil: year, month, day) * 86_400
        var micros: Int64 = 0
        if index < bytes.count {
            guard expect(32) || expect(84) else { return nil } // ' ' or 'T'
            // 60 seconds: a leap second, as ISO 8601 and PostgreSQL allow.
            guard let h = number(2), expect(58), let mi = number(2), expect(58), let s = number(2), h <= 23, mi <= 59, s <= 60 else { return nil }
            seconds += h * 3600 + mi * 60 + s
            if index < bytes.count, bytes[index] == 46 { // '.'
                index += 1
                var digits = 0
                while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                    if digits < 6 { micros = micros * 10 + Int64(bytes[index] - 48); digits += 1 }
                    index += 1
                }
                while digits < 6 { micros *= 10; digits += 1 }
            }
            if index < bytes.count {
                let sign = bytes[index]
                if sign == 90 { index += 1 } // 'Z'
                else {
                    guard sign == 43 || sign == 45 else { return nil }
                    index += 1
                    guard let oh = number(2), oh <= 15 else { return nil } // PostgreSQL's range: ±15:59:59
                    var offset = oh * 3600
                    if expect(58) { guard let om = number(2), om <= 59 else { return nil }; offset += om * 60 }
                    if expect(58) { guard let os = number(2), os <= 59 else { return nil }; offset += os }
                    seconds -= sign == 43 ? offset : -offset
                }
            }
        }
        guard index == bytes.count else { return nil }
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    /// The days in `month` of `year` (proleptic Gregorian).
    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Parses ISO 8601 from a person (`--now 2026-11-22T08:00:00Z`, `2026-11-22T08:00:00+01:00`, `2026-11-22`).
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    // Howard Hinnant's days_from_civil / civil_from_days (public domain), proleptic Gregorian.
    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
