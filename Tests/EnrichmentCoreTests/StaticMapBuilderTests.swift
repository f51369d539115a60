import Crypto
import EnrichmentCore
import Foundation
import Testing

@Suite("Static map URLs")
struct StaticMapBuilderTests {
    let user = Coordinate(latitude: 43.6, longitude: 3.88)
    let poi = Coordinate(latitude: 43.61, longitude: 3.8772)

    @Test("one marker: blue user marker, zoom 15, current base, no sensor")
    func oneMarker() throws {
        let url = try StaticMapBuilder(apiKey: "K").url(user: user, poi: nil)
        #expect(
            url
                == "https://maps.googleapis.com/maps/api/staticmap?markers=color:blue%7C43.6,3.88&zoom=15&size=400x400&key=K"
        )
    }

    @Test("with a POI: red user, blue POI, zoom 14")
    func twoMarkers() throws {
        let url = try StaticMapBuilder(apiKey: "K").url(user: user, poi: poi)
        #expect(
            url
                == "https://maps.googleapis.com/maps/api/staticmap?markers=color:red%7C43.6,3.88&markers=color:blue%7C43.61,3.8772&zoom=14&size=400x400&key=K"
        )
    }

    @Test("legacy form: SDK base and sensor=true")
    func legacy() throws {
        let url = try StaticMapBuilder(style: .legacy, apiKey: "K").url(user: user, poi: nil)
        #expect(
            url
                == "http://maps.google.com/maps/api/staticmap?markers=color:blue%7C43.6,3.88&zoom=15&size=400x400&sensor=true&key=K"
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
        let secret = "vNIXE0xscrmjlyV-12Nj_BvUPaw="
        let url = try StaticMapBuilder(apiKey: "K", signingSecret: secret).url(user: user, poi: nil)
        let parts = url.components(separatedBy: "&signature=")
        #expect(parts.count == 2)
        let key = SymmetricKey(data: StaticMapBuilder.decodeURLSafeBase64(secret)!)
        let mac = HMAC<Insecure.SHA1>.authenticationCode(
            for: Data("/maps/api/staticmap?markers=color:blue%7C43.6,3.88&zoom=15&size=400x400&key=K".utf8), using: key)
        let expected = Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/", with: "_")
        #expect(parts[1] == expected)
    }

    @Test("bad configuration is refused with a reason")
    func badConfiguration() {
        #expect(throws: MapConfigurationError.invalidBaseURL("maps")) { try StaticMapBuilder(baseURL: "maps") }
        #expect(throws: MapConfigurationError.invalidSigningSecret) { try StaticMapBuilder(signingSecret: "!!!") }
    }
}
