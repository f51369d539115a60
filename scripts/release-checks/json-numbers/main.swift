// The JSON parser's number fast paths on an optimised build, bit for bit against strtod (scripts/check-release-vectors.sh
// compiles this with `swiftc -O` together with Sources/Essentials; the debug test run is JSONNumberTests).
// Integers are read digit by digit and decimals by Clinger's fast path (one correctly rounded division or
// multiplication); both must give what Int64(text) and Double(text) give, on numbers drawn like JSONNumberTests'.
import Foundation

var state: UInt64 = 0x1234_5678
func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}
func draw(_ n: Int) -> Int { Int(next() % UInt64(n)) }

let digits = Array("0123456789")
var mismatches = 0
var doubles = 0
let count = 2_000_000
for _ in 0..<count {
    var text = draw(2) == 0 ? "-" : ""
    if draw(8) == 0 {
        text += "0"
    } else {
        text.append(digits[1 + draw(9)])
        for _ in 0..<draw(20) { text.append(digits[draw(10)]) }
    }
    if draw(4) > 0 {
        text += "." + String(repeating: "0", count: draw(4))
        for _ in 0...draw(18) { text.append(digits[draw(10)]) }
    }
    if draw(3) == 0 { text += ["e", "E", "e+", "e-"][draw(4)] + String(draw(40)) }
    var expected: JSONValue?
    if !text.contains(where: { ".eE".contains($0) }), let value = Int64(text) {
        expected = .int(value)
    } else if let double = Double(text), double.isFinite {
        expected = double == double.rounded() && abs(double) <= 9_007_199_254_740_992 ? .int(Int64(double)) : .double(double)
    }
    let parsed: JSONValue?
    if case .array(let items)? = try? JSONValue.decode(Data("[\(text)]".utf8)), items.count == 1 {
        parsed = items[0]
    } else {
        parsed = nil
    }
    switch (parsed, expected) {
    case (.double(let a), .double(let b)) where a.bitPattern == b.bitPattern: doubles += 1
    case (.double, _), (_, .double): mismatches += 1
    default: if parsed != expected { mismatches += 1 }
    }
    if mismatches > 0, mismatches < 5, parsed != expected { print("mismatch: \(text) read as \(String(describing: parsed)), strtod \(String(describing: expected))") }
}
print("JSON numbers on an optimised build: \(count) read, \(doubles) of them doubles, \(mismatches) mismatches")
exit(mismatches == 0 ? 0 : 1)
