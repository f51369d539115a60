/// Checks shared by everything that stores text a client sent (ids, network names, OpenLocate strings).
public enum InputText {
    /// True when the text holds a control character (C0, DEL or C1): PostgreSQL cannot store NUL, and none of
    /// them belongs in an id or a name.
    public static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// True for a Wi-Fi access point address written `aa:bb:cc:dd:ee:ff` (hex, either case).
    public static func isMACAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }
}
