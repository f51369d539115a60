/// Validation of the device identifiers used in URLs and requests.
public enum DeviceID {
    /// Longest accepted device id, in bytes.
    public static let maximumLength = 128

    /// Returns nil when `id` is acceptable, else a sentence saying what is wrong.
    public static func problem(with id: String) -> String? {
        if id.isEmpty { return "device id is empty" }
        if id.utf8.count > maximumLength {
            return "device id is \(id.utf8.count) bytes; at most \(maximumLength) are allowed"
        }
        let allowed = id.unicodeScalars.allSatisfy { scalar in
            (scalar.value >= 0x30 && scalar.value <= 0x39) || (scalar.value >= 0x41 && scalar.value <= 0x5A)
                || (scalar.value >= 0x61 && scalar.value <= 0x7A) || "-_.:".unicodeScalars.contains(scalar)
        }
        return allowed ? nil : "device id may contain only letters, digits, '-', '_', '.' and ':'"
    }
}
