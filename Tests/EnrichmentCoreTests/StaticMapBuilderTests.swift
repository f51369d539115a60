import Crypto
import EnrichmentCore
import Essentials
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Static map URLs")
struct StaticMapBuilderTests {
    let user = Coordinate(latitude: 43.6, longitude: 3.88)
    let poi = Coordinate(latitude: 43.61, longitude: 3.8772)

    @Test("one marker: blue user marker, zoom 15, current base, no sensor")
    func oneMarker() throws {
        let url = try StaticMapBuilder(apiKey: "K").url(user: user, poi: nil)
        #expect(
            url
                == "https://maps.googleapis.com/maps/api/staticmap?markers=color:blue%7C43.600000,3.880000&zoom=15&size=400x400&key=K"
        )
    }

    @Test("with a POI: red user, blue POI, zoom 14")
    func twoMarkers() throws {
        let url = try StaticMapBuilder(apiKey: "K").url(user: user, poi: poi)
        #expect(
            url
                == "https://maps.googleapis.com/maps/api/staticmap?markers=color:red%7C43.600000,3.880000&markers=color:blue%7C43.61,3.8772&zoom=14&size=400x400&key=K"
        )
    }

    @Test("legacy form: SDK base and sensor=true")
    func legacy() throws {
        let url = try StaticMapBuilder(style: .legacy, apiKey: "K").url(user: user, poi: nil)
        #expect(
            url
                == "http://maps.google.com/maps/api/staticmap?markers=color:blue%7C43.600000,3.880000&zoom=15&size=400x400&sensor=true&key=K"
        )
    }

    @Test("Google's published URL-signing example")
    func googleSigningVector() throws {
        // From Google's "Digital signature" documentation (Maps Platform, URL signing).
        let key = SymmetricKey(data: StaticMapBuilder.decodeURLSafeBase64("vNIXE0xscrmjlyV-12Nj_BvUPaw=")!)
        let signature = StaticMapBuilder.signature(
            for: "https://maps.googleapis.com/maps/api/geocode/json?address=New+York&client=clientID", key: key)
        #expect(signature == "chaRF2hTJKOScPr-RQCEhZbSzIE=")
    }

    @Test("a signed URL ends with the signature of everything before it")
    func signedURL() throws {
        let secret: Secret = "vNIXE0xscrmjlyV-12Nj_BvUPaw="
        let url = try StaticMapBuilder(apiKey: "K", signingSecret: secret).url(user: user, poi: nil)
        let parts = url.components(separatedBy: "&signature=")
        #expect(parts.count == 2)
        let key = SymmetricKey(data: StaticMapBuilder.decodeURLSafeBase64(secret.exposed)!)
        let mac = HMAC<Insecure.SHA1>.authenticationCode(
            for: Data("/maps/api/staticmap?markers=color:blue%7C43.600000,3.880000&zoom=15&size=400x400&key=K".utf8),
            using: key)
        let expected = Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/", with: "_")
        #expect(parts[1] == expected)
    }

    @Test("bad configuration is refused with a reason")
    func badConfiguration() {
        #expect(throws: MapConfigurationError.invalidBaseURL("maps")) { try StaticMapBuilder(baseURL: "maps") }
        #expect(throws: MapConfigurationError.invalidSigningSecret) { try StaticMapBuilder(signingSecret: "!!!") }
    }

    /// C's `printf("%f", value)` through `snprintf` with a fixed-size buffer (not the code under test).
    static func cPrintf(_ value: Double) -> String {
        var buffer = [CChar](repeating: 0, count: 512)
        _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%f", $0) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test(
        "the user marker is C's %f of each coordinate, as the SDK writes it",
        arguments: [
            (48.85837, "48.858370"), (-33.8567845, "-33.856785"), (-4e-7, "-0.000000"), (-0.0, "-0.000000"),
            (0.0, "0.000000"), (180.0, "180.000000"), (-180.0, "-180.000000"), (90.0, "90.000000"),
            (-90.0, "-90.000000"),
        ])
    func userMarkerIsPrintfF(value: Double, expected: String) throws {
        #expect(Self.cPrintf(value) == expected)
        let url = try StaticMapBuilder(apiKey: "K").url(user: Coordinate(latitude: value, longitude: value), poi: nil)
        #expect(url.contains("markers=color:blue%7C\(expected),\(expected)&zoom=15"))
    }

    @Test("rounding edges: x.xxxxxx5 and its neighbours agree with printf, bit for bit")
    func userMarkerRoundingEdges() throws {
        // Decimal halves are rarely exact in binary: printf rounds the exact binary value, so each of these goes
        // the way its bits say; the marker must go the same way.
        var values: [Double] = [
            0.0000005, -0.0000005, 1.0000005, 2.5000005, 48.8583705, -33.8567845, 179.9999995, -179.9999995,
            89.9999995, -89.9999995, 0.0000015, 12.3456785, 45.0000025,
        ]
        for value in values {
            values.append(value.nextUp)
            values.append(value.nextDown)
        }
        let builder = try StaticMapBuilder(apiKey: "K")
        for value in values {
            let user = Coordinate(latitude: max(-90, min(90, value)), longitude: value)
            let expected = "\(Self.cPrintf(user.latitude)),\(Self.cPrintf(user.longitude))"
            #expect(StaticMapBuilder.userMarker(user) == expected, "\(value)")
            #expect(builder.url(user: user, poi: nil).contains("%7C\(expected)&"), "\(value)")
        }
        #expect(
            StaticMapBuilder.userMarker(Coordinate(latitude: 179.9999995, longitude: -33.8567845)).hasSuffix(
                ",-33.856785"))
    }

    @Test("the POI marker keeps Swift's Double description, as the SDK writes it")
    func poiMarkerIsSwiftDescription() throws {
        let url = try StaticMapBuilder(apiKey: "K").url(
            user: Coordinate(latitude: 51.50976, longitude: -0.145276),
            poi: Coordinate(latitude: 51.5088, longitude: 1e-05))
        #expect(url.contains("markers=color:red%7C51.509760,-0.145276&markers=color:blue%7C51.5088,1e-05&zoom=14"))
    }

    @Test("a builder describes itself without its key")
    func builderIsRedacted() throws {
        let builder = try StaticMapBuilder(apiKey: "canary-map-key", signingSecret: "vNIXE0xscrmjlyV-12Nj_BvUPaw=")
        var dumped = ""
        dump(builder, to: &dumped)
        for text in [String(describing: builder), String(reflecting: builder), "\(builder)", dumped] {
            #expect(!text.contains("canary-map-key"))
            #expect(!text.contains("vNIXE0x"))
        }
        // The decoded secret's bytes are not listed either (a small Data's mirror would list each one).
        let decoded = try #require(StaticMapBuilder.decodeURLSafeBase64("vNIXE0xscrmjlyV-12Nj_BvUPaw="))
        let listed = decoded.prefix(4).map { "- \($0)" }
        #expect(!listed.allSatisfy { dumped.contains($0) }, "\(dumped)")
        #expect(dumped.contains(Secret.redacted))
    }
}
